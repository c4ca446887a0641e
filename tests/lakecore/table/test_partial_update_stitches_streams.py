"""Three streams, each owning a column group with its own ordering field, fill one wide table."""

import random

import pyarrow as pa
import pytest

from lakecore import ColumnGroup, Table
from lakecore.errors import MissingColumn

WIDE = pa.schema([("id", pa.int64()),
                  ("clicks", pa.int64()), ("click_ts", pa.int64()),
                  ("country", pa.string()), ("dim_ts", pa.int64()),
                  ("score", pa.float64()), ("score_ts", pa.int64())])
GROUPS = [ColumnGroup("clicks", ("clicks",), "click_ts"),
          ColumnGroup("dims", ("country",), "dim_ts"),
          ColumnGroup("scores", ("score",), "score_ts")]


def create(uri, table_type="merge_on_read", **kw):
    return Table.create(uri, schema=WIDE, record_key="id", column_groups=GROUPS, table_type=table_type, **kw)


@pytest.mark.parametrize("table_type", ["merge_on_read", "copy_on_write"])
def test_out_of_order_streams_equal_a_join_of_each_streams_latest_values(tmp_path, table_type):
    rng = random.Random(7)
    t = create(str(tmp_path / "wide"), table_type)
    events = []  # (stream, id, ts, value)
    for stream in ("clicks", "dims", "scores"):
        for _ in range(120):
            events.append((stream, rng.randrange(40), rng.randrange(1000), rng.randrange(10_000)))
    rng.shuffle(events)
    for i in range(0, len(events), 30):  # batches mixing streams arrive in random order
        chunk = events[i:i + 30]
        for stream in ("clicks", "dims", "scores"):
            part = [e for e in chunk if e[0] == stream]
            if not part:
                continue
            ids = pa.array([e[1] for e in part], pa.int64())
            ts = pa.array([e[2] for e in part], pa.int64())
            if stream == "clicks":
                clicks = pa.array([e[3] for e in part], pa.int64())
                data = pa.table({"id": ids, "clicks": clicks, "click_ts": ts})
            elif stream == "dims":
                data = pa.table({"id": ids, "country": pa.array([f"c{e[3]}" for e in part]), "dim_ts": ts})
            else:
                data = pa.table({"id": ids, "score": pa.array([e[3] / 7 for e in part]), "score_ts": ts})
            t.upsert(data)

    expected: dict[int, dict] = {}
    for stream, col, tscol, fmt in (("clicks", "clicks", "click_ts", int), ("dims", "country", "dim_ts",
                                    lambda v: f"c{v}"), ("scores", "score", "score_ts", lambda v: v / 7)):
        latest: dict[int, tuple[int, int, object]] = {}
        # the winner per key is the highest ts; ties go to the later arrival (write order)
        order = {id(e): n for n, e in enumerate(events)}
        for e in events:
            if e[0] != stream:
                continue
            cur = latest.get(e[1])
            if cur is None or (e[2], order[id(e)]) >= (cur[0], cur[1]):
                latest[e[1]] = (e[2], order[id(e)], fmt(e[3]))
        for k, (ts, _, v) in latest.items():
            row = expected.setdefault(k, {c: None for c in WIDE.names} | {"id": k})
            row[col], row[tscol] = v, ts
    got = {r["id"]: r for r in t.read().to_pylist()}
    assert got == expected


def test_key_first_seen_through_one_group_has_other_groups_null_or_default(tmp_path):
    t = create(str(tmp_path / "wide"), column_defaults={"clicks": 0})
    t.upsert(pa.table({"id": pa.array([1], pa.int64()), "country": ["fr"], "dim_ts": pa.array([1])}))
    (row,) = t.read().to_pylist()
    assert row == {"id": 1, "clicks": 0, "click_ts": None, "country": "fr", "dim_ts": 1, "score": None,
                   "score_ts": None}


def test_a_write_carrying_part_of_a_group_is_refused(tmp_path):
    t = create(str(tmp_path / "wide"))
    with pytest.raises(MissingColumn, match="group 'dims' partly"):
        t.upsert(pa.table({"id": pa.array([1], pa.int64()), "country": ["fr"]}))
    assert len(t.timeline()) == 0


def test_shared_ordering_field_each_group_takes_the_newest_record_carrying_it(tmp_path):
    schema = pa.schema([("id", pa.int64()), ("a", pa.int64()), ("b", pa.int64()), ("ts", pa.int64())])
    t = Table.create(str(tmp_path / "s"), schema=schema, record_key="id",
                     column_groups=[ColumnGroup("ga", ("a",), "ts"), ColumnGroup("gb", ("b",), "ts")])
    t.upsert(pa.table({"id": [1], "a": [10], "ts": [5]}))
    t.upsert(pa.table({"id": [1], "b": [20], "ts": [3]}))
    t.upsert(pa.table({"id": [1], "a": [11], "b": [21], "ts": [4]}))
    (row,) = t.read().to_pylist()
    assert row == {"id": 1, "a": 10, "b": 21, "ts": 5}


def test_delete_with_ordering_removes_older_groups_only(tmp_path):
    t = create(str(tmp_path / "wide"))
    t.upsert(pa.table({"id": pa.array([1], pa.int64()), "clicks": pa.array([3], pa.int64()),
                       "click_ts": pa.array([12], pa.int64())}))
    t.upsert(pa.table({"id": pa.array([1], pa.int64()), "country": ["fr"], "dim_ts": pa.array([5])}))
    t.delete(pa.table({"id": pa.array([1], pa.int64()), "click_ts": pa.array([10], pa.int64()),
                       "dim_ts": pa.array([10], pa.int64()), "score_ts": pa.array([10], pa.int64())}))
    (row,) = t.read().to_pylist()
    assert row["clicks"] == 3 and row["country"] is None
