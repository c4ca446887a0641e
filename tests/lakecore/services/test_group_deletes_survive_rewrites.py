"""A column group's delete survives every rewrite of a slice into a base file (compaction, clustering,
copy-on-write writes) as a delete: a later delete of another group, older than the first one, still
kills the key, in the snapshot, in time travel and in incremental reads. Random histories with
rewrites between group upserts and deletes agree with the merge's reference model."""

from __future__ import annotations

import tempfile
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lakecore import ColumnGroup, Table
from lakecore.config import COMMIT_TIME
from lakecore.read.spec import file_schema, merge_spec
from lakecore.write import conform
from tests.lakecore.merge.reference import reference_merge
from tests.lakecore.services.conftest import cluster, compact, view_of

SCHEMA = pa.schema([("id", pa.int64()), ("a", pa.int64()), ("ts_a", pa.int64()), ("b", pa.int64()),
                    ("ts_b", pa.int64())])
GROUPS = [ColumnGroup("A", ("a",), "ts_a"), ColumnGroup("B", ("b",), "ts_b")]
REWRITES: dict[str, Callable[[Table], object]] = {"compaction": compact, "clustering": cluster,
                                                  "copy_on_write": lambda t: None}


def create(uri: str, rewrite: str, **kw) -> Table:
    table_type = "copy_on_write" if rewrite == "copy_on_write" else "merge_on_read"
    return Table.create(uri, schema=SCHEMA, record_key="id", column_groups=GROUPS, buckets=1,
                        table_type=table_type, **kw)  # type: ignore[arg-type]


def ints(**columns: list[int | None]) -> pa.Table:
    return pa.table({name: pa.array(values, pa.int64()) for name, values in columns.items()})


def snapshot(t: Table, **kw) -> list[dict]:
    return sorted(t.read(**kw).to_pylist(), key=lambda r: r["id"])


def ops(t: Table, start: str) -> dict[int, str]:
    return {r["id"]: r["_weir_op"] for r in t.read_changes(start).to_pylist()}


@pytest.mark.parametrize("rewrite", list(REWRITES))
def test_an_older_delete_of_another_group_still_kills_the_key(tmp_path, rewrite):
    t = create(str(tmp_path / "t"), rewrite)
    t.upsert(ints(id=[1], b=[57], ts_b=[57]))
    deleted_a = t.delete(ints(id=[1], ts_a=[39], ts_b=[0])).instant   # A deleted at 39; B lives at 57
    REWRITES[rewrite](t)
    alive = [{"id": 1, "a": None, "ts_a": None, "b": 57, "ts_b": 57}]
    assert snapshot(t) == alive
    assert snapshot(t, query="read_optimized") == alive
    assert snapshot(t, columns=["id", "b"]) == [{"id": 1, "b": 57}]
    last = t.delete(ints(id=[1], ts_a=[2], ts_b=[100])).instant       # B deleted at 100; A stays deleted

    assert snapshot(t) == []
    assert snapshot(t, columns=["id", "a"]) == []
    assert snapshot(t, as_of=last.requested_time) == []
    assert snapshot(t, as_of=deleted_a.requested_time) == alive
    assert ops(t, deleted_a.requested_time) == {1: "delete"}
    REWRITES[rewrite](t)
    assert snapshot(t) == []
    assert snapshot(t, query="read_optimized") == []
    assert snapshot(t, as_of=deleted_a.requested_time) == alive


def test_base_files_without_group_op_columns_read_as_before(tmp_path):
    # A base file written before the group op columns existed holds no group deletes.
    t = create(str(tmp_path / "t"), "compaction")
    t.upsert(ints(id=[1, 2], a=[1, 2], ts_a=[5, 5]))
    t.upsert(ints(id=[2, 3], b=[7, 8], ts_b=[6, 6]))
    t.delete(ints(id=[3]))
    compact(t)
    before = snapshot(t)
    fs, root = t.storage.arrow()
    (base,) = [s.base for s in view_of(t.storage, t.timeline()).slices if s.base is not None]
    old = pq.read_table(f"{root}/{base.path}", filesystem=fs).drop_columns(["_weir_op__A", "_weir_op__B"])
    pq.write_table(old, f"{root}/{base.path}", filesystem=fs)
    assert snapshot(t) == before
    t.upsert(ints(id=[1, 3], b=[9, 9], ts_b=[1, 1]))
    assert snapshot(t) == [{"id": 1, "a": 1, "ts_a": 5, "b": 9, "ts_b": 1},
                           {"id": 2, "a": 2, "ts_a": 5, "b": 7, "ts_b": 6},
                           {"id": 3, "a": None, "ts_a": None, "b": 9, "ts_b": 1}]


