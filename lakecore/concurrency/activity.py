"""What is going on at a table right now, read from its storage: for `weir table describe` and anyone
asking why a writer waits.

- the table lock: a storage lock's newest generation (free, or held by whom, for how long a lease, and
  whether its holder's process is known to be gone); other providers, where the lock lives;
- each pending instant: a write with its writer's last sign of life (heartbeat) and whether it is
  alive, was aborted, or completed and lost its completed instant file (rollback.completion_lost);
  a table service with the run that holds its claim, if one does;
- the table-wide service runs (archival) that are live.

Only reads; judged with the given heartbeat settings (the writers' defaults unless told), exactly as
rollback.py judges who may be rolled back.
"""

from __future__ import annotations

from typing import Any

from lakecore.concurrency.liveness.heartbeat import (
    DEFAULT_HEARTBEAT,
    HeartbeatConfig,
    is_aborted,
    is_expired,
    last_sign_of_life,
    writer_gone,
)
from lakecore.concurrency.liveness.runs import ARCHIVAL, Claim, live_run
from lakecore.concurrency.locks.storage import newest_generation
from lakecore.concurrency.rollback import completion_lost, is_pending_write
from lakecore.config import LockSpec
from lakecore.storage import Storage
from lakecore.timeline import Timeline, TimelineStore


def activity(storage: Storage, lock: LockSpec, timeline: Timeline, now: int, *,
             heartbeat: HeartbeatConfig = DEFAULT_HEARTBEAT) -> dict[str, Any]:
    """The table's lock, pending instants and live service runs, as plain JSON-able values."""
    store = TimelineStore(storage)
    pending = []
    for instant in timeline.pending:
        t = instant.requested_time
        entry: dict[str, Any] = {"instant": t, "action": instant.action, "state": instant.state.name.lower()}
        if is_pending_write(store, instant):
            last = last_sign_of_life(storage, t)
            aborted = is_aborted(storage, t)
            lost = not aborted and bool(completion_lost(storage, instant))
            if lost:   # completed since `timeline` was loaded? (its markers go after its completed file)
                again = store.load().find(t)
                lost = again is not None and not again.is_completed
            entry.update({"kind": "write", "last_sign_of_life_s_ago": round(max(0, now - last) / 1000, 1),
                          "aborted": aborted, "completed_file_lost": lost,
                          "alive": not aborted and not lost and not is_expired(last, now, heartbeat)
                          and not writer_gone(storage, t)})
        else:
            run = live_run(storage, t, now, heartbeat)
            entry.update({"kind": "service", "run": _run(run), "alive": run is not None})
        pending.append(entry)
    archival = live_run(storage, ARCHIVAL, now, heartbeat)
    return {"lock": _lock(storage, lock), "pending": pending,
            "running": [_run(archival)] if archival is not None else []}


def _lock(storage: Storage, spec: LockSpec) -> dict[str, Any]:
    if spec.provider == "zookeeper":
        return {"provider": "zookeeper", "connect": spec.connect, "path": spec.path}
    if spec.provider != "storage":
        return {"provider": spec.provider}
    newest = newest_generation(storage)
    if newest is None or newest.state == "free":
        return {"provider": "storage", "state": "free"}
    return {"provider": "storage", "state": "held", "holder": newest.owner, "lease_s": newest.lease_s,
            "holder_gone": newest.holder_gone(), "breaks_at_once": newest.breaks_at_once(storage)}


def _run(claim: Claim | None) -> dict[str, Any] | None:
    if claim is None:
        return None
    return {"what": claim.what, "run_id": claim.run_id, "attempt": claim.attempt, "host": claim.host,
            "pid": claim.pid, "started": claim.started}
