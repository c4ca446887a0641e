"""Publishing a Weir table as Iceberg (issue 24): incremental and full publish cost, and the read of the
published merged snapshot by other engines, as ratios against floors measured in the same run.

    python bench/publish_bench.py [--sizes 1000,10000] [--read-size 1000] [--reps R] [--dir D] [--quick]
                                  [--profile]

Per size (data files in the table): a merge-on-read table of many small file groups (partitions x
buckets), each with a base file (a bulk insert) and a log (an upsert of about a third of the keys,
most of them updates, so base files hide rows), built with fsync off to keep it cheap. Then, with
fsync on (as publishing runs here):
- full rebuild: `publish("iceberg")` with no metadata before; floor: fastavro alone writing the same
  number of manifest entries (data + position-delete entries, with the same column statistics maps)
  and a manifest list;
- incremental: an upsert touching 10 file groups (one key each: 10 new log files), then a publish;
  floor: fastavro writing the manifest entries of the files that publish listed;
- read: a table of `--read-size` files with `--read-rows-per-group` rows per file group, published as
  Iceberg v2 (position-delete files) and, in a copy of the table (the same files, no metadata), as v3
  (a deletion vector per data file); lakecore's own `Table.read()` vs pyiceberg's
  `StaticTable.scan().to_arrow()` and DuckDB's `iceberg_scan` (its own venv, `make readers`; skipped
  with a note when missing) of each version (`*_v3_*`: the v3 copy), alternating, each a median of
  `--reps`, row counts checked equal; `pyiceberg_1271*`: pyiceberg again with its own open issue
  apache/iceberg-python#1271 (a Python `range` over every row of each batch of a file with deletes)
  worked around in-process, to show how much of its time that issue is. `--profile`: a cProfile of
  pyiceberg's read of each version on one thread (its executor run inline), the top functions by
  cumulative time on stderr.
`--sizes 0`: no publish figures (the read only).
Prints one JSON document with the targets (`--quick`: a tiny table, the smoke run).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import alternated, median, timed  # noqa: E402

from lakecore import Table  # noqa: E402
from lakecore.storage.local import FSYNC_ENV  # noqa: E402

TARGETS = {"incremental_s_at_10k": 0.2, "full_s_at_10k": 5.0, "read_vs_lakecore": 1.5}
TOUCHED = 10
READERS = os.path.join(ROOT, "tests", "support", "readers")
DUCKDB_PYTHON = os.path.join(ROOT, ".tools", "readers", "duckdb", "venv", "bin", "python")


def shape(files: int) -> tuple[int, int]:
    """(partitions, buckets) giving about `files` data files: a base and a log per file group."""
    groups = max(files // 2, 1)
    buckets = max(1, min(50, int(groups ** 0.5)))
    return max(1, groups // buckets), buckets


def rows_of(keys: np.ndarray, partitions: int, version: int) -> pa.Table:
    rng = np.random.default_rng(int(keys[0]) + version if len(keys) else version)
    return pa.table({"key": pa.array(keys, pa.int64()),
                     "part": pa.array((keys % partitions).astype(np.int64)),
                     "ts": pa.array(np.full(len(keys), version, np.int64)),
                     "v": pa.array(rng.random(len(keys))),
                     "s": pa.array([f"s{k % 997}" for k in keys.tolist()], pa.string())})


def build(uri: str, files: int, rows_per_group: int) -> dict[str, Any]:
    partitions, buckets = shape(files)
    keys = np.arange(partitions * buckets * rows_per_group, dtype=np.int64)
    os.environ[FSYNC_ENV] = "off"
    try:
        start = time.perf_counter()
        table = Table.create(uri, schema=rows_of(keys[:1], partitions, 1).schema, record_key="key",
                             ordering_field="ts", partition_fields=["part"], buckets=buckets)
        table.bulk_insert(rows_of(keys, partitions, 1))
        rng = np.random.default_rng(7)
        updated = rng.choice(keys, len(keys) // 3, replace=False)
        new = np.arange(len(keys), len(keys) + len(keys) // 20, dtype=np.int64)
        table.upsert(rows_of(np.sort(np.concatenate([updated, new])), partitions, 2))
        seconds = time.perf_counter() - start
    finally:
        del os.environ[FSYNC_ENV]
    return {"partitions": partitions, "buckets": buckets, "rows": int(len(keys) * 1.05),
            "build_s": round(seconds, 2), "next_key": int(len(keys) + len(keys) // 20)}


def data_files(table: Table) -> int:
    return sum(len(s.files) for s in table.scan().slices)


# --- the floor: fastavro alone writing Iceberg manifest entries -------------------------------------

def _map(field_id: int, name: str, value: str) -> dict[str, Any]:
    record = {"type": "record", "name": f"m{field_id}", "fields": [
        {"name": "key", "type": "int", "field-id": field_id * 10 + 1},
        {"name": "value", "type": value, "field-id": field_id * 10 + 2}]}
    return {"name": name, "type": ["null", {"type": "array", "items": record, "logicalType": "map"}],
            "default": None, "field-id": field_id}


ENTRY = {"type": "record", "name": "manifest_entry", "fields": [
    {"name": "status", "type": "int", "field-id": 0},
    {"name": "snapshot_id", "type": ["null", "long"], "default": None, "field-id": 1},
    {"name": "sequence_number", "type": ["null", "long"], "default": None, "field-id": 3},
    {"name": "file_sequence_number", "type": ["null", "long"], "default": None, "field-id": 4},
    {"name": "data_file", "field-id": 2, "type": {"type": "record", "name": "r2", "fields": [
        {"name": "content", "type": "int", "field-id": 134},
        {"name": "file_path", "type": "string", "field-id": 100},
        {"name": "file_format", "type": "string", "field-id": 101},
        {"name": "partition", "field-id": 102, "type": {"type": "record", "name": "r102", "fields": [
            {"name": "part", "type": ["null", "long"], "default": None, "field-id": 1000}]}},
        {"name": "record_count", "type": "long", "field-id": 103},
        {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
        _map(109, "value_counts", "long"), _map(110, "null_value_counts", "long"),
        _map(137, "nan_value_counts", "long"), _map(125, "lower_bounds", "bytes"),
        _map(128, "upper_bounds", "bytes"),
        {"name": "referenced_data_file", "type": ["null", "string"], "default": None, "field-id": 143}]}}]}
LIST = {"type": "record", "name": "manifest_file", "fields": [
    {"name": "manifest_path", "type": "string"}, {"name": "manifest_length", "type": "long"},
    {"name": "added_files_count", "type": "int"}]}


def floor(directory: str, entries: int, columns: int, per_manifest: int = 500) -> float:
    """Seconds fastavro takes to write `entries` manifest entries (statistics for `columns` columns),
    `per_manifest` to a file, and a manifest list naming them, each file fsynced as publish's are."""
    os.makedirs(directory, exist_ok=True)
    stats = [{"key": i + 1, "value": 100} for i in range(columns)]
    bounds = [{"key": i + 1, "value": b"\x00" * 8} for i in range(columns)]

    def one(i: int) -> dict[str, Any]:
        return {"status": 1, "snapshot_id": 1, "sequence_number": 1, "file_sequence_number": 1,
                "data_file": {"content": 0, "file_path": f"{directory}/part={i % 100}/f{i:08d}.parquet",
                              "file_format": "PARQUET", "partition": {"part": i % 100}, "record_count": 100,
                              "file_size_in_bytes": 4096, "value_counts": stats, "null_value_counts": stats,
                              "nan_value_counts": None, "lower_bounds": bounds, "upper_bounds": bounds,
                              "referenced_data_file": None}}

    def write(path: str, schema: dict[str, Any], records: list[dict[str, Any]]) -> int:
        out = io.BytesIO()
        fastavro.writer(out, fastavro.parse_schema(schema), records, codec="deflate")
        with open(path, "wb") as fh:
            fh.write(out.getvalue())
            fh.flush()
            os.fsync(fh.fileno())
        return out.tell()

    start = time.perf_counter()
    listed = []
    for m, first in enumerate(range(0, max(entries, 1), per_manifest)):
        path = f"{directory}/m{m}.avro"
        size = write(path, ENTRY, [one(i) for i in range(first, min(entries, first + per_manifest))])
        listed.append({"manifest_path": path, "manifest_length": size, "added_files_count": per_manifest})
    write(f"{directory}/list.avro", LIST, listed)
    return time.perf_counter() - start


