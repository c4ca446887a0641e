"""A lock contender in another process: `python -m tests.lakecore.concurrency.locks.lock_worker MODE ...`.

    count <options-json> <table> <counter-file> <n> <go-file>   print "ready", wait for go-file, then n
                                                                times: under the lock, read-sleep-write
    hold  <options-json> <table>                                acquire, print "held", sleep until killed
    drop  <options-json> <table>                                acquire, release, then end at once
                                                                (os._exit: no exit hooks, no session close)
    ask   <options-json> <table>                                acquire, print "held", then for each line
                                                                read: print "held" or "lost" (is_held())
    try   <options-json> <table> <timeout>                      acquire within timeout: print "acquired"
                                                                (and release) or "timeout"

<options-json> holds the lock options, plus "storage_options" for the table's storage when needed.
WEIR_TEST_CLOCK_SKEW_S shifts this process's wall clock (time.time) by that many seconds, as a host
whose clock is wrong would see it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

_skew = float(os.environ.get("WEIR_TEST_CLOCK_SKEW_S", "0"))
if _skew:
    _real_time = time.time
    time.time = lambda: _real_time() + _skew  # before lakecore is imported, so all of it sees the skew

from lakecore.concurrency import lock_from_options  # noqa: E402
from lakecore.errors import LockTimeout  # noqa: E402
from lakecore.storage import open_storage  # noqa: E402


def main(argv: list[str]) -> int:
    mode, options, table = argv[0], json.loads(argv[1]), argv[2]
    storage = open_storage(table, options.pop("storage_options", None))
    lock = lock_from_options(storage, options)
    if mode == "hold":
        lock.acquire()
        print("held", flush=True)
        time.sleep(600)
        return 1
    if mode == "drop":
        lock.acquire()
        lock.release()
        os._exit(0)
    if mode == "ask":
        lock.acquire()
        print("held", flush=True)
        for _ in sys.stdin:
            print("held" if lock.is_held() else "lost", flush=True)
        return 0
    if mode == "try":
        try:
            lock.acquire(timeout=float(argv[3]))
        except LockTimeout:
            print("timeout", flush=True)
            return 0
        print("acquired", flush=True)
        lock.release()
        return 0
    counter, n, go = Path(argv[3]), int(argv[4]), Path(argv[5])
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.005)
    for _ in range(n):
        with lock:
            value = int(counter.read_text())
            time.sleep(0.003)  # widen the race a missing lock would lose
            counter.write_text(str(value + 1))
    close = getattr(lock, "close", None)
    if close is not None:
        close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
