"""Heartbeats: how a writer says "instant T is still being written", and how others tell that it died.

Owns the heartbeat file `<base>/.weir/heartbeats/<T>`, whose content is the last beat as epoch
milliseconds in ASCII digits (not the file's mtime: S3 and memory:// report it coarsely or not at all),
the expiry rule, and `Heartbeat`, the thread a writer beats with. A missing, empty or garbled file
means "never beat", so expired. Must not roll anything back: what to do with an expired instant is the
failed-writes rollback's decision, taken under the table lock after re-checking that the instant is
still in flight.

Also owns the proof of death `<base>/.weir/aborted/<T>`: created (if absent, never removed while T
could still be pending) by a writer that aborts and by every rollback that claims T. An instant with
one is dead at once, whatever its heartbeat says, and can never complete (the commit checks it under
the table lock) — a heartbeat file alone cannot say that: a deleted one reads as "not beaten yet".

And the writer's record `<base>/.weir/processes/<T>` (JSON: host, pid, process space), written by the
heartbeat's thread after its first beat and deleted with the heartbeat: a reader on the same machine and
in the same PID namespace can tell from it that the writer's process is gone (killed, crashed) before its
heartbeat expires (`writer_gone`). Without a record, or from elsewhere, the heartbeat decides.

Expiry compares the reader's clock with the writer's, so writers' clocks must agree to well within
`interval x tolerable misses` (they must for instant times anyway).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from lakecore.concurrency.processes import process_gone, process_space
from lakecore.errors import (
    AlreadyExists,
    HeartbeatExpired,
    InstantNotFound,
    InvalidInstantState,
    InvalidTableConfig,
)
from lakecore.storage import Storage, join
from lakecore.timeline import now_ms

HEARTBEATS_DIR = ".weir/heartbeats"
ABORTED_DIR = ".weir/aborted"
PROCESSES_DIR = ".weir/processes"
_BEAT = re.compile(rb"\d{1,19}")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HeartbeatConfig:
    """A writer beats every `interval_s`; it is dead once `interval_s x tolerable_misses` pass without one."""

    interval_s: float = 10.0
    tolerable_misses: int = 3

    def __post_init__(self) -> None:
        if not (isinstance(self.interval_s, int | float) and math.isfinite(self.interval_s)
                and self.interval_s > 0):
            raise InvalidTableConfig(f"heartbeat interval_s must be a number > 0, got {self.interval_s!r}")
        if isinstance(self.tolerable_misses, bool) or not isinstance(self.tolerable_misses, int) \
                or self.tolerable_misses < 1:
            raise InvalidTableConfig(f"heartbeat tolerable_misses must be an integer >= 1, got "
                                     f"{self.tolerable_misses!r}")

    @property
    def timeout_ms(self) -> int:
        """How long after its last beat a writer counts as dead."""
        return round(self.interval_s * self.tolerable_misses * 1000)


DEFAULT_HEARTBEAT = HeartbeatConfig()  # every writer's and service's, unless told otherwise


# -- the rule ----------------------------------------------------------------------------------


def is_expired(last_beat_ms: int | None, now_ms: int, config: HeartbeatConfig) -> bool:
    """Dead iff it never beat, or more than `interval x misses` passed since its last beat (Hudi's rule:
    exactly at the boundary it is still alive)."""
    return last_beat_ms is None or now_ms - last_beat_ms > config.timeout_ms


# -- the file ----------------------------------------------------------------------------------


def heartbeat_path(instant_time: str) -> str:
    return join(HEARTBEATS_DIR, instant_time)


def parse_beat(data: bytes) -> int | None:
    """The beat time in a heartbeat file; None for an empty, cut-short-to-nothing or garbled one."""
    text = data.strip()
    return int(text) if _BEAT.fullmatch(text) else None


def read_last_beat(storage: Storage, instant_time: str) -> int | None:
    """Epoch ms of the instant's last beat; None if it has no (readable) heartbeat file. Storage errors
    other than "not found" propagate: not being able to look is no evidence that the writer died."""
    return read_beat_at(storage, heartbeat_path(instant_time))


def read_beat_at(storage: Storage, path: str) -> int | None:
    """The last beat recorded in the heartbeat file at `path` (see read_last_beat)."""
    try:
        data = storage.read(path)
    except FileNotFoundError:
        return None
    return parse_beat(data)


def beat(storage: Storage, instant_time: str, now_ms: int) -> None:
    """Record a beat at `now_ms` (the whole file is replaced, so readers never see half a number)."""
    beat_at(storage, heartbeat_path(instant_time), now_ms)


def beat_at(storage: Storage, path: str, now_ms: int) -> None:
    storage.write(path, str(int(now_ms)).encode("ascii"), durable=False)  # a power loss kills the writer


def delete_heartbeat(storage: Storage, instant_time: str) -> None:
    storage.delete(heartbeat_path(instant_time))


def list_heartbeats(storage: Storage) -> dict[str, int | None]:
    """Every heartbeat file on the table: instant time -> last beat (None when unreadable or just deleted)."""
    found: dict[str, int | None] = {}
    for info in storage.list_dir(HEARTBEATS_DIR):
        instant_time = info.path.rsplit("/", 1)[-1]
        found[instant_time] = read_last_beat(storage, instant_time)
    return found


# -- the writer's process ---------------------------------------------------------------------------


def writer_path(instant_time: str) -> str:
    return join(PROCESSES_DIR, instant_time)


def record_writer(storage: Storage, instant_time: str) -> None:
    """Record which process writes `instant_time` (this one)."""
    record = {"instant": instant_time, "host": socket.gethostname(), "pid": os.getpid(),
              "process": process_space()}
    storage.write(writer_path(instant_time), json.dumps(record).encode("utf-8"), durable=False)


def writer_gone(storage: Storage, instant_time: str) -> bool:
    """The process writing `instant_time` surely ended: its record names this machine's process space
    and no process has its pid now. False without a (readable) record, or for a process elsewhere: the
    heartbeat decides then."""
    try:
        record = json.loads(storage.read(writer_path(instant_time)).decode("utf-8"))
    except (FileNotFoundError, UnicodeDecodeError, ValueError):
        return False
    if not isinstance(record, dict) or not isinstance(record.get("pid"), int):
        return False
    return process_gone(str(record.get("host", "")), str(record.get("process", "")), record["pid"])


def delete_writer_record(storage: Storage, instant_time: str) -> None:
    storage.delete(writer_path(instant_time))


# -- proof of death ------------------------------------------------------------------------------


def aborted_path(instant_time: str) -> str:
    return join(ABORTED_DIR, instant_time)


def mark_aborted(storage: Storage, instant_time: str, by: str, now_ms: int,
                 details: Mapping[str, Any] | None = None) -> bool:
    """Record that instant `instant_time` will never complete (`by`: who decided, for people reading
    it; `details`: more of the decision, e.g. the operator's reason, the other instant and the file
    groups, merged into the JSON record). Idempotent: the first record stays; True when this call
    wrote it."""
    record = {**dict(details or {}), "instant": instant_time, "by": by, "at": int(now_ms)}
    try:
        body = json.dumps(record).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise TypeError(f"abort details must be JSON-serializable ({exc}); pass strings, numbers, lists "
                        "and dicts") from exc
    try:
        storage.write_if_absent(aborted_path(instant_time), body)
    except AlreadyExists:
        return False  # dead already; the first record says who decided
    return True


def is_aborted(storage: Storage, instant_time: str) -> bool:
    """Whether the instant's writer aborted or a rollback claimed it (it can never complete)."""
    return storage.exists(aborted_path(instant_time))


