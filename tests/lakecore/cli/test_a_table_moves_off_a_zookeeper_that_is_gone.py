"""A table whose ZooKeeper is gone for good (a placeholder connect string, a decommissioned ensemble) can
be moved to another lock: `weir table set-lock --old-lock-gone` changes table.json holding the new lock
only, and refuses while a write's writer is alive. Without the flag the refusal says how. Before, every
way out needed the old lock, so the table could not be written again (only deleting it helped)."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from lakecore import LockSpec, Table
from lakecore.concurrency import begin_write
from lakecore.concurrency.liveness.heartbeat import Heartbeat, HeartbeatConfig
from lakecore.config import CONFIG_PATH
from lakecore.errors import WriterLive
from tests.lakecore.cli.test_weir_table_commands import weir
from tests.support.tcp_faults import StallingProxy

pytestmark = [pytest.mark.zookeeper]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def zookeeper_table(uri: str, proxy: StallingProxy) -> Table:
    t = Table.create(uri, schema=SCHEMA, record_key="id",
                     lock=LockSpec("zookeeper", connect=proxy.connect_string))
    t.upsert(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    return t


def test_set_lock_moves_a_table_off_a_zookeeper_that_is_gone(tmp_path, zookeeper_server: Any) -> None:
    uri = str(tmp_path / "t")
    with StallingProxy(zookeeper_server.port) as proxy:
        zookeeper_table(uri, proxy)
    config = (tmp_path / "t" / CONFIG_PATH).read_bytes()   # ZooKeeper is unreachable from here on

    code, said = weir("table", "set-lock", uri, "--lock-provider", "storage", "--timeout", "5")
    assert code == 1 and f"weir table set-lock {uri} --lock-provider storage --old-lock-gone" in said, said
    assert (tmp_path / "t" / CONFIG_PATH).read_bytes() == config

    code, said = weir("table", "set-lock", uri, "--lock-provider", "storage", "--old-lock-gone",
                      "--timeout", "5", "--json")
    assert code == 0, said
    assert json.loads(said)["after"] == {"provider": "storage"}
    t = Table.open(uri)
    t.upsert(pa.table({"id": [3], "v": ["c"]}, schema=SCHEMA))
    assert sorted(r["id"] for r in t.read().to_pylist()) == [1, 2, 3]


def test_a_live_writer_keeps_the_old_lock(tmp_path, zookeeper_server: Any) -> None:
    uri = str(tmp_path / "t")
    with StallingProxy(zookeeper_server.port) as proxy:
        t = zookeeper_table(uri, proxy)
        txn = begin_write(t.storage, t.config, t.lock, "upsert")
        beat = Heartbeat(t.storage, txn.instant.requested_time, HeartbeatConfig(interval_s=60)).start()
    config = (tmp_path / "t" / CONFIG_PATH).read_bytes()
    try:
        with pytest.raises(WriterLive, match=r"is live on the table; changing the lock without the old one"):
            Table.open(uri).set_lock_provider(LockSpec("storage"), timeout=5, unreachable_ok=True)
        assert (tmp_path / "t" / CONFIG_PATH).read_bytes() == config
    finally:
        beat.stop()
