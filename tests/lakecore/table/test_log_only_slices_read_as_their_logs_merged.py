"""A file slice of log files only (a merge-on-read table before its first compaction) reads exactly
as the general merge of its logs, in the slice's (completion) order, whichever path the reader
takes: the oldest log with one row per key is used as the merge's base, a log restating a key in
several rows is not. Event-time, commit-time and stitched (column-group) tables; deletes in logs;
logs lacking a group's columns; column projections; logs whose completion order differs from
their instant order (NBCC)."""

from __future__ import annotations

import functools
import itertools
import tempfile
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore import ColumnGroup, Table
from lakecore.config import COMMIT_TIME, OP, TableConfig
from lakecore.formats import write_file
from lakecore.layout import FileSlice, LogFile, log_file_name
from lakecore.merge import merge, merge_to_base
from lakecore.read.slices import merge_columns, projected_spec, read_slice
from lakecore.read.spec import file_schema, merge_spec
from lakecore.storage import Storage
from lakecore.timeline import WriteStat
from tests.lakecore.merge.reference import reference_merge
from tests.lakecore.merge.strategies import rows, rows_by_key

SCHEMA = pa.schema([("k", pa.int64()), ("ts", pa.int64()), ("a", pa.int64()), ("b", pa.string()),
                    ("a_ts", pa.int64())])
KINDS: dict[str, dict[str, Any]] = {
    "event_time": {"ordering_field": "ts"},
    "commit_time": {},
    "stitched": {"column_groups": [ColumnGroup("ga", ("a",), "a_ts"), ColumnGroup("gb", ("b",), "ts")]},
}
_files = itertools.count()


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Table]:
    root = tmp_path_factory.mktemp("log-only")
    return {kind: Table.create(str(root / kind), schema=SCHEMA, record_key="k", buckets=1, **kw)
            for kind, kw in KINDS.items()}


@st.composite
def log_batch(draw: st.DrawFn, config: TableConfig, *, unique: bool) -> pa.Table:
    """A log's rows: file-schema columns (some left out, as a partial or stitched write does),
    `_weir_op` with deletes, small key and ordering ranges so that keys and orderings collide."""
    schema = file_schema(config)
    keys = draw(st.lists(st.integers(0, 5), max_size=8, unique=unique))
    n = len(keys)
    data: dict[str, pa.Array] = {"k": pa.array(keys, pa.int64())}
    groups = merge_spec(config).groups
    present = {c for g in groups if draw(st.booleans()) for c in (*g.columns, g.ordering) if c}
    for field in schema:
        if field.name == "k":
            continue
        if field.name == COMMIT_TIME:
            data[field.name] = pa.array([0] * n, pa.int64())  # set per log below
        elif field.name in present or (field.name not in config.data_columns and draw(st.booleans())) \
                or (config.merge_mode != "partial_update" and draw(st.booleans())):
            values = st.integers(0, 3) if pa.types.is_integer(field.type) else st.sampled_from(["x", "y"])
            data[field.name] = pa.array(draw(st.lists(st.one_of(st.none(), values, values),
                                                      min_size=n, max_size=n)), field.type)
    data[OP] = pa.array(draw(st.lists(st.sampled_from([0, 0, 1]), min_size=n, max_size=n)), pa.int8())
    return pa.table(data)


def write_slice(storage: Storage, batches: list[pa.Table],
                instants: list[int]) -> tuple[FileSlice, list[pa.Table]]:
    """The batches as the log files of one base-less slice, in the given (completion) order; each
    log's instant time is drawn independently, as under NBCC, where completion order decides."""
    file_id = f"{next(_files):08d}"
    logs, written = [], []
    for seq, (batch, instant) in enumerate(zip(batches, instants, strict=True)):
        instant_time = f"2026112300{instant:07d}"
        batch = batch.set_column(batch.column_names.index(COMMIT_TIME), COMMIT_TIME,
                                 pa.array([int(instant_time)] * batch.num_rows, pa.int64()))
        name = log_file_name(file_id, instant_time, f"{seq}-0-0")
        size = write_file(storage, name, batch, compression="zstd")
        stat = WriteStat("", file_id, name, "log", batch.num_rows, bytes=size)
        logs.append(LogFile(stat, instant_time, f"2026112301{seq:07d}"))
        written.append(batch)
    return FileSlice("", file_id, None, None, tuple(logs)), written


