"""Child process for the crash tests: writes to a table and SIGKILLs itself at a chosen point.

    python -m tests.lakecore.table.crash_writer URI point NAME BATCH
    python -m tests.lakecore.table.crash_writer URI overwrite NAME BATCH   (insert_overwrite_table)
    python -m tests.lakecore.table.crash_writer URI loop FIRST_BATCH

Points are injected by wrapping lakecore functions here, in the test's own process, so the product
code carries no test hooks.
"""

from __future__ import annotations

import os
import signal
import sys

import numpy as np
import pyarrow as pa

KEYS = 500


def batch(n: int) -> pa.Table:
    """Batch n: deterministic rows (some keys updated, some deleted later by the model)."""
    rng = np.random.default_rng(n)
    keys = rng.choice(KEYS, 60, replace=False)
    return pa.table({"id": pa.array(keys, pa.int64()), "ts": pa.array(np.full(60, n), pa.int64()),
                     "name": pa.array([f"b{n}"] * 60), "value": pa.array(rng.random(60))})


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def inject(point: str) -> None:
    import lakecore.concurrency.transaction as tx
    import lakecore.formats.parquet as parquet
    import lakecore.write.file_writer as fw
    from lakecore.timeline import store

    if point == "before_markers":
        import lakecore.write.markers as markers
        markers.create_marker = lambda *a, **kw: die()  # type: ignore[assignment]
    elif point == "before_inflight":
        store.TimelineStore.transition_inflight = lambda self, i: die()  # type: ignore[assignment]
    elif point == "after_first_file":
        real = parquet.write_data_file

        def once(*a, **kw):
            written = real(*a, **kw)
            die()
            return written
        fw.write_data_file = once  # type: ignore[assignment]
    elif point == "mid_file":
        def half(storage, path, table, **_options):
            fs, root = storage.arrow()
            with fs.open_output_stream(f"{root}/{path}") as out:
                out.write(b"PAR1" + b"\0" * 100)
                out.flush()
                die()
        fw.write_data_file = half  # type: ignore[assignment]
    elif point == "before_complete":
        store.TimelineStore.complete = lambda self, *a, **kw: die()  # type: ignore[assignment]
    elif point == "after_complete":
        tx.delete_markers = lambda *a, **kw: die()  # type: ignore[assignment]
    else:
        raise SystemExit(f"unknown point {point}")


def main() -> None:
    import os

    from lakecore import Table, WriterOptions
    from lakecore.concurrency import StorageLock
    from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig

    uri, mode = sys.argv[1], sys.argv[2]
    table = Table.open(uri)
    connect = os.environ.get("WEIR_TEST_ZOOKEEPER")
    if connect:  # the ZooKeeper lock of a SIGKILLed holder frees after its (short) session timeout
        from lakecore.concurrency.locks.zookeeper import zookeeper_lock
        from lakecore.concurrency.zookeeper import table_lock_key
        lock = zookeeper_lock(connect, table_lock_key(table.uri), session_timeout_s=2)
    else:
        lock = StorageLock(table.storage, expiry_s=2.0)
    options = WriterOptions(heartbeat=HeartbeatConfig(interval_s=0.2, tolerable_misses=2))
    table = Table.open(uri, lock=lock, options=options)
    if mode in ("point", "overwrite"):
        inject(sys.argv[3])
        n = int(sys.argv[4])
        write = table.upsert if mode == "point" else table.insert_overwrite_table
        write(batch(n), extra={"batch": n})
        return
    n = int(sys.argv[3])
    while True:
        table.upsert(batch(n), extra={"batch": n})
        print(n, flush=True)
        n += 1


if __name__ == "__main__":
    main()
