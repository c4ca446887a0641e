"""A LakeTable whose spec names another lock than the table records has it switched by the operator
(lakecore's set_lock_provider: both locks held while table.json changes, so no commit runs under either),
with an Event; the next pass adopts the table as it is. Writers that opened the table before stop at
their next critical section and reopen it with the new lock."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.config import LockSpec
from lakeoperator.reconcile import reconcile_table

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def table_body(location: Path, lock: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"location": str(location), "recordKey": ["id"],
                            "schema": [{"name": "id", "type": "int64", "nullable": False},
                                       {"name": "v", "type": "string"}]}
    if lock is not None:
        spec["lock"] = lock
    return {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeTable",
            "metadata": {"name": "orders", "namespace": "default", "uid": "u1", "generation": 1},
            "spec": spec}


@pytest.mark.zookeeper
def test_a_spec_naming_a_zookeeper_lock_switches_the_tables_lock(tmp_path, zookeeper_server):
    body = table_body(tmp_path / "orders")
    body["status"] = reconcile_table(body, NOW).status
    assert body["status"]["phase"] == "Ready"
    Table.open(str(tmp_path / "orders")).upsert(pa.table({"id": [1], "v": ["a"]}))

    edited = copy.deepcopy(body)
    edited["metadata"]["generation"] = 2
    edited["spec"]["lock"] = {"provider": "zookeeper",
                              "zookeeper": {"connect": zookeeper_server.connect_string}}
    out = reconcile_table(edited, NOW)
    assert out.status["phase"] == "Ready", out.status.get("lastError")
    recorded = Table.open(str(tmp_path / "orders")).config.lock
    assert recorded.provider == "zookeeper" and recorded.connect == zookeeper_server.connect_string
    switched = [e for e in out.events if e[:2] == ("Normal", "LockSwitched")]
    assert switched and "now the ZooKeeper lock /weir/locks/" in switched[0][2], out.events

    edited["status"] = out.status
    again = reconcile_table(edited, NOW)   # the table records the spec's lock now: nothing to do
    assert again.status["phase"] == "Ready" and again.events == ()
    table = Table.open(str(tmp_path / "orders"), lock=LockSpec("zookeeper",
                                                                connect=zookeeper_server.connect_string))
    table.upsert(pa.table({"id": [2], "v": ["b"]}))
    assert sorted(table.read().column("id").to_pylist()) == [1, 2]
