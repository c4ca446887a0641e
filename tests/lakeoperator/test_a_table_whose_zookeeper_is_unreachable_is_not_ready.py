"""A LakeTable whose lock's ZooKeeper cannot be reached showed Ready (only the operator's log said
otherwise), and its writers and services started jobs that could only fail on the lock. It is now
Failed with reason LockUnreachable, naming the ensemble; its TableService waits (TableNotReady); once
ZooKeeper answers, the next pass makes it Ready (here the ensemble is a real ZooKeeper behind a TCP
forwarder that is down, then up)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lakeoperator.builders.driver_pod import PodSettings
from lakeoperator.launch.local import LocalLauncher
from lakeoperator.local import Runner, StateDir, apply


class Forwarder:
    """Forwards every connection to 127.0.0.1:`port` to `target` (host, port), until closed."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.target = target
        self.server = socket.create_server(("127.0.0.1", port), reuse_port=False)
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()
        for c in self.conns:
            c.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
    port = free_port()
    connect = f"127.0.0.1:{port}"
    state = StateDir(tmp_path / "state")
    apply(state, manifests(tmp_path / "lake" / "orders", connect), datetime.now(UTC))
    launcher = LocalLauncher(tmp_path / "state" / "pods-state")
    run = Runner(state, launcher, PodSettings(), clock=lambda: datetime.now(UTC), supervise=False)
    forwarder = None
    try:
        steps(run, lambda: ready_of(state, "LakeTable")[1].get("reason") == "LockUnreachable")
        status, ready = ready_of(state, "LakeTable")
        assert status["phase"] == "Failed" and ready["status"] == "False", status
        assert f"cannot reach ZooKeeper at {connect}" in ready["message"], ready
        steps(run, lambda: ready_of(state, "TableService")[1].get("reason") == "TableNotReady")
        assert "LockUnreachable" in ready_of(state, "TableService")[1]["message"]
        assert launcher.pods() == []

        host, zk_port = zookeeper_server.connect_string.split(",")[0].rsplit(":", 1)
        forwarder = Forwarder(port, (host, int(zk_port)))   # ZooKeeper answers from now on
        steps(run, lambda: ready_of(state, "LakeTable")[0].get("phase") == "Ready")
        assert ready_of(state, "LakeTable")[1]["reason"] == "TableReady"
        steps(run, lambda: ready_of(state, "TableService")[1].get("status") == "True")
    finally:
        if forwarder is not None:
            forwarder.close()
        launcher.close()
