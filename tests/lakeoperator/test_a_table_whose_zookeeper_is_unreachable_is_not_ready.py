"""A LakeTable whose lock's ZooKeeper cannot be reached showed Ready (only the operator's log said
otherwise), and its writers and services started jobs that could only fail on the lock. It is now
Failed with reason LockUnreachable, naming the ensemble; its TableService waits (TableNotReady); once
ZooKeeper answers, the next pass makes it Ready (here the ensemble is a real ZooKeeper behind a TCP
proxy that is down, then up)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lakeoperator.builders.driver_pod import PodSettings
from lakeoperator.launch.local import LocalLauncher
from lakeoperator.local import Runner, StateDir, apply
from lakeoperator.observe import lock_error
from lakeoperator.specs import parse_lake_table
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


def steps(run: Runner, until: Callable[[], bool], within_s: float = 60.0) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        run.step()
        if until():
            return
        time.sleep(0.1)
    raise AssertionError("not reached")


@pytest.mark.zookeeper
def test_a_table_is_not_ready_while_its_zookeeper_does_not_answer(tmp_path, zookeeper_server, monkeypatch):
    monkeypatch.setattr("lakeoperator.observe.LOCK_PROBE_S", 1.0)
    monkeypatch.setattr("lakeoperator.observe.PROBE_MEMORY_S", 1.0)
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


@pytest.mark.zookeeper
def test_tables_on_one_unreachable_ensemble_wait_for_one_probe(tmp_path, zookeeper_server, monkeypatch):
    """While ZooKeeper is down, each LakeTable pass waited LOCK_PROBE_S for it: with many tables on one
    ensemble, the operator's workers spent most of their time waiting. Now the passes of those tables,
    at the same time or within PROBE_MEMORY_S, share one probe and its answer; once the ensemble answers,
    the next probe after that says so."""
    from lakecore.concurrency.zookeeper import shared_clients

    monkeypatch.setattr("lakeoperator.observe.LOCK_PROBE_S", 1.0)
    zk_port = int(zookeeper_server.connect_string.split(",")[0].rsplit(":", 1)[1])
    proxy = StallingProxy(zk_port)
    asked: list[str] = []
    real = shared_clients.client

    def counted(endpoint, *args, **kwargs):
        asked.append(endpoint.connect)
        return real(endpoint, *args, **kwargs)

    monkeypatch.setattr(shared_clients, "client", counted)
    specs = [parse_lake_table({**manifests(tmp_path / f"t{i}", proxy.connect_string)[0],
                               "metadata": {"namespace": "default", "name": f"t{i}"}}) for i in range(4)]
    said: list[str | None] = [None] * len(specs)

    def observe(i: int) -> None:
        said[i] = lock_error(specs[i], None)

    try:
        passes = [threading.Thread(target=observe, args=(i,)) for i in range(len(specs))]
        for p in passes:
            p.start()
        for p in passes:
            p.join()
        assert asked == [proxy.connect_string], asked   # one probe for the four passes
        assert all(s and f"cannot reach ZooKeeper at {proxy.connect_string}" in s for s in said), said
        assert lock_error(specs[0], None) == said[0] and len(asked) == 1   # within PROBE_MEMORY_S: as said

        proxy.start()
        monkeypatch.setattr("lakeoperator.observe.PROBE_MEMORY_S", 0.0)
        assert lock_error(specs[1], None) is None and len(asked) == 2   # asked again: it answers
        assert lock_error(specs[2], None) is None   # a connected client: free, never remembered as down
    finally:
        proxy.stop()
