"""Jobs take the lock the table records: without --zookeeper they use it whatever it is; with it, the
connect string must name the table's ZooKeeper ensemble, and a job given one for a table that records
another lock is refused as bad input (a restart would not fix it)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.concurrency import spec_of
from lakecore.config import LockSpec
from lakecore.errors import LockProviderMismatch
from sparkjobs.contract import EXIT_BAD_INPUT
from sparkjobs.entry import open_table, run_job

SCHEMA = pa.schema([("id", pa.int64())])


def test_without_the_option_a_job_takes_the_recorded_lock(tmp_path: Path) -> None:
    storage_table, zk_table = str(tmp_path / "s"), str(tmp_path / "z")
    Table.create(storage_table, schema=SCHEMA, record_key="id")
    Table.create(zk_table, schema=SCHEMA, record_key="id", lock=LockSpec("zookeeper", connect="zk:2181"))
    assert spec_of(open_table(storage_table, None).lock) == LockSpec("storage")
    zk = open_table(zk_table, None).lock
    recorded = Table.open(zk_table).config.lock
    assert recorded.provider == "zookeeper" and recorded.connect == "zk:2181" and spec_of(zk) == recorded
    assert spec_of(open_table(zk_table, "zk:2181").lock) == spec_of(zk)


def test_a_zookeeper_option_that_contradicts_the_table_is_refused_as_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    storage_table, zk_table = str(tmp_path / "s"), str(tmp_path / "z")
    Table.create(storage_table, schema=SCHEMA, record_key="id")
    Table.create(zk_table, schema=SCHEMA, record_key="id", lock=LockSpec("zookeeper", connect="zk:2181"))
    for uri, connect in ((storage_table, "zk:2181"), (zk_table, "other:2181")):
        with pytest.raises(LockProviderMismatch):
            open_table(uri, connect)
        code = run_job(lambda uri=uri, connect=connect: (uri, connect), lambda a: {"t": open_table(*a)},
                       done="done", bad_input=(), conflict=())
        out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert code == EXIT_BAD_INPUT and out["outcome"] == "bad_input", out
        assert "LockProviderMismatch" in out["error"] and "set-lock" in out["error"]
