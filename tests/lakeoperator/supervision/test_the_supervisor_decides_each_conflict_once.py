"""The supervisor over a table on ZooKeeper (a tenant's digest ACL, a real server) and the local
launcher's state: writers registered under their LakeWriter names; a conflict is decided once — in both
writers' status first, then the loser's proof of death under the table's lock, so the loser can never
commit — and a second supervisor (an operator restarted mid-abort) neither decides it again nor leaves
the loser running past the grace period; a writer that stopped beating is rolled back."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore import (
    AbortWatchOptions,
    AfterCommitOptions,
    RegistrationOptions,
    Table,
    WriteJob,
    WriterOptions,
)
from lakecore.concurrency.liveness.aborts import abort_flags
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig, read_aborted
from lakecore.concurrency.liveness.writers import ZooKeeperWriterRegistry
from lakecore.concurrency.zookeeper import Credentials, Endpoint
from lakecore.config import LockSpec
from lakecore.errors import InvalidInstantState, WriteConflict
from lakecore.write import conform, route, write_file_group
from lakeoperator.builders.driver_pod import child_name
from lakeoperator.launch.local import LocalLauncher
from lakeoperator.local import Resource, StateDir
from lakeoperator.supervision import StoreSink, Supervisor, WatchedTable, zookeeper_abort_flag
from tests.lakecore.concurrency.conflicts.test_occ_conflicts import SCHEMA, keys_in_bucket
from tests.support.operator import wait_until
from tests.support.zookeeper import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper]
HB = HeartbeatConfig(interval_s=0.2, tolerable_misses=3)
TENANT = Credentials("tenant-a", "secret-a")


def writer_resource(state: StateDir, name: str, submission: str) -> None:
    state.save(Resource({"apiVersion": "weir.dev/v1alpha1", "kind": "LakeWriter",
                         "metadata": {"name": name, "namespace": "default"},
                         "spec": {"tableRef": {"name": "orders"}},
                         "status": {"phase": "Running", "submissionId": submission}}, None, []))


def start_write(t: Table, connect: str, writer: str, ids: list[int], tag: str,
                extra: dict[str, Any] | None = None) -> tuple[WriteJob, list[Any]]:
    options = WriterOptions(heartbeat=HB,
                            registration=RegistrationOptions(ZooKeeperWriterRegistry(connect), writer),
                            after_commit=AfterCommitOptions(archival=None),
                            abort_watch=AbortWatchOptions(zookeeper=connect, check_s=600))
    job = WriteJob.start(t.storage, t.config, t.lock, "upsert", options, extra=extra)
    data = pa.table({"id": pa.array(ids, pa.int64()), "ts": [1] * len(ids), "v": [tag] * len(ids)})
    stats = [s for g in route(conform(data, t.config, "upsert").rows, t.config)
             for s in write_file_group(job.context(), g)]
    return job, stats


def status(state: StateDir, name: str) -> dict[str, Any]:
    r = state.load("LakeWriter", "default", name)
    assert r is not None
    return dict(r.body.get("status") or {})


def reasons(state: StateDir, name: str) -> list[str]:
    r = state.load("LakeWriter", "default", name)
    return [e["reason"] for e in (r.events if r else None) or []]


def test_a_conflict_is_decided_once_and_a_dead_writer_rolled_back(
        zookeeper_server: ZooKeeperServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEIR_ZOOKEEPER_USERNAME", TENANT.username)   # the writers' credentials
    monkeypatch.setenv("WEIR_ZOOKEEPER_PASSWORD", TENANT.password)
    connect = zookeeper_server.connect_string
    t = Table.create(str(tmp_path / "orders"), schema=SCHEMA, record_key="id",
                     lock=LockSpec("zookeeper", connect=connect))
    state = StateDir(tmp_path / "state")
    launcher = LocalLauncher(tmp_path / "pods")
    writer_resource(state, "older", "older-1-aaaaaaaa")
    writer_resource(state, "younger", "younger-1-bbbbbbbb")
    # the younger writer's driver: a real process the supervisor may have to stop
    sleeper = {"name": "driver", "command": [sys.executable, "-c", "import time; time.sleep(120)"]}
    launcher.create_pod({"metadata": {"name": child_name("younger-1-bbbbbbbb"), "namespace": "default"},
                         "spec": {"containers": [sleeper]}})
    table = WatchedTable("default", "orders", t.uri, "optimistic", HB, zookeeper=connect,
                         zookeeper_credentials=TENANT)

    def supervisor() -> Supervisor:
        return Supervisor(StoreSink(state, launcher, grace_s=0.5), grace_s=0.5,
                          abort_flag=zookeeper_abort_flag)

    shared = keys_in_bucket(2, 6)
    older, older_stats = start_write(t, connect, "default/older", shared[:3], "older")
    younger, younger_stats = start_write(t, connect, "default/younger", shared[3:], "younger")
    apart, _ = start_write(t, connect, "default/apart", keys_in_bucket(0, 2), "apart")   # another group

    first = supervisor()
    first.watch(table)
    (decision,) = first.run_once()
    assert (decision.loser, decision.winner) == (younger.instant.requested_time, older.instant.requested_time)
    assert (decision.loser_writer, decision.winner_writer) == ("default/younger", "default/older")
    lost, won = status(state, "younger")["lastConflict"], status(state, "older")["lastConflict"]
    assert lost["role"] == "Lost" and lost["other"] == older.instant.requested_time
    assert lost["submission"] == "younger-1-bbbbbbbb" and lost["otherWriter"] == "default/older"
    assert lost["bytesWritten"] > 0 and lost["fileGroups"]
    assert won["role"] == "Won" and won["other"] == younger.instant.requested_time
    record = read_aborted(t.storage, younger.instant.requested_time)
    assert record is not None and record["decided_by"] == "weir-operator"
    assert (record["writer"], record["other_writer"]) == ("default/younger", "default/older")  # the picture
    assert "ConflictLost" in reasons(state, "younger") and "ConflictWon" in reasons(state, "older")
    current = status(state, "younger")
    assert current["currentInstant"] == younger.instant.requested_time
    assert set(current["currentInstantLock"]) == {"waitMs", "holdMs"}   # drawing it, from the registry
    flags = abort_flags(Endpoint(connect, credentials=TENANT), t.storage.uri)
    assert flags == [younger.instant.requested_time]   # raised with the tenant's ACL; its writer heard it
    heard = wait_until(lambda: younger.aborted_by_other, timeout=10)   # by the flag: no storage checks
    assert heard["other"] == decision.winner and heard["decided_by"] == "weir-operator"

    # an operator restarted mid-abort: the decision stands (no second one), the loser still running
    # past the grace period is stopped, once
    second = supervisor()
    second.watch(table)
    assert second.run_once() == []
    time.sleep(0.6)   # the grace period of the first decision passes
    assert second.run_once() == []

    def loser_stopped() -> bool:   # the stop is a signal: the pod leaves Running when its process has ended
        pod = launcher.get_pod("default", child_name("younger-1-bbbbbbbb"))
        return pod is None or (pod.get("status") or {}).get("phase") != "Running"
    assert wait_until(loser_stopped, timeout=10)
    assert reasons(state, "younger").count("LoserStopped") == 1
    r = state.load("LakeWriter", "default", "younger")
    (stopped,) = [e for e in (r.events if r else None) or [] if e["reason"] == "LoserStopped"]
    assert stopped["message"] == (f"write {younger.instant.requested_time} still ran 0.5s after its abort: "
                                  "its driver was deleted")   # the same Event as on a cluster
    second.run_once()
    assert reasons(state, "younger").count("LoserStopped") == 1
    assert reasons(state, "younger").count("ConflictLost") == 1

    with pytest.raises((WriteConflict, InvalidInstantState)):   # fenced: the loser never commits
        younger.commit(younger_stats)
    older.commit(older_stats)

    # a writer that stopped beating (its process killed) is rolled back by the supervisor
    apart.heartbeat.stop(delete=False)
    if apart.registration is not None:
        apart.registration.close()   # its ZooKeeper session ended
    time.sleep(HB.timeout_ms / 1000 + 0.2)
    second.run_once()
    timeline = Table.open(t.uri).timeline()
    assert apart.instant.requested_time not in {i.requested_time for i in timeline.pending}
    rolled = [i for i in timeline.completed if i.action == "rollback"]
    assert rolled
    assert {r["v"] for r in Table.open(t.uri).read().to_pylist()} == {"older"}
    launcher.close()


def test_a_winner_that_committed_already_is_named_by_its_commit(
        zookeeper_server: ZooKeeperServer, tmp_path: Path) -> None:
    """A write that completed into the loser's file groups since the loser started has left the writer
    registry: the decision, the loser's Event and its proof of death name it from its commit (a
    streaming writer's `weir.writer`), not as a writer the operator does not run."""
    connect = zookeeper_server.connect_string
    t = Table.create(str(tmp_path / "orders"), schema=SCHEMA, record_key="id",
                     lock=LockSpec("zookeeper", connect=connect, path="/weir-named"))
    state = StateDir(tmp_path / "state")
    writer_resource(state, "erase", "erase-1-aaaaaaaa")
    writer_resource(state, "ingest", "ingest-1-bbbbbbbb")
    shared = keys_in_bucket(1, 4)
    slow, _ = start_write(t, connect, "default/erase", shared[:2], "erase")
    fast, fast_stats = start_write(t, connect, "default/ingest", shared[2:], "ingest",
                                   extra={"weir.writer": "default/ingest"})
    fast.commit(fast_stats)
    supervisor = Supervisor(StoreSink(state, LocalLauncher(tmp_path / "pods"), grace_s=60), grace_s=60,
                            abort_flag=zookeeper_abort_flag)
    supervisor.watch(WatchedTable("default", "orders", t.uri, "optimistic", HB, zookeeper=connect))
    (decision,) = supervisor.run_once()
    assert (decision.loser, decision.winner_writer) == (slow.instant.requested_time, "default/ingest")
    assert "completed at" in decision.conflict.describe() and "older" not in decision.conflict.describe()
    record = read_aborted(t.storage, slow.instant.requested_time)
    assert record is not None and record["other_writer"] == "default/ingest"
    r = state.load("LakeWriter", "default", "erase")
    (lost,) = [e for e in (r.events if r else None) or [] if e["reason"] == "ConflictLost"]
    assert "(default/ingest)" in lost["message"] and "does not run" not in lost["message"]
    slow.abort()
    supervisor.close()


