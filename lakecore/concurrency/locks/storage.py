"""The storage lock: a chain of generation files `<base>/.weir/locks/<generation>` on the table's storage.

Each state of the lock is a new file, created with create-if-absent, never rewritten: the newest
generation says who holds the lock ("held", with the holder's lease) or that it is free. So every
change, taking a free lock, breaking a stale one, giving it up, is one conditional create of the
next generation, and of several contenders exactly one wins it; nobody ever deletes a lock someone
else may have just taken. Older generations are deleted by the holder of a newer one; as a number can
then be created again by a contender that listed long ago, a new holder lists once more to make sure
its generation is the newest (else it deletes its stale one and looks again).

Expiry compares no clocks across hosts: a contender breaks a lock only after it has seen the same
generation unchanged for the holder's whole lease on its own monotonic clock, and a holder stops
trusting its lock `lease_s` after it started creating it (so before any contender can break it,
clock rates aside). A holder that outlives its lease loses the lock (`is_held()` turns False).
One exception, which needs no clock: on storage where a process's writes cannot land after it ended
(local files: `writes_may_land_after_exit` False), a holder that ran on this machine, in this PID
namespace, and whose process is gone (killed, crashed) is broken at once (concurrency/processes.py),
so a crashed local writer does not make the next one wait out its lease. On an object store a killed
holder's last request (its commit, say) may still be on its way and land later: there the lease covers
it. A holder trusts its lock only in the process that took it (a fork inherits a held lock object,
not the lock).

Needs atomic `write_if_absent`; storage without it is refused at the first acquire (`LockUnsupported`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from lakecore.concurrency.locks.protocol import GuardedLock, backoff_s
from lakecore.concurrency.processes import process_gone, process_space
from lakecore.config import LockSpec
from lakecore.errors import (
    AlreadyExists,
    AtomicCreateUnsupported,
    InvalidTableConfig,
    LockTimeout,
    LockUnsupported,
    StorageError,
)
from lakecore.storage import Storage

log = logging.getLogger(__name__)

DIRECTORY = ".weir/locks"
_DIGITS = 20
# Older generations are deleted once there are more than this many (one request saved per acquire).
_KEEP = 4
# A holder stops trusting its lock this fraction of the lease early: is_held() is checked right
# before completing an instant, and the completion itself takes a moment.
_SAFETY = 0.1


@dataclass(frozen=True)
class Generation:
    """One generation file: its number and what it says."""

    number: int
    state: Literal["held", "free"]
    owner: str = ""
    token: str = ""
    lease_s: float = 0.0
    host: str = ""      # where the holder runs, its pid there and its process space (../processes.py):
    pid: int = 0        # what tells that a holder on this machine is gone; "" / 0 in older files,
    process: str = ""   # whose holders wait out their lease as before

    def encode(self) -> bytes:
        return json.dumps({"state": self.state, "owner": self.owner, "token": self.token,
                           "lease_s": self.lease_s, "written_at": time.time(), "host": self.host,
                           "pid": self.pid, "process": self.process}).encode()

    def holder_gone(self) -> bool:
        """Held by a process of this machine and PID namespace that no longer runs."""
        return self.state == "held" and process_gone(self.host, self.process, self.pid)

    def breaks_at_once(self, storage: Storage) -> bool:
        """Whether a contender breaks it now, without its lease: its holder is gone (holder_gone) and
        none of that process's writes can still land on `storage`."""
        return not getattr(storage, "writes_may_land_after_exit", True) and self.holder_gone()

    @classmethod
    def decode(cls, number: int, raw: bytes) -> Generation:
        try:
            body = json.loads(raw)
            state = body["state"]
            lease = float(body.get("lease_s", 0.0))
            if state not in ("held", "free") or not lease >= 0:
                raise ValueError(state)
            return cls(number, state, str(body.get("owner", "")), str(body.get("token", "")), lease,
                       str(body.get("host", "")), int(body.get("pid", 0)), str(body.get("process", "")))
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError):
            # Unreadable: a holder that cannot be identified, broken like a stale one after a default lease.
            return cls(number, "held", "unknown (unreadable lock file)", raw.hex()[:32], 60.0)


def path_of(number: int) -> str:
    return f"{DIRECTORY}/{number:0{_DIGITS}d}"


def generations(names: list[str]) -> list[int]:
    return sorted(int(n) for n in names if len(n) == _DIGITS and n.isdigit())


def numbers_of(storage: Storage) -> list[int]:
    """The generation numbers on `storage`, ascending."""
    return generations(storage.list_names(DIRECTORY))


def newest_generation(storage: Storage) -> Generation | None:
    """The newest generation of the table's storage lock, read; None when there is none yet."""
    while True:
        numbers = numbers_of(storage)
        if not numbers:
            return None
        try:
            return Generation.decode(numbers[-1], storage.read(path_of(numbers[-1])))
        except FileNotFoundError:
            continue  # deleted by a newer holder after we listed it: a newer one exists


Step = Literal["create", "wait"]


def next_step(newest: Generation | None, seen_since: float | None, now: float, *,
              at_once: bool = False) -> Step:
    """Pure: create the next generation when the lock is free or stale, else wait.

    `seen_since` is when this contender first saw `newest` (its own monotonic clock); a held
    generation is stale once it stayed the newest for its whole lease from then on, or at once when
    it may be broken without its lease (`at_once`: Generation.breaks_at_once).
    """
    if newest is None or newest.state == "free" or at_once:
        return "create"
    if seen_since is not None and now - seen_since >= newest.lease_s:
        return "create"
    return "wait"