@st.composite
def slices(draw: st.DrawFn) -> tuple[str, list[pa.Table], list[int], list[str] | None]:
    kind = draw(st.sampled_from(sorted(KINDS)))
    config = _config(kind)
    first_unique = draw(st.booleans())  # half the slices take the base path, the others must not
    n = draw(st.integers(1, 4))
    batches = [draw(log_batch(config, unique=first_unique and i == 0)) for i in range(n)]
    instants = draw(st.lists(st.integers(0, 9_999_999), min_size=n, max_size=n, unique=True))
    names = [c for c in SCHEMA.names if c != "k"]
    projection = st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True)
    columns = draw(st.one_of(st.none(), projection))
    return kind, batches, instants, columns


@functools.cache
def _config(kind: str) -> TableConfig:
    """The config of a table of `kind` (the strategy needs it before the fixture's tables exist)."""
    with tempfile.TemporaryDirectory() as d:
        return Table.create(f"{d}/{kind}", schema=SCHEMA, record_key="k", buckets=1, **KINDS[kind]).config


@settings(max_examples=120, deadline=None)
@given(slices())
def test_a_log_only_slice_reads_as_the_general_merge_of_its_logs(
    tables: dict[str, Table], drawn: tuple[str, list[pa.Table], list[int], list[str] | None]
) -> None:
    kind, batches, instants, columns = drawn
    table = tables[kind]
    config = table.config
    fs, written = write_slice(table.storage, batches, instants)
    wanted = merge_columns(config, columns)
    schema = pa.schema([file_schema(config).field(c) for c in wanted])
    spec = projected_spec(merge_spec(config), wanted)
    # the old semantic: every log folded, oldest (first completed) first
    general = merge(written, spec, schema)
    result = read_slice(table.storage, config, fs, wanted)
    assert result.schema == schema
    assert rows(result, spec.key) == rows(general, spec.key)
    if columns is None:
        assert rows(result, spec.key) == reference_merge(written, spec, schema)
    kept = read_slice(table.storage, config, fs, wanted, keep_deletes=True)
    assert rows_by_key(kept, spec.key) == rows_by_key(merge_to_base(written, spec, schema), spec.key)


def test_a_first_log_restating_a_key_is_not_taken_as_a_base(tables: dict[str, Table]) -> None:
    """A log holding a key twice (a key-only delete then an upsert, as precombine restates it, or
    two upserts from a writer that does not precombine): taken as a unique base it would return
    the key twice."""
    table = tables["event_time"]
    first = pa.table({"k": pa.array([1, 1, 2, 2], pa.int64()), "ts": pa.array([None, 5, 1, 4], pa.int64()),
                      "a": pa.array([None, 10, 20, 21], pa.int64()),
                      COMMIT_TIME: pa.array([0] * 4, pa.int64()), OP: pa.array([1, 0, 0, 0], pa.int8())})
    later = pa.table({"k": pa.array([3], pa.int64()), "ts": pa.array([0], pa.int64()),
                      "a": pa.array([30], pa.int64()), COMMIT_TIME: pa.array([0], pa.int64()),
                      OP: pa.array([0], pa.int8())})
    for logs in ([first], [first, later]):
        fs, _ = write_slice(table.storage, logs, [2, 1][:len(logs)])
        result = read_slice(table.storage, table.config, fs, ["k", "ts", "a"])
        expected = [{"k": 1, "ts": 5, "a": 10}, {"k": 2, "ts": 4, "a": 21}, {"k": 3, "ts": 0, "a": 30}]
        assert sorted(result.select(["k", "ts", "a"]).to_pylist(), key=lambda r: r["k"]) == \
            expected[:len(logs) + 1]