def test_tombstone_retention_drops_dead_keys_and_keeps_group_deletes_of_live_keys(tmp_path):
    t = create(str(tmp_path / "t"), "compaction", tombstone_retention_hours=0)
    t.upsert(ints(id=[1, 2], a=[1, 2], ts_a=[5, 5], b=[1, 2], ts_b=[5, 5]))
    t.delete(ints(id=[1], ts_a=[9], ts_b=[9]))   # key 1 dead
    t.delete(ints(id=[2], ts_a=[9], ts_b=[0]))   # key 2 lives through B; A deleted at 9
    compact(t)
    fs, root = t.storage.arrow()
    (base,) = [s.base for s in view_of(t.storage, t.timeline()).slices if s.base is not None]
    stored = pq.read_table(f"{root}/{base.path}", filesystem=fs).to_pylist()
    assert [(r["id"], r["_weir_op"], r["_weir_op__A"]) for r in stored] == [(2, 0, 1)]
    t.upsert(ints(id=[1, 2], a=[7, 7], ts_a=[6, 6]))   # late events, older than the deletes
    assert snapshot(t) == [{"id": 1, "a": 7, "ts_a": 6, "b": None, "ts_b": None},
                           {"id": 2, "a": None, "ts_a": None, "b": 2, "ts_b": 5}]


# -- random histories against the reference model -----------------------------------------------

_ts = st.integers(0, 3)
_key = st.integers(0, 1)
_maybe_ts = st.one_of(st.none(), _ts, _ts)
_records = st.lists(st.tuples(_key, st.integers(0, 9), _ts), min_size=1, max_size=3)
_upsert_a = st.tuples(st.just("upsert"), _records, st.just("A"))
_upsert_b = st.tuples(st.just("upsert"), _records, st.just("B"))
_deletions = st.lists(st.tuples(_key, _maybe_ts, _maybe_ts), min_size=1, max_size=3)
_delete = st.tuples(st.just("delete"), _deletions, st.just(""))
_rewrite = st.tuples(st.sampled_from(["compact", "cluster"]), st.just([]), st.just(""))
STEPS = st.lists(st.one_of(_upsert_a, _upsert_b, _delete, _rewrite), min_size=3, max_size=10)


def _batch(op: str, rows: list, group: str) -> pa.Table:
    ids = [r[0] for r in rows]
    if op == "delete":
        return ints(id=ids, ts_a=[r[1] for r in rows], ts_b=[r[2] for r in rows])
    column, ordering = ("a", "ts_a") if group == "A" else ("b", "ts_b")
    return ints(**{"id": ids, column: [r[1] for r in rows], ordering: [r[2] for r in rows]})


def _model(t: Table, written: list[pa.Table]) -> list[dict]:
    schema = file_schema(t.config)
    expected = reference_merge(written, merge_spec(t.config), schema)
    return sorted(({c: r[c] for c in SCHEMA.names} for r in expected), key=lambda r: r["id"])


@settings(max_examples=80, deadline=None)
@given(STEPS)
@example([("upsert", [(1, 5, 3)], "B"), ("delete", [(1, 2, 0)], ""), ("compact", [], ""),
          ("delete", [(1, 1, 3)], "")])
@example([("upsert", [(1, 5, 3)], "B"), ("delete", [(1, 2, 0)], ""), ("cluster", [], ""),
          ("delete", [(1, 1, 3)], "")])
def test_rewrites_between_group_writes_agree_with_the_model(steps):
    with tempfile.TemporaryDirectory() as d:
        t = create(f"{d}/t", "compaction")
        written: list[pa.Table] = []    # what the writes committed, as change batches, in order
        history = []
        for op, rows, group in steps:
            if op in ("compact", "cluster"):
                (compact if op == "compact" else cluster)(t)
                assert snapshot(t) == _model(t, written)
                continue
            data = _batch(op, rows, group)
            instant = t.write(data, op).instant  # type: ignore[arg-type]
            change = conform(data, t.config, op).rows  # type: ignore[arg-type]
            written.append(change.append_column(COMMIT_TIME, pa.array([int(instant.requested_time)] *
                                                                      change.num_rows, pa.int64())))
            history.append((instant.requested_time, _model(t, written)))
            assert snapshot(t) == _model(t, written)
        for instant_time, expected in history:
            assert snapshot(t, as_of=instant_time) == expected
        if written:   # from before the first write: the live keys; a key deleted since changed nothing
            live = {r["id"] for r in _model(t, written)}
            assert ops(t, "2000-01-01T00:00:00") == dict.fromkeys(live, "upsert")
            first = history[0][0]   # from the first write on: a key it held and is gone now is a delete
            held = {r["id"] for r in history[0][1]}
            got = ops(t, first)
            assert {k for k, v in got.items() if v == "delete"} == held - live
            assert all(v == "upsert" for k, v in got.items() if k in live)