def read_aborted(storage: Storage, instant_time: str) -> dict[str, Any] | None:
    """The instant's proof of death as recorded (who, when, and the details given), None when it has
    none. A garbled record reads as {}: the file alone says the instant is dead."""
    try:
        data = storage.read(aborted_path(instant_time))
    except FileNotFoundError:
        return None
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def prune_aborted(storage: Storage, pending: set[str], now_ms: int, older_than_ms: int) -> list[str]:
    """Delete proofs of death of instants no longer pending that started more than `older_than_ms`
    ago: a writer that old cannot commit any more (its own heartbeat check under the lock fails long
    before), so the record has done its job. Returns the instants pruned."""
    from lakecore.timeline.instant_time import to_epoch_ms

    pruned = []
    for info in storage.list_dir(ABORTED_DIR):
        t = info.path.rsplit("/", 1)[-1]
        try:
            started = to_epoch_ms(t)
        except (InstantNotFound, ValueError):  # not an instant time: not ours to judge
            log.warning("unexpected file %s under %s left alone", t, ABORTED_DIR)
            continue
        if t not in pending and now_ms - started > older_than_ms:
            storage.delete(info.path)
            pruned.append(t)
    return pruned


def is_alive(storage: Storage, instant_time: str, now_ms: int, config: HeartbeatConfig) -> bool:
    """A pending instant's writer is alive: not aborted, and its heartbeat (or its start, before the
    first beat) is fresh."""
    return not is_expired(last_sign_of_life(storage, instant_time), now_ms, config) \
        and not is_aborted(storage, instant_time)