# --- measurements -----------------------------------------------------------------------------------

def publish_figures(uri: str, built: dict[str, Any], reps: int, work: str) -> dict[str, Any]:
    table = Table.open(uri)
    columns = len(table.config.schema)
    files = data_files(table)
    full_s, floor_full_s = [], []
    result = None
    for _ in range(reps):
        shutil.rmtree(os.path.join(uri, "metadata"), ignore_errors=True)
        seconds, result = timed(lambda: table.publish("iceberg"))
        assert result.full
        full_s.append(seconds)
        floor_full_s.append(floor(os.path.join(work, "floor"), result.files + _deletes(uri), columns))
    incr_s, floor_incr_s, listed = [], [], []
    key = built["next_key"]
    for _ in range(reps):
        # one new key per partition-bucket pair: the upsert lands in TOUCHED distinct file groups
        keys = np.arange(key, key + built["partitions"] * TOUCHED, built["partitions"], dtype=np.int64)
        keys = keys + np.arange(TOUCHED, dtype=np.int64)  # distinct partitions
        key += built["partitions"] * TOUCHED + TOUCHED
        table.upsert(rows_of(keys, built["partitions"], 3))
        seconds, result = timed(lambda: table.publish("iceberg"))
        assert not result.full and result.groups <= TOUCHED, result.describe()
        incr_s.append(seconds)
        listed.append(result.files)
        floor_incr_s.append(floor(os.path.join(work, "floor"), 2 * result.files, columns))
    full, incr = median(full_s), median(incr_s)
    return {"data_files": files, **built,
            "full_s": round(full, 3), "full_floor_s": round(median(floor_full_s), 3),
            "full_ratio": round(full / median(floor_full_s), 1),
            "incremental_s": round(incr, 3), "incremental_floor_s": round(median(floor_incr_s), 4),
            "incremental_ratio": round(incr / median(floor_incr_s), 1),
            "incremental_files_listed": listed, "runs": {"full_s": full_s, "incremental_s": incr_s}}


