"""Run claims: which process runs a table service right now, so that no two ever run it at once.

A service instant (compaction, clustering, clean) or a table-wide service without one (archival) is
run under a *claim*, keyed by the instant time or the service's name:

    <base>/.weir/runs/<key>/<attempt>.claim   created if absent: {run id, host, pid, started, what}
    <base>/.weir/runs/<key>/<attempt>.beat    the claim's heartbeat (epoch ms), beaten while it runs

    claim:   under the table lock: the newest attempt alive (fresh beat)? -> ServiceRunning;
             else create attempt n+1 (create-if-absent) -> first beat -> heartbeat thread
    owns:    under the table lock, before every irreversible step (completing the instant): the newest
             attempt is still ours and our heartbeat is not lost
    release: stop beating, delete our beat (the next run may claim at once)

A run is dead when its beat expired, when it released its claim, or — the common case of a killed
job on the same machine — when its process is gone: same host, same PID namespace, same boot, and no
process with its pid (a claim from another host or container waits for its heartbeat to expire).

Attempts only grow, and a claim is taken only when the newest attempt is dead, so of two runs only the
newer can ever own the key; a stalled older run finds at its commit that it no longer owns it. A run
deletes only files its own attempt wrote, except what dead attempts left, which the owner deletes
after claiming (`Running.tokens` put the attempt in every file name, so attempts never share a file).
Not here: what a service does, and when an instant may be rolled back (concurrency/rollback.py asks
`live_run`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import uuid
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from lakecore.concurrency.liveness.heartbeat import Heartbeat, HeartbeatConfig, is_expired, read_beat_at
from lakecore.concurrency.locks.protocol import Lock, ensure_held
from lakecore.concurrency.processes import process_gone, process_space
from lakecore.errors import AlreadyExists, ServiceRunning
from lakecore.storage import Storage, join
from lakecore.timeline import now_ms

RUNS_DIR = ".weir/runs"
ARCHIVAL = "archival"  # the key of archival runs (archival has no instant of its own)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Claim:
    """One attempt at running `key`, as recorded on storage."""

    key: str
    attempt: int
    run_id: str
    what: str
    host: str
    pid: int
    started: int
    process: str = ""   # this machine's boot and PID namespace: where `pid` means something

    def describe(self) -> str:
        return f"{self.what} (run {self.run_id[:8]}, attempt {self.attempt}, pid {self.pid} on {self.host})"

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "attempt": self.attempt, "run_id": self.run_id, "what": self.what,
                "host": self.host, "pid": self.pid, "started": self.started, "process": self.process}

    def process_gone(self) -> bool:
        """Its process surely ended: it ran in this machine's boot and PID namespace, and its pid is free."""
        return process_gone(self.host, self.process, self.pid)


def _dir(key: str) -> str:
    return join(RUNS_DIR, key)


def _claim_path(key: str, attempt: int) -> str:
    return join(_dir(key), f"{attempt:010d}.claim")


def _beat_path(key: str, attempt: int) -> str:
    return join(_dir(key), f"{attempt:010d}.beat")


def attempts(storage: Storage, key: str) -> list[int]:
    """Attempt numbers recorded for `key`, ascending."""
    out = []
    for f in storage.list_dir(_dir(key)):
        name = f.path.rsplit("/", 1)[-1]
        stem, _, suffix = name.partition(".")
        if suffix == "claim" and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def read_claim(storage: Storage, key: str, attempt: int) -> Claim | None:
    """The claim of one attempt; None when missing or unreadable (a claim is written whole, once)."""
    try:
        body = json.loads(storage.read(_claim_path(key, attempt)))
        return Claim(key, attempt, str(body["run_id"]), str(body.get("what", key)),
                     str(body.get("host", "?")), int(body.get("pid", 0)), int(body.get("started", 0)),
                     str(body.get("process", "")))
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return None


def live_run(storage: Storage, key: str, now: int, heartbeat: HeartbeatConfig) -> Claim | None:
    """The newest attempt at `key` if its process is alive (its beat, or its start, is fresh)."""
    tried = attempts(storage, key)
    if not tried or _released(storage, key, tried[-1]):
        return None
    claim = read_claim(storage, key, tried[-1])
    signs = [t for t in (read_beat_at(storage, _beat_path(key, tried[-1])),
                         claim.started if claim is not None else None) if t is not None]
    if not signs or is_expired(max(signs), now, heartbeat) or (claim is not None and claim.process_gone()):
        return None
    return claim


def _released(storage: Storage, key: str, attempt: int) -> bool:
    """The run of this attempt ended and said so (see ServiceRun.release)."""
    return storage.exists(join(_dir(key), f"{attempt:010d}.released"))


