"""A lock contender in another process: `python -m tests.lakecore.concurrency.lock_worker MODE ...`.

    count <options-json> <table> <counter-file> <n> <go-file>   print "ready", wait for go-file, then n
                                                                times: under the lock, read-sleep-write
    hold  <options-json> <table>                                acquire, print "held", sleep until killed
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from lakecore.concurrency.locks import lock_from_options
from lakecore.storage import open_storage


def main(argv: list[str]) -> int:
    mode, options, table = argv[0], json.loads(argv[1]), argv[2]
    lock = lock_from_options(open_storage(table), options)
    if mode == "hold":
        lock.acquire()
        print("held", flush=True)
        time.sleep(600)
        return 1
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
