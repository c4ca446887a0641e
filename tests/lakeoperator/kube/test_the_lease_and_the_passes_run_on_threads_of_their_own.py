"""The operator's blocking work runs on threads of its own, against a real API server:

- the Lease is claimed and renewed on the elector's own thread, so a default executor that is busy (kopf
  waits on a stop flag there; before, the reconcile passes queued there too) cannot keep a leader from
  renewing or a standby from taking over;
- an election round that fails in a way nobody foresaw (a ValueError out of the Lease read; in the field
  a client library's surprise) is logged and the next round runs; before, the election task ended at the
  first such error, silently, and the replica stood by for good;
- a round still in flight when the election stops (its Lease read slow, the operator shutting down)
  cannot make the replica lead once it has stood down: its thread finishes the round after `run()`
  ended, and the replica would otherwise start reconciling again after saying it stopped;
- the controller's `workers` passes run at once, as many as configured: before, they shared the default
  executor's CPUs + 4 threads (6 on two CPUs against 8 workers by default).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from lakeoperator.controller import Controller, ControllerSettings, Key
from lakeoperator.kube import Kube, connect
from lakeoperator.leader import LeaderElector, LeaseTerms
from tests.support.kube_server import ControlPlane

pytestmark = pytest.mark.k8s
TERMS = LeaseTerms(duration_s=0.9, renew_every_s=0.2)


class ReadFails(Kube):
    """The real client, whose first `failures` Lease reads raise what `step` does not expect."""

    failures = 0

    def get_lease(self, namespace: str, name: str, **kwargs: Any) -> dict[str, Any] | None:
        if self.failures:
            self.failures -= 1
            raise ValueError("an unforeseen failure of the client")
        return super().get_lease(namespace, name, **kwargs)


def kube_of(server: ControlPlane, namespace: str, path: Path) -> ReadFails:
    return ReadFails(connect(str(server.write_kubeconfig(path, namespace=namespace))))


async def with_busy_default_executor(body: Callable[[], Awaitable[None]]) -> None:
    """Run `body` while the loop's default executor has one thread, and that one is taken."""
    loop = asyncio.get_running_loop()
    loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
    release = threading.Event()
    busy = loop.run_in_executor(None, release.wait)
    try:
        await body()
    finally:
        release.set()
        await busy


async def elect(elector: LeaderElector, seconds: float = 10.0) -> None:
    """Run the election until the replica leads (or `seconds` pass), then stop it."""
    task = asyncio.create_task(elector.run())
    try:
        for _ in range(int(seconds * 10)):
            if elector.leading or task.done():
                break
            await asyncio.sleep(0.1)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_the_lease_is_claimed_while_the_default_executor_is_busy(
        kube_server: ControlPlane, kube_namespace: str, tmp_path: Path) -> None:
    kube = kube_of(kube_server, kube_namespace, tmp_path / "kubeconfig")
    changes: list[bool] = []
    elector = LeaderElector(kube, kube_namespace, "weir-operator", "replica-a", TERMS, changes.append)
    asyncio.run(with_busy_default_executor(lambda: elect(elector)))
    assert changes == [True, False]   # took the Lease; gave it up when the loop was stopped
    lease = kube.get_lease(kube_namespace, "weir-operator")
    assert lease is not None and lease["spec"]["holderIdentity"] == "replica-a"


def test_the_replica_takes_the_lease_after_an_unforeseen_failure(
        kube_server: ControlPlane, kube_namespace: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    kube = kube_of(kube_server, kube_namespace, tmp_path / "kubeconfig")
    kube.failures = 2
    changes: list[bool] = []
    elector = LeaderElector(kube, kube_namespace, "weir-operator", "replica-a", TERMS, changes.append)
    with caplog.at_level(logging.ERROR, logger="lakeoperator.leader"):
        asyncio.run(elect(elector))
    assert changes == [True, False]
    assert kube.failures == 0
    assert caplog.text.count("leader election round for Lease") == 2
    lease = kube.get_lease(kube_namespace, "weir-operator")
    assert lease is not None and lease["spec"]["holderIdentity"] == "replica-a"


class ReadWaits(Kube):
    """The real client, whose Lease read waits until `go` is set (`reading` says it has begun)."""

    def __init__(self, api_client: Any) -> None:
        super().__init__(api_client)
        self.reading, self.go = threading.Event(), threading.Event()

    def get_lease(self, namespace: str, name: str, **kwargs: Any) -> dict[str, Any] | None:
        self.reading.set()
        self.go.wait(10)
        return super().get_lease(namespace, name, **kwargs)


def lease_threads(besides: frozenset[threading.Thread] = frozenset()) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("weir-lease") and t not in besides]


def test_a_round_in_flight_when_the_election_stops_does_not_lead_again(
        kube_server: ControlPlane, kube_namespace: str, tmp_path: Path) -> None:
    kubeconfig = kube_server.write_kubeconfig(tmp_path / "kubeconfig", namespace=kube_namespace)
    kube = ReadWaits(connect(str(kubeconfig)))
    changes: list[bool] = []
    elector = LeaderElector(kube, kube_namespace, "weir-operator", "replica-a", TERMS, changes.append)
    earlier = frozenset(lease_threads())   # other tests' electors, if any are still winding down

    async def stop_mid_round() -> None:
        task = asyncio.create_task(elector.run())
        while not kube.reading.is_set():
            await asyncio.sleep(0.01)
        task.cancel()   # the loop stops while the round waits on the Lease read
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(stop_mid_round())
    assert changes == [] and not elector.leading
    kube.go.set()   # the round goes on, on its own thread: it claims the free Lease
    for _ in range(100):
        if not lease_threads(earlier):
            break
        threading.Event().wait(0.05)
    assert not lease_threads(earlier), "the round did not finish"
    lease = kube.get_lease(kube_namespace, "weir-operator")
    assert lease is not None and lease["spec"]["holderIdentity"] == "replica-a"  # the late round wrote it
    assert changes == [] and not elector.leading   # but the replica, stopped, does not lead


class Gathering(Controller):
    """A controller whose passes wait until `workers` of them run at once (a barrier; broken: too few)."""

    def __init__(self, kube: Kube, workers: int) -> None:
        super().__init__(kube, ControllerSettings(workers=workers), supervise=False)
        self.together = threading.Barrier(workers, timeout=5)
        self.outcomes: list[str] = []

    def reconcile(self, key: Key) -> float | None:
        try:
            self.together.wait()
            self.outcomes.append("together")
        except threading.BrokenBarrierError:
            self.outcomes.append("alone")
        return None


def test_every_worker_runs_a_pass_at_once(kube_server: ControlPlane, kube_namespace: str,
                                         tmp_path: Path) -> None:
    workers = 8
    controller = Gathering(kube_of(kube_server, kube_namespace, tmp_path / "kubeconfig"), workers)

    async def passes() -> None:
        await controller.start()
        try:
            for i in range(workers):
                controller.notify("LakeWriter", {"metadata": {"namespace": kube_namespace, "name": f"w{i}"},
                                                 "spec": {}})
            for _ in range(100):
                if len(controller.outcomes) == workers:
                    break
                await asyncio.sleep(0.1)
        finally:
            await controller.stop()

    asyncio.run(with_busy_default_executor(passes))
    assert controller.outcomes == ["together"] * workers
