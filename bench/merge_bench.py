"""Merge engine benchmark: snapshot reads of a base file plus logs, and a three-stream partial update.

Prints the best of several runs for each case and its ratio to a floor measured in the same run:
the hash probe and filter that any base + log read needs (snapshot cases), and pyarrow's own full
outer join of the three streams' latest values (partial update). Not a test; run it by hand:

    PYTHONPATH=. .venv/bin/python bench/merge_bench.py
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakecore.merge import OP_COLUMN, GroupSpec, MergeSpec, merge

BASE_ROWS = 1_000_000
LOG_ROWS = 100_000
RUNS = 5
RNG = np.random.default_rng(20261122)

DATA = ("ts", "i1", "i2", "i3", "f1", "f2", "f3", "s1", "s2")
SCHEMA = pa.schema(
    [("key", pa.int64()), ("ts", pa.int64())]
    + [(f"i{i}", pa.int64()) for i in (1, 2, 3)]
    + [(f"f{i}", pa.float64()) for i in (1, 2, 3)]
    + [("s1", pa.string()), ("s2", pa.string())]
)
EVENT = MergeSpec(key=("key",), groups=(GroupSpec("all", DATA, "ts"),))
COMMIT = MergeSpec(key=("key",), groups=(GroupSpec("all", DATA, None),))


def strings(n: int) -> pa.Array:
    """n random 8-letter strings, built from one buffer rather than n Python objects."""
    data = RNG.integers(ord("a"), ord("z") + 1, size=n * 8, dtype=np.uint8)
    offsets = np.arange(0, 8 * n + 1, 8, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data))


def rows(keys: np.ndarray) -> pa.Table:
    n = len(keys)
    columns = {"key": keys, "ts": RNG.integers(0, 1_000_000, n)}
    columns |= {f"i{i}": RNG.integers(0, 1 << 40, n) for i in (1, 2, 3)}
    columns |= {f"f{i}": RNG.random(n) for i in (1, 2, 3)}
    return pa.table(columns | {"s1": strings(n), "s2": strings(n)}, schema=SCHEMA)


def log_batch(base_keys: np.ndarray, fresh_from: int) -> pa.Table:
    """LOG_ROWS rows: half update base keys, half insert new ones; a few are deletes."""
    half = LOG_ROWS // 2
    keys = np.concatenate([RNG.choice(base_keys, half), fresh_from + RNG.integers(0, half, half)])
    table = rows(RNG.permutation(keys))
    ops = (RNG.random(LOG_ROWS) < 0.02).astype(np.int8)
    return table.append_column(OP_COLUMN, pa.array(ops))


def best(run: Callable[[], object]) -> float:
    run()
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def probe_floor(base: pa.Table, logs: list[pa.Table]) -> Callable[[], object]:
    """The least a base + log read does: probe the base keys against the log keys (given, already
    distinct, for free) and copy the base rows that no log row touches."""
    log_keys = pa.array(np.unique(np.concatenate([t.column("key").to_numpy() for t in logs])))

    def run() -> object:
        return base.filter(pc.invert(pc.is_in(base.column("key"), value_set=log_keys)))

    return run


def report(name: str, seconds: float, floor_name: str, floor: float) -> None:
    ratio = f"{seconds / floor:5.2f}x {floor_name} ({floor * 1000:.1f} ms)"
    print(f"{name:52s} {seconds * 1000:8.1f} ms   {ratio}")


def snapshot_cases() -> None:
    base_keys = RNG.permutation(BASE_ROWS * 2)[:BASE_ROWS].astype(np.int64)
    base = rows(base_keys)
    logs = [log_batch(base_keys, BASE_ROWS * 2 + i * LOG_ROWS) for i in range(10)]
    for spec, mode in ((EVENT, "event time"), (COMMIT, "commit time")):
        for n_logs in (1, 10):
            floor = best(probe_floor(base, logs[:n_logs]))
            seconds = best(partial(merge, [base, *logs[:n_logs]], spec, SCHEMA, first_unique=True))
            report(f"1M base + {n_logs} x 100k log, {mode}", seconds, "probe floor", floor)
    seconds = best(lambda: merge([base, logs[0]], EVENT, SCHEMA))
    floor = best(probe_floor(base, logs[:1]))
    report("1M base + 1 x 100k log, event time, general path", seconds, "probe floor", floor)


def partial_update_case() -> None:
    keys = np.arange(BASE_ROWS, dtype=np.int64)
    spec = MergeSpec(
        key=("key",),
        groups=tuple(
            GroupSpec(f"g{g}", (f"a{g}", f"b{g}", f"c{g}"), f"_weir_ord__g{g}") for g in range(3)
        ),
    )
    streams = []
    for g in range(3):
        n = len(keys)
        streams.append(pa.table({
            "key": RNG.permutation(keys),
            f"a{g}": RNG.integers(0, 1 << 40, n),
            f"b{g}": RNG.random(n),
            f"c{g}": strings(n),
            f"_weir_ord__g{g}": RNG.integers(0, 1_000_000, n),
        }))
    schema = pa.schema(
        [("key", pa.int64())]
        + [f for s in streams for f in s.schema if f.name != "key" and not f.name.startswith("_")]
        + [s.schema.field(f"_weir_ord__g{g}") for g, s in enumerate(streams)]
    )
    # Each stream's batch holds its latest values already, so the join needs no dedupe.
    join = best(
        lambda: streams[0]
        .join(streams[1], "key", join_type="full outer")
        .join(streams[2], "key", join_type="full outer")
    )
    general = best(lambda: merge(streams, spec, schema))
    based = best(lambda: merge(streams, spec, schema, first_unique=True))
    report("partial update, 3 groups x 1M rows, general path", general, "3-way join", join)
    report("partial update, 3 groups x 1M rows, first_unique", based, "3-way join", join)


if __name__ == "__main__":
    print(f"merge benchmark: best of {RUNS} runs, pyarrow {pa.__version__}, numpy {np.__version__}")
    snapshot_cases()
    partial_update_case()