def _deletes(uri: str) -> int:
    deletes = os.path.join(uri, "metadata", "deletes")
    return len(os.listdir(deletes)) if os.path.isdir(deletes) else 0


def _metadata(uri: str) -> str:
    with open(os.path.join(uri, "metadata", "version-hint.text")) as fh:
        return os.path.join(uri, "metadata", f"v{fh.read().strip()}.metadata.json")


DUCKDB_CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import engine_duckdb as e
e.start()
paths = json.loads(sys.argv[2])
out = {name: [] for name in paths}
for rep in range(int(sys.argv[3])):
    names = sorted(paths) if rep % 2 == 0 else sorted(paths, reverse=True)
    for name in names:
        t = time.perf_counter()
        rows = e.iceberg(paths[name]).num_rows
        out[name].append([time.perf_counter() - t, rows])
e.stop()
print(json.dumps(out))
"""


def v3_copy(uri: str) -> str:
    """A copy of the table at `uri` (its files, not its published metadata) published as Iceberg v3."""
    copy = uri + "-v3"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(uri, copy, ignore=lambda d, _: ["metadata", "_delta_log"] if d == uri else [])
    result = Table.open(copy).publish("iceberg", format_version=3)
    assert result.full and result.format_version == 3, result.describe()
    return copy


def pyiceberg_read(metadata: str) -> pa.Table:
    from pyiceberg.table import StaticTable

    return StaticTable.from_metadata(metadata).scan().to_arrow()


def _kept_positions(positional_deletes: list[pa.ChunkedArray], start_index: int, end_index: int) -> pa.Array:
    """What pyiceberg's `_combine_positional_deletes` returns (the positions in [start_index, end_index)
    of a batch that no delete names, relative to start_index), computed with numpy: pyiceberg builds
    them from a Python `range` over every row of the batch (its open issue apache/iceberg-python#1271)."""
    import numpy as np

    keep = np.ones(end_index - start_index, dtype=np.bool_)
    for deletes in positional_deletes:
        for chunk in deletes.chunks:
            named = chunk.to_numpy()
            keep[named[(named >= start_index) & (named < end_index)] - start_index] = False
    return pa.array(np.flatnonzero(keep))


def pyiceberg_read_1271(metadata: str) -> pa.Table:
    """`pyiceberg_read` with pyiceberg's issue 1271 worked around for this call (a diagnosis of where
    its time goes, not a way Weir offers to read): its batch filter for deletes done by numpy."""
    import pyiceberg.io.pyarrow as pyiceberg_arrow

    original = pyiceberg_arrow._combine_positional_deletes
    pyiceberg_arrow._combine_positional_deletes = _kept_positions
    try:
        return pyiceberg_read(metadata)
    finally:
        pyiceberg_arrow._combine_positional_deletes = original


def read_figures(uri: str, v3: str, reps: int) -> dict[str, Any]:
    """lakecore's read of the table at `uri` against pyiceberg's and DuckDB's of its v2 metadata and of
    the v3 metadata of its copy `v3`."""
    import pyiceberg.table  # noqa: F401  (imported before the clock starts)

    table = Table.open(uri)
    metadata = {"": _metadata(uri), "_v3": _metadata(v3)}
    readers: dict[str, Callable[[], pa.Table]] = {"lakecore": table.read}
    readers.update({f"pyiceberg{v}": (lambda m=m: pyiceberg_read(m)) for v, m in metadata.items()})
    readers.update({f"pyiceberg_1271{v}": (lambda m=m: pyiceberg_read_1271(m)) for v, m in metadata.items()})
    runs, last = alternated(readers, reps)
    rows = {name: got.num_rows for name, got in last.items()}
    for m in metadata.values():  # the workaround changes no row
        order = [(c, "ascending") for c in table.config.schema.names]
        assert pyiceberg_read(m).sort_by(order).equals(pyiceberg_read_1271(m).sort_by(order))
    out: dict[str, Any] = {}
    if os.path.exists(DUCKDB_PYTHON):
        paths = json.dumps({f"duckdb{v}": m for v, m in metadata.items()})
        done = subprocess.run([DUCKDB_PYTHON, "-c", DUCKDB_CHILD, READERS, paths, str(reps)],
                              capture_output=True, text=True, check=True)
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        for name, got in measured.items():
            runs[name] = [s for s, _ in got]
            rows[name] = got[-1][1]
    else:
        out["duckdb_note"] = f"{DUCKDB_PYTHON} missing: run `make readers`"
    assert len(set(rows.values())) == 1, f"readers disagree on the row count: {rows}"
    base = median(runs["lakecore"])
    out.update({"rows": rows["lakecore"], "data_files": data_files(table),
                **{f"{r}_s": round(median(s), 3) for r, s in runs.items()},
                **{f"{r}_vs_lakecore": round(median(s) / base, 2) for r, s in runs.items()
                   if r != "lakecore"},
                **{f"{r}_v3_vs_v2": round(median(runs[f"{r}_v3"]) / median(runs[r]), 2)
                   for r in ("pyiceberg", "pyiceberg_1271", "duckdb") if r in runs},
                "runs": runs})
    return out


class _Inline:
    """An executor running each task in the caller's thread (a profile then sees the work itself)."""

    def map(self, fn: Callable[..., Any], *iterables: Iterable[Any]) -> Iterable[Any]:
        return list(map(fn, *iterables))

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        from concurrent.futures import Future

        future: Future[Any] = Future()
        future.set_result(fn(*args, **kwargs))
        return future


def profile_pyiceberg(metadata: str, label: str, top: int = 12) -> None:
    """pyiceberg's read of `metadata` on one thread, profiled: its top functions on stderr."""
    from pyiceberg.utils.concurrent import ExecutorFactory

    pooled = ExecutorFactory.get_or_create
    ExecutorFactory.get_or_create = staticmethod(lambda: _Inline())  # type: ignore[method-assign]
    try:
        profiler = cProfile.Profile()
        profiler.runcall(pyiceberg_read, metadata)
    finally:
        ExecutorFactory.get_or_create = pooled  # type: ignore[method-assign]
    print(f"--- pyiceberg {label}, one thread, by cumulative time", file=sys.stderr)
    pstats.Stats(profiler, stream=sys.stderr).strip_dirs().sort_stats("cumulative").print_stats(top)


def table(work: str, size: int, rows_per_group: int) -> tuple[str, dict[str, Any]]:
    """The table of about `size` files (built once per --dir), and how it was built."""
    uri = os.path.join(work, f"t{size}-{rows_per_group}")
    info_path = uri + ".json"
    if not os.path.exists(info_path):
        shutil.rmtree(uri, ignore_errors=True)
        with open(info_path + ".tmp", "w") as fh:
            json.dump(build(uri, size, rows_per_group), fh)
        os.replace(info_path + ".tmp", info_path)
    with open(info_path) as fh:
        return uri, dict(json.load(fh))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000", help="data files per table, comma-separated")
    ap.add_argument("--rows-per-group", type=int, default=20)
    ap.add_argument("--read-size", type=int, default=1000, help="files of the table read (0: no read)")
    ap.add_argument("--read-rows-per-group", type=int, default=500)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default=None, help="keep the tables here (built once, reused)")
    ap.add_argument("--quick", action="store_true", help="smoke run: tiny tables")
    ap.add_argument("--profile", action="store_true", help="profile pyiceberg's read of v2 and v3")
    a = ap.parse_args()
    if a.quick:
        a.sizes, a.rows_per_group, a.read_size, a.read_rows_per_group, a.reps = "16", 20, 16, 20, 1
    work = a.dir or tempfile.mkdtemp(prefix="publish_bench_")
    os.makedirs(work, exist_ok=True)
    load = [round(x, 1) for x in os.getloadavg()]
    try:
        out: dict[str, Any] = {"sizes": {}, "targets": TARGETS, "load_avg_at_start": load}
        for size in [int(s) for s in a.sizes.split(",") if int(s)]:
            uri, built = table(work, size, a.rows_per_group)
            figures = publish_figures(uri, built, a.reps, work)
            with open(uri + ".json", "w") as fh:  # the incremental upserts used keys up to here
                json.dump({**built, "next_key": built["next_key"] + 10**6}, fh)
            print(f"{figures['data_files']} files: full {figures['full_s']} s "
                  f"({figures['full_ratio']}x floor), "
                  f"incremental {figures['incremental_s']} s ({figures['incremental_ratio']}x floor)",
                  file=sys.stderr)
            out["sizes"][str(size)] = figures
        if a.read_size:
            uri, built = table(work, a.read_size, a.read_rows_per_group)
            Table.open(uri).publish("iceberg", format_version=2)
            v3 = v3_copy(uri)
            out["read"] = {**read_figures(uri, v3, a.reps), "build_s": built["build_s"]}
            if a.profile:
                profile_pyiceberg(_metadata(uri), "v2 (position-delete files)")
                profile_pyiceberg(_metadata(v3), "v3 (deletion vectors)")
            print(f"read of {out['read']['rows']} rows in {out['read']['data_files']} files: " + ", ".join(
                f"{k} {v}" for k, v in out["read"].items() if k.endswith("_vs_lakecore")), file=sys.stderr)
        out["load_avg_at_end"] = [round(x, 1) for x in os.getloadavg()]
        print(json.dumps(out, indent=1))
    finally:
        if a.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
