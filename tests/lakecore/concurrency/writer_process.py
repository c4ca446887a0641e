"""One writer process of the multi-writer proof tests.

    python -m tests.lakecore.concurrency.writer_process URI LOCK WRITER COMMITS SEED LOG

Each attempt upserts a random batch of keys under the table lock: with LOCK a ZooKeeper connect string,
the table's ZooKeeper lock with test timeouts; with LOCK "recorded", whatever lock the table records
(storage options for URI in WEIR_TEST_STORAGE_OPTIONS, JSON). The outcome (committed
instant, or the conflict it lost) is appended to LOG as one JSON line. Lost batches are not retried:
the history checker must find each of them absent from the table.

Flag "resume-after=PATH" (with "tolerate-outages"): once PATH holds an instant time (written by the test
when ZooKeeper is back), the writer goes on past COMMITS with further batches until one it began after that
time commits, so each writer shows it survived the outage however slow the machine. It gives up (exit 1,
saying so) after RESUME_DEADLINE_S.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa

KEYS = 3000
BATCH = 25
RESUME_DEADLINE_S = 180.0


def batch(writer: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng([seed, writer, n])
    keys = rng.choice(KEYS, BATCH, replace=False).astype(np.int64)
    return pa.table({"id": pa.array(keys), "writer": pa.array(np.full(BATCH, writer, np.int64)),
                     "seq": pa.array(np.full(BATCH, n, np.int64)),
                     "v": pa.array(rng.random(BATCH))})


def main() -> None:
    import os
    import time

    from lakecore import ConflictOptions, Table, WriterOptions
    from lakecore.concurrency.conflicts.early import EarlyDetection
    from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig
    from lakecore.concurrency.locks.zookeeper import zookeeper_lock
    from lakecore.concurrency.zookeeper import table_lock_key
    from lakecore.errors import EarlyConflict, LakecoreError, WriteConflict
    from lakecore.timeline import now_ms

    uri, connect, writer, commits, seed, log = sys.argv[1:7]
    flags = sys.argv[7:]  # "tolerate-outages", "early=<strategy>", "resume-after=<path>"
    tolerate = "tolerate-outages" in flags
    resume = next((f.split("=", 1)[1] for f in flags if f.startswith("resume-after=")), None)
    strategy = next((f.split("=", 1)[1] for f in flags if f.startswith("early=")), None)
    zk = connect if strategy == "direct_zk" else None
    early = EarlyDetection(strategy, zookeeper=zk, period_s=0.05) if strategy else None  # type: ignore[arg-type]
    options = WriterOptions(heartbeat=HeartbeatConfig(interval_s=0.5, tolerable_misses=4),
                            conflicts=ConflictOptions(early_detection=early))
    if connect == "recorded":
        storage_options = json.loads(os.environ.get("WEIR_TEST_STORAGE_OPTIONS") or "null")
        table = Table.open(uri, storage_options=storage_options, options=options)
    else:
        probe = Table.open(uri)
        lock = zookeeper_lock(connect, table_lock_key(probe.uri), session_timeout_s=4 if tolerate else 10,
                              connection_timeout_s=2, acquire_timeout_s=5)
        table = Table.open(uri, lock=lock, options=options)
    def attempt(n: int) -> dict:
        tag = f"w{writer}-{n}"
        try:
            res = table.upsert(batch(int(writer), n, int(seed)), extra={"batch": tag})
            return {"batch": tag, "outcome": "committed", "instant": res.instant.requested_time}
        except EarlyConflict as exc:
            return {"batch": tag, "outcome": "early", "instant": exc.instant, "other": exc.other,
                    "file_groups": sorted(map(list, exc.file_groups)),
                    "at": getattr(exc, "detected_at", None) or now_ms()}
        except WriteConflict as exc:
            return {"batch": tag, "outcome": "conflict", "instant": exc.instant,
                    "conflicts": [{"theirs": c.theirs, "file_groups": sorted(map(list, c.file_groups))}
                                  for c in exc.conflicts]}
        except LakecoreError as exc:  # ZooKeeper outage: a clear error, nothing committed
            if not tolerate:
                raise
            time.sleep(0.2)
            return {"batch": tag, "outcome": "failed", "error": type(exc).__name__, "message": str(exc)}

    def resumed(entries: list[dict]) -> bool:
        """Whether a write begun after the time in `resume` committed (False while the file is empty)."""
        assert resume is not None
        back = Path(resume).read_text().strip() if os.path.exists(resume) else ""
        return bool(back) and any(e["outcome"] == "committed" and e["instant"] >= back for e in entries)

    with open(log, "a") as out:
        entries: list[dict] = []
        n = 0
        deadline = None
        while n < int(commits) or (resume is not None and not resumed(entries)):
            if n >= int(commits):
                deadline = deadline or time.monotonic() + RESUME_DEADLINE_S
                if time.monotonic() > deadline:
                    sys.exit(f"writer {writer}: no write begun after {resume} committed in "
                             f"{RESUME_DEADLINE_S:.0f} s past its {commits} batches")
                if not os.path.exists(resume or ""):
                    time.sleep(0.1)
                    continue
            entry = attempt(n)
            entries.append(entry)
            out.write(json.dumps(entry) + "\n")
            out.flush()
            n += 1

if __name__ == "__main__":
    import faulthandler
    import os

    faulthandler.enable()  # a native abort during the run prints every thread's stack
    main()
    # Everything this writer did is durable (commits, the flushed log). Skip interpreter teardown:
    # pyarrow can abort there ("terminate called without an active exception", apache/arrow#34314,
    # a native thread pool torn down while joinable); it once failed a CI run with no Python error.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