def is_alive_here(storage: Storage, instant_time: str, now_ms: int, config: HeartbeatConfig) -> bool:
    """`is_alive`, and not known gone on this machine (`writer_gone`): what people are told, and what a
    rollback refuses. One more read than `is_alive`, for a live writer only."""
    return is_alive(storage, instant_time, now_ms, config) and not writer_gone(storage, instant_time)


def expired_instants(storage: Storage, instant_times: Iterable[str], now_ms: int,
                     config: HeartbeatConfig) -> list[str]:
    """Those of `instant_times` whose writer is dead, in the order given."""
    return [t for t in instant_times if is_expired(read_last_beat(storage, t), now_ms, config)]


# -- the writer's side -------------------------------------------------------------------------


class Heartbeat:
    """The heartbeat of one writer's instant: `start()` beats once, synchronously, then a daemon thread
    beats every interval until `stop()`.

    Self-check: a failed beat is a miss, retried at the next interval. Once the last successful beat
    is older than `interval x misses` (by `clock`), other writers may already treat this instant as
    dead and roll it back, so the heartbeat is *lost*: it stops beating for good (a late beat would
    revive the file of a rolled-back instant) and `check()` raises HeartbeatExpired. The writer calls
    `check()` before committing, and wherever it wants to stop early.
    """

    def __init__(self, storage: Storage, instant_time: str, config: HeartbeatConfig | None = None, *,
                 clock: Callable[[], int] = now_ms, path: str | None = None) -> None:
        self.storage = storage
        self.instant_time = instant_time
        self.path = path if path is not None else heartbeat_path(instant_time)  # e.g. a service run's
        self._record = path is None   # a write's: its process is recorded (a service run's claim has it)
        self._recorded = False
        self.config = config if config is not None else HeartbeatConfig()
        self._clock = clock
        self._guard = threading.Lock()  # a beat and stop() never interleave
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = False
        self._stopped = False
        self._last_ok: int | None = None
        self._last_error: BaseException | None = None
        self._lost: str | None = None  # why, once lost; never cleared

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Heartbeat:
        """First beat now (its storage error propagates: the write must not start), then beat on a thread."""
        with self._guard:
            if self._started or self._stopped:
                raise InvalidInstantState(f"the heartbeat of {self.instant_time} was started (or stopped) "
                                          "already; make a new Heartbeat for each write")
            now = self._clock()
            beat_at(self.storage, self.path, now)
            self._last_ok, self._started = now, True
        self._thread = threading.Thread(target=self._run, name=f"weir-heartbeat-{self.instant_time}",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, delete: bool = True) -> None:
        """Stop beating at once and (by default) delete the heartbeat file. Never raises: it runs after
        commits and in cleanup, where a leftover file of a finished instant is harmless."""
        self._wake.set()
        with self._guard:  # waits for a beat in progress; none starts after this
            self._stopped = True
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=1.0)
        if delete and self._recorded:
            try:
                delete_writer_record(self.storage, self.instant_time)
            except Exception as exc:
                log.warning("could not delete the writer record of %s (%s); it is harmless once the "
                            "instant is no longer in flight", self.instant_time, exc)
        if delete and self._started:
            try:
                self.storage.delete(self.path)
            except Exception as exc:
                log.warning("could not delete the heartbeat of %s (%s); it is harmless once the instant "
                            "is no longer in flight", self.instant_time, exc)

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- state -------------------------------------------------------------------------------

    @property
    def last_beat_ms(self) -> int | None:
        """Time of the last successful beat (by `clock`)."""
        return self._last_ok

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    @property
    def lost(self) -> bool:
        return self._started and self._lost_reason() is not None

    def check(self) -> None:
        """Raise HeartbeatExpired if the heartbeat is lost (or was never started)."""
        if not self._started:
            reason = "it was never started"
        else:
            reason = self._lost_reason() or ""
        if reason:
            raise HeartbeatExpired(
                f"the heartbeat of write {self.instant_time} is lost: {reason}. Other writers, the cleaner "
                f"or the operator may roll instant {self.instant_time} back: abandon this write and retry it "
                "(if storage is slow or flaky, raise the heartbeat interval or tolerable misses)")

    # -- the beating thread ------------------------------------------------------------------

    def _lost_reason(self) -> str | None:
        if self._lost is None and self._last_ok is not None:
            now = self._clock()
            if is_expired(self._last_ok, now, self.config):
                self._lose(now)
        return self._lost

    def _lose(self, now: int) -> None:
        if self._lost is not None:
            return
        cfg = self.config
        reason = (f"its last successful beat was {now - (self._last_ok or 0)} ms ago, more than "
                  f"{cfg.timeout_ms} ms ({cfg.interval_s:g} s x {cfg.tolerable_misses} tolerable misses)")
        if self._last_error is not None:
            reason += f"; the last beat failed with {type(self._last_error).__name__}: {self._last_error}"
        self._lost = reason

    def _run(self) -> None:
        interval = self.config.interval_s
        due = time.monotonic() + interval
        if self._record:
            self._record_writer()
        while not self._wake.wait(max(0.0, due - time.monotonic())):
            due = max(due + interval, time.monotonic())  # fell behind (a slow beat): no burst of beats
            if not self._beat_once():
                return

    def _record_writer(self) -> None:
        """Record this process as the writer (off the write's path: until it is there, and if it
        cannot be written, readers go by the heartbeat alone)."""
        with self._guard:
            if self._stopped:
                return
            try:
                record_writer(self.storage, self.instant_time)
                self._recorded = True
            except Exception as exc:
                log.debug("could not record the writer of %s: %s", self.instant_time, exc)

    def _beat_once(self) -> bool:
        """One scheduled beat; False when the thread must stop."""
        with self._guard:
            if self._stopped:
                return False
            if self._lost_reason() is not None:  # others may have rolled us back already: do not revive
                return False
            now = self._clock()
            try:
                beat_at(self.storage, self.path, now)
            except Exception as exc:  # a miss; lost only once the misses add up (checked next time)
                self._last_error = exc
                return self._lost_reason() is None
            self._last_ok, self._last_error = now, None
            return True


def last_sign_of_life(storage: Storage, instant_time: str) -> int:
    """The writer's last beat, or its instant's start if it has not beaten yet: a write is created
    a moment before its first beat, and must not look dead in between."""
    from lakecore.timeline.instant_time import to_epoch_ms

    started = to_epoch_ms(instant_time)
    last = read_last_beat(storage, instant_time)
    return started if last is None else max(last, started)