class ServiceRun:
    """A held claim on `key`: a heartbeat thread beats `<attempt>.beat` until `release()`. Use
    `ServiceRun.claim(...)` under the table lock; a context manager (releases on exit). Not picklable:
    tasks elsewhere need no liveness of their own (the driver's claim covers them)."""

    def __init__(self, storage: Storage, claim: Claim, heartbeat: HeartbeatConfig) -> None:
        self.storage = storage
        self.info = claim
        self.heartbeat = Heartbeat(storage, claim.key, heartbeat, path=_beat_path(claim.key, claim.attempt))
        self.released = False

    @property
    def key(self) -> str:
        return self.info.key

    @property
    def attempt(self) -> int:
        return self.info.attempt

    @classmethod
    def claim(cls, storage: Storage, lock: Lock, key: str, what: str, heartbeat: HeartbeatConfig, *,
              now: int | None = None) -> ServiceRun:
        """Claim `key` (the caller holds the table lock). ServiceRunning when a live run holds it."""
        ensure_held(lock, f"claiming {what}")
        now = now_ms() if now is None else now
        cls.ensure_free(storage, key, what, heartbeat, now=now)
        tried = attempts(storage, key)
        attempt = (tried[-1] if tried else 0) + 1
        claim = Claim(key, attempt, uuid.uuid4().hex, what, socket.gethostname(), os.getpid(), now,
                      process_space())
        try:
            storage.write_if_absent(_claim_path(key, attempt), json.dumps(claim.to_json()).encode())
        except AlreadyExists:  # only under a lock that was not exclusive: never take a claim we did not make
            raise ServiceRunning(f"{what}: attempt {attempt} was claimed by another process at the same "
                                 "moment (is the table lock shared by every process?); retry") from None
        run = cls(storage, claim, heartbeat)
        run.heartbeat.start()
        return run

    @staticmethod
    def ensure_free(storage: Storage, key: str, what: str, heartbeat: HeartbeatConfig, *,
                    now: int | None = None) -> None:
        """ServiceRunning when a live run holds `key`. `claim` decides under the lock; callers may ask
        before taking it, so that a busy service costs other writers no wait on the lock."""
        current = live_run(storage, key, now_ms() if now is None else now, heartbeat)
        if current is not None:
            raise ServiceRunning(f"{what} is already running: {current.describe()}, since "
                                 f"{current.started}; wait for it to finish (or, if that process is gone, "
                                 f"retry after its heartbeat expires, {heartbeat.timeout_ms} ms after its "
                                 "last beat)")

    def owns(self) -> bool:
        """Whether this run still owns its key: the newest attempt is ours and our heartbeat is not
        lost. Call under the table lock right before an irreversible step."""
        if self.released or self.heartbeat.lost:
            return False
        tried = attempts(self.storage, self.key)
        if not tried or tried[-1] != self.attempt:
            return False
        recorded = read_claim(self.storage, self.key, self.attempt)
        return recorded is not None and recorded.run_id == self.info.run_id

    def ensure_owned(self, lock: Lock, doing: str) -> None:
        """ServiceRunning unless this run still owns its key (see owns)."""
        ensure_held(lock, doing)
        if not self.owns():
            newest = attempts(self.storage, self.key)
            other = read_claim(self.storage, self.key, newest[-1]) if newest else None
            by = f"; it is now claimed by {other.describe()}" \
                if other is not None and other.attempt != self.attempt else ""
            raise ServiceRunning(f"{self.info.what}: this run (attempt {self.attempt}) lost its claim before "
                                 f"{doing} (its heartbeat lapsed{by}); nothing of this run is kept: run "
                                 "the service again if it is still due")

    def release(self) -> None:
        """Stop beating and mark the claim released, so the next run may claim at once. Never raises."""
        if self.released:
            return
        self.released = True
        self.heartbeat.stop(delete=False)
        try:
            self.storage.write(join(_dir(self.key), f"{self.attempt:010d}.released"), b"")
            self.storage.delete(_beat_path(self.key, self.attempt))
            for older in attempts(self.storage, self.key)[:-1]:  # the newest claim stays: attempts only grow
                for suffix in ("claim", "beat", "released"):
                    self.storage.delete(join(_dir(self.key), f"{older:010d}.{suffix}"))
        except Exception as exc:
            log.warning("could not release the claim on %s (attempt %s): %s; the next run waits until its "
                        "heartbeat expires", self.key, self.attempt, exc)

    def __enter__(self) -> ServiceRun:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()

    def __reduce__(self) -> Any:
        raise TypeError("a ServiceRun holds a heartbeat thread and stays on the driver; pass Running's "
                        "attempt to tasks instead")


def forget(storage: Storage, key: str) -> None:
    """Delete every record of `key` once its instant completed or was rolled back (no claim on it can
    matter any more). Best effort."""
    try:
        for f in storage.list_dir(_dir(key)):
            storage.delete(f.path)
    except Exception as exc:
        log.warning("could not delete the run records of %s: %s", key, exc)
