"""Leader election: one operator replica reconciles (and supervises) at a time; a standby takes over.

A `coordination.k8s.io/v1` Lease names the holder. The decision is pure (`claim`): from the lease as
read, this replica's identity and how long this replica has seen the lease's record unchanged, the
record to write (acquire or renew) or None (another holder renewed recently: stand by). Expiry is
judged on this replica's own monotonic clock — the time since it saw the record change — never by
comparing another host's timestamps with ours, so clock skew between nodes cannot make two leaders.
Writes are guarded by the resourceVersion read: of two replicas racing for an expired lease, one wins,
the other gets a conflict and stands by.

`LeaderElector` runs the loop in the operator's event loop and flips `Controller.leading`: workers only
take keys while it is set. A leader that cannot renew within the lease duration steps down by itself
(before any standby may take over); passes in flight finish, their writes guarded by resourceVersion.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lakeoperator.kube import Conflict, Kube, KubeError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LeaseTerms:
    duration_s: float = 15.0     # a standby takes over this long after the leader's last renewal
    renew_every_s: float = 5.0   # the leader renews (and a standby looks) this often

    def __post_init__(self) -> None:
        if not 0 < 3 * self.renew_every_s <= self.duration_s:
            raise ValueError(f"a lease of {self.duration_s}s must be renewed at least three times per "
                             f"duration (renew interval {self.renew_every_s}s); lower the interval or "
                             "lengthen the lease")

    @property
    def give_up_after_s(self) -> float:
        """A leader that could not renew this long steps down: a full renewal interval before any
        standby can have seen the lease unchanged for a whole duration."""
        return self.duration_s - 2 * self.renew_every_s


def micro_time(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def claim(spec: Mapping[str, Any] | None, identity: str, unchanged_for_s: float, now: datetime,
          terms: LeaseTerms) -> dict[str, Any] | None:
    """The lease spec this replica writes, or None to stand by. `unchanged_for_s`: how long this replica
    has seen the current record (holder and renewTime) unchanged."""
    spec = spec or {}
    holder = spec.get("holderIdentity")
    duration = float(spec.get("leaseDurationSeconds") or terms.duration_s)
    if holder and holder != identity and unchanged_for_s < duration:
        return None
    mine = holder == identity
    return {"holderIdentity": identity, "leaseDurationSeconds": max(1, round(terms.duration_s)),
            "acquireTime": spec.get("acquireTime") if mine else micro_time(now), "renewTime": micro_time(now),
            "leaseTransitions": int(spec.get("leaseTransitions") or 0) + (0 if mine or not holder else 1)}


class LeaderElector:
    """The election loop of one replica (see the module docstring)."""

    def __init__(self, kube: Kube, namespace: str, name: str, identity: str, terms: LeaseTerms,
                 on_change: Callable[[bool], None], clock: Callable[[], datetime] = lambda: datetime.now(UTC)
                 ) -> None:
        self.kube, self.namespace, self.name, self.identity = kube, namespace, name, identity
        self.terms, self.on_change, self.clock = terms, on_change, clock
        self.leading = False
        self._record: tuple[Any, Any] | None = None
        self._seen_at = time.monotonic()
        self._renewed_at = 0.0
        self._ended = False   # run() ended: a round still in flight on its thread must not lead again

    def _set(self, leading: bool) -> None:
        if leading and self._ended:
            return
        if leading != self.leading:
            self.leading = leading
            log.info("%s leadership of Lease %s/%s as %s", "took" if leading else "lost", self.namespace,
                     self.name, self.identity)
            self.on_change(leading)

    def step(self) -> None:
        """One round: read the lease, claim or renew it if due, step down if it could not be renewed."""
        try:
            lease = self.kube.get_lease(self.namespace, self.name, timeout_s=self.terms.renew_every_s)
            spec = (lease or {}).get("spec") or {}
            record = (spec.get("holderIdentity"), spec.get("renewTime"))
            if record != self._record:
                self._record, self._seen_at = record, time.monotonic()
            wanted = claim(spec, self.identity, time.monotonic() - self._seen_at, self.clock(), self.terms)
            if wanted is not None:
                self.kube.write_lease(self.namespace, self.name, wanted, lease,
                                      timeout_s=self.terms.renew_every_s)
                self._record = (wanted["holderIdentity"], wanted["renewTime"])
                self._seen_at = time.monotonic()
                self._renewed_at = time.monotonic()
                self._set(True)
                return
            self._set(False)
        except (Conflict, KubeError) as exc:
            log.info("lease %s/%s not renewed: %s", self.namespace, self.name, exc)
        self._step_down_if_unrenewed()

    def _step_down_if_unrenewed(self) -> None:
        """Could not renew: give up leadership before a standby may take over (it waits a full duration)."""
        if self.leading and time.monotonic() - self._renewed_at >= self.terms.give_up_after_s:
            self._set(False)

    async def run(self) -> None:
        # a thread of its own: renewing must never wait behind reconcile passes or kopf in a shared pool
        self._ended = False
        thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="weir-lease")
        loop = asyncio.get_running_loop()
        try:
            while True:
                try:
                    await loop.run_in_executor(thread, self.step)
                except Exception:   # an unforeseen failure of one round must not end the election for good
                    log.exception("leader election round for Lease %s/%s failed; retrying", self.namespace,
                                  self.name)
                    self._step_down_if_unrenewed()
                await asyncio.sleep(self.terms.renew_every_s)
        finally:
            self._ended = True
            thread.shutdown(wait=False)
            self._set(False)


__all__ = ["LeaderElector", "LeaseTerms", "claim", "micro_time"]
