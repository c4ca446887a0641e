"""Run by test_a_full_disk_raises_storage_full.py inside a private mount namespace whose DIR (argv[1])
is a small tmpfs: writes a table until the disk is full and prints, as one JSON line, what the Python
API raised and what the table holds afterwards."""

from __future__ import annotations

import errno
import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakecore import Table
from lakecore.errors import LakecoreError, StorageError


def batch(start: int, n: int) -> pa.Table:
    rng = np.random.default_rng(start)
    return pa.table({"id": pa.array(np.arange(start, start + n), pa.int64()),
                     "ts": pa.array(np.ones(n, np.int64)),
                     "blob": pa.array([rng.bytes(64).hex() for _ in range(n)])})  # does not compress


def fill(path: str, reserve: int = 0) -> None:
    """Take every free byte of the file system (smaller and smaller writes until none fits), then
    give `reserve` bytes back."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        size = 64 << 10
        while size:
            try:
                os.write(fd, os.urandom(size))
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                size //= 2
        os.ftruncate(fd, max(os.fstat(fd).st_size - reserve, 0))
    finally:
        os.close(fd)


def failure(call) -> dict[str, object] | None:
    try:
        call()
    except Exception as exc:
        return {"type": type(exc).__name__, "storage_error": isinstance(exc, StorageError),
                "lakecore_error": isinstance(exc, LakecoreError), "os_error": isinstance(exc, OSError),
                "retryable": getattr(exc, "retryable", None), "message": str(exc)}
    return None


def main(disk: str) -> None:
    uri = os.path.join(disk, "t")
    t = Table.create(uri, schema=batch(0, 1).schema, record_key="id", ordering_field="ts", buckets=2)
    t.upsert(batch(0, 200))
    before = t.read().sort_by("id").to_pylist()
    filler = os.path.join(disk, "filler")
    fill(filler, reserve=256 << 10)  # room for the instant and lock files, not for the data
    out: dict[str, object] = {"data_files": failure(lambda: t.upsert(batch(1000, 5000)))}
    fill(filler)  # not a byte left: the instant itself cannot be drawn
    out["upsert"] = failure(lambda: t.upsert(batch(1000, 5000)))
    out["create"] = failure(lambda: Table.create(os.path.join(disk, "other"), schema=batch(0, 1).schema,
                                                 record_key="id"))
    out["read_while_full"] = t.read().sort_by("id").to_pylist() == before
    left = []
    for root, _, names in os.walk(uri):
        for name in names:
            full = os.path.join(root, name)
            if ".weirtmp-" in name:
                left.append(full)
            elif name.endswith(".parquet") or ".log." in name:
                try:
                    pq.read_metadata(full)
                except Exception:
                    left.append(full)
    out["half_written"] = left
    os.remove(filler)
    out["after_freeing"] = failure(lambda: t.upsert(batch(1000, 50)))
    out["rows_after_freeing"] = Table.open(uri).read().num_rows
    out["rows_before"] = len(before)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