class StorageLock(GuardedLock):
    """The table lock as generation files on the table's storage (see the module docstring)."""

    spec = LockSpec("storage")
    DIRECTORY = DIRECTORY

    def __init__(self, storage: Storage, *, expiry_s: float = 60.0, default_timeout: float = 60.0,
                 poll_initial_s: float = 0.002, poll_max_s: float = 0.1,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(default_timeout)
        if not expiry_s > 0:
            raise InvalidTableConfig(f"storage lock expiry must be > 0 seconds, got {expiry_s}")
        self._storage = storage
        self._expiry = expiry_s
        self._poll = (poll_initial_s, poll_max_s)
        self._clock = clock
        self._id = uuid.uuid4().hex[:12]
        self._held: Generation | None = None
        self._trust_until = 0.0

    def describe(self) -> str:
        return f"storage lock {self._storage.uri}/{DIRECTORY}"

    # -- reading the chain ------------------------------------------------------------------

    def _numbers(self) -> list[int]:
        return numbers_of(self._storage)

    def _newest(self) -> Generation | None:
        return newest_generation(self._storage)

    def _create(self, generation: Generation) -> bool:
        """Create `generation` if absent; whether we did."""
        try:
            self._storage.write_if_absent(path_of(generation.number), generation.encode())
        except AlreadyExists:
            return False
        except AtomicCreateUnsupported as exc:
            raise LockUnsupported(
                f"{self.describe()} needs atomic create-if-absent, which this storage lacks ({exc}); "
                "record lock provider 'zookeeper' for this table (weir table set-lock)") from exc
        return True

    # -- the table lock ---------------------------------------------------------------------

    def _take(self, deadline: float, timeout: float) -> None:
        attempt = 0
        seen: tuple[int, str] | None = None
        seen_since = 0.0
        while True:
            newest = self._newest()
            now = self._clock()
            key = None if newest is None else (newest.number, newest.token)
            if key != seen:
                seen, seen_since = key, now
            at_once = newest is not None and newest.breaks_at_once(self._storage)
            if next_step(newest, seen_since, now, at_once=at_once) == "create":
                if at_once and newest is not None:
                    log.info("%s: breaking the lock of %s, whose process is gone", self.describe(),
                             newest.owner)
                number = 1 if newest is None else newest.number + 1
                mine = self._generation(number)
                started = self._clock()
                if self._create(mine) and self._settle(mine):
                    self._held, self._trust_until = mine, started + self._expiry * (1 - _SAFETY)
                    return
                if time.monotonic() < deadline:
                    continue  # someone else moved the chain: look again at once
            if time.monotonic() >= deadline:
                holder = newest.owner if newest is not None else "nobody"
                raise LockTimeout(f"{self.describe()} held by {holder} for more than {timeout:.1f}s; retry "
                                  f"later (a holder that died loses it after its lease of "
                                  f"{newest.lease_s if newest else 0:.0f}s, or at once when it ran on this "
                                  "machine and the table is on local files)")
            time.sleep(min(backoff_s(attempt, initial_s=self._poll[0], cap_s=self._poll[1]),
                           max(0.0, deadline - time.monotonic())))
            attempt += 1

    def _generation(self, number: int) -> Generation:
        """A held generation of ours, naming the process that takes the lock now (asked at each take: a
        lock object that crossed a fork or a pickle must not name the process that made it, which may
        end while this one holds the lock)."""
        host, pid = socket.gethostname(), os.getpid()
        return Generation(number, "held", f"{host}:{pid}:{self._id}", uuid.uuid4().hex, self._expiry,
                          host, pid, process_space())

    def _settle(self, mine: Generation) -> bool:
        """After creating `mine`: make sure it is the newest (a generation number can be created again
        after a newer holder deleted it); then delete the older ones."""
        numbers = self._numbers()
        if numbers and numbers[-1] > mine.number:
            self._storage.delete(path_of(mine.number))  # a stale number nobody will read again
            return False
        if len(numbers) > _KEEP:
            for number in numbers[:-1]:
                self._storage.delete(path_of(number))
        return True

    def _give(self) -> None:
        held, self._held = self._held, None
        if held is None or held.pid != os.getpid():
            return  # a fork's copy of a held lock object frees nothing: the lock is its maker's
        try:
            # Free is the next generation; if it exists, our lock was broken and is someone else's now.
            self._create(Generation(held.number + 1, "free"))
        except (StorageError, OSError, LockUnsupported) as exc:
            # The lock stays held until its lease runs out, then it is broken: nothing else to do.
            log.warning("could not give up %s (%s); it frees itself after its lease of %.0fs",
                        self.describe(), exc, held.lease_s)

    def _still_held(self) -> bool:
        held = self._held
        if held is None or self._clock() >= self._trust_until or held.pid != os.getpid():
            return False  # (a fork's copy of a held lock object: the lock is its maker's)
        try:
            numbers = self._numbers()
        except (StorageError, OSError):  # cannot tell, so the caller must not act as the holder
            return False
        return bool(numbers) and numbers[-1] == held.number
