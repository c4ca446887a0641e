"""A LakeTable whose lock's ZooKeeper cannot be reached showed Ready (only the operator's log said
otherwise), and its writers and services started jobs that could only fail on the lock. It is now
Failed with reason LockUnreachable, naming the ensemble; its TableService waits (TableNotReady); once
ZooKeeper answers, the next pass makes it Ready (here the ensemble is a real ZooKeeper behind a TCP
proxy that is down, then up)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lakeoperator.builders.driver_pod import PodSettings
from lakeoperator.launch.local import LocalLauncher
from lakeoperator.local import Runner, StateDir, apply
from tests.support.tcp_faults import StallingProxy


def manifests(lake: Path, connect: str) -> list[dict[str, Any]]:
    table = {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeTable",
             "metadata": {"namespace": "default", "name": "orders"},
             "spec": {"location": str(lake), "recordKey": ["id"], "tableType": "merge_on_read",
                      "lock": {"provider": "zookeeper", "zookeeper": {"connect": connect}},
                      "schema": [{"name": "id", "type": "int64", "nullable": False},
                                 {"name": "ts", "type": "int64"}]}}
    service = {"apiVersion": "weir.dev/v1alpha1", "kind": "TableService",
               "metadata": {"namespace": "default", "name": "orders-compact"},
               "spec": {"tableRef": {"name": "orders"}, "type": "compaction",
                        "trigger": {"afterDeltaCommits": 1}}}
    return [table, service]


def ready_of(state: StateDir, kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    (found,) = state.all(kind)
    status = dict(found.body.get("status") or {})
    return status, next((c for c in status.get("conditions") or () if c["type"] == "Ready"), {})


def steps(run: Runner, until: Callable[[], bool], n: int = 30) -> None:
    for _ in range(n):
        run.step()
        if until():
            return
    raise AssertionError("not reached")


@pytest.mark.zookeeper
def test_a_table_is_not_ready_while_its_zookeeper_does_not_answer(tmp_path, zookeeper_server, monkeypatch):
    monkeypatch.setattr("lakeoperator.observe.LOCK_PROBE_S", 1.0)
    zk_port = int(zookeeper_server.connect_string.split(",")[0].rsplit(":", 1)[1])
    proxy = StallingProxy(zk_port)   # its port names the ensemble; nothing listens there until start()
    connect = proxy.connect_string
    state = StateDir(tmp_path / "state")
    apply(state, manifests(tmp_path / "lake" / "orders", connect), datetime.now(UTC))
    launcher = LocalLauncher(tmp_path / "state" / "pods-state")
    run = Runner(state, launcher, PodSettings(), clock=lambda: datetime.now(UTC), supervise=False)
    try:
        steps(run, lambda: ready_of(state, "LakeTable")[1].get("reason") == "LockUnreachable")
        status, ready = ready_of(state, "LakeTable")
        assert status["phase"] == "Failed" and ready["status"] == "False", status
        assert f"cannot reach ZooKeeper at {connect}" in ready["message"], ready
        steps(run, lambda: ready_of(state, "TableService")[1].get("reason") == "TableNotReady")
        assert "LockUnreachable" in ready_of(state, "TableService")[1]["message"]
        assert launcher.pods() == []

        proxy.start()   # ZooKeeper answers from now on
        steps(run, lambda: ready_of(state, "LakeTable")[0].get("phase") == "Ready")
        assert ready_of(state, "LakeTable")[1]["reason"] == "TableReady"
        steps(run, lambda: ready_of(state, "TableService")[1].get("status") == "True")
    finally:
        proxy.stop()
        launcher.close()