def test_supervision_goes_on_across_a_zookeeper_restart(
        zookeeper_factory: Any, tmp_path: Path) -> None:
    zk = zookeeper_factory()
    connect = zk.connect_string
    t = Table.create(str(tmp_path / "orders"), schema=SCHEMA, record_key="id",
                     lock=LockSpec("zookeeper", connect=connect))
    state = StateDir(tmp_path / "state")
    writer_resource(state, "older", "older-1-aaaaaaaa")
    writer_resource(state, "younger", "younger-1-bbbbbbbb")
    sink = StoreSink(state, LocalLauncher(tmp_path / "pods"), grace_s=60)
    supervisor = Supervisor(sink, grace_s=60, abort_flag=zookeeper_abort_flag)
    supervisor.watch(WatchedTable("default", "orders", t.uri, "optimistic", HB, zookeeper=connect))
    assert supervisor.run_once() == []      # the table's paths, lock and registry watch are set up

    zk.restart(kill=True)                   # mid-run: every client reconnects (sessions survive)
    shared = keys_in_bucket(1, 4)
    older, _ = start_write(t, connect, "default/older", shared[:2], "older")
    younger, _ = start_write(t, connect, "default/younger", shared[2:], "younger")
    decisions: list[Any] = []
    deadline = time.monotonic() + 30
    while not decisions and time.monotonic() < deadline:
        decisions = supervisor.run_once()
        time.sleep(0.2)
    (decision,) = decisions
    assert decision.loser == younger.instant.requested_time and decision.loser_writer == "default/younger"
    assert status(state, "younger")["lastConflict"]["role"] == "Lost"
    younger.abort()
    older.abort()
    supervisor.close()
