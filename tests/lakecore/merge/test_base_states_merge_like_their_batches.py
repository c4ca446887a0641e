"""A base state (what compaction, clustering and copy-on-write writes store) merges like the batches
it replaces: one row per key, and a group whose winner is a delete stays a delete, so later changes
of any group meet exactly the state the batches left."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore.merge import OP_COLUMN, GroupSpec, MergeSpec, merge, merge_to_base
from tests.lakecore.merge.strategies import Case, collapse, histories, rows

EXAMPLES = settings(max_examples=200, deadline=None)

SPEC = MergeSpec(key=("id",), groups=(GroupSpec("A", ("a",), "ts_a"), GroupSpec("B", ("b",), "ts_b")))
SCHEMA = pa.schema([("id", pa.int64()), ("a", pa.int64()), ("ts_a", pa.int64()), ("b", pa.int64()),
                    ("ts_b", pa.int64())])


def _change(op: int, **values: int | None) -> pa.Table:
    columns = {"id": pa.array([1], pa.int64())}
    columns.update({name: pa.array([v], pa.int64()) for name, v in values.items()})
    return pa.table({**columns, OP_COLUMN: pa.array([op], pa.int8())})


@EXAMPLES
@given(histories(group_ops=True), st.data())
def test_a_base_state_merges_like_its_batches(history: tuple[Case, list[pa.Table]],
                                              data: st.DataObject) -> None:
    case, batches = history
    split = data.draw(st.integers(min_value=0, max_value=len(batches)))
    base = merge_to_base(batches[:split], case.spec, case.schema)
    keys = [tuple(r[k] for k in case.spec.key) for r in base.to_pylist()]
    assert len(set(keys)) == len(keys), "a base state has one row per key"
    for first_unique in (False, True):
        replaced = [base, *batches[split:]]
        assert rows(merge(replaced, case.spec, case.schema, first_unique=first_unique), case.spec.key) == \
            rows(merge(batches, case.spec, case.schema), case.spec.key)
        kept = merge(replaced, case.spec, case.schema, keep_deletes=True, first_unique=first_unique)
        whole = merge(batches, case.spec, case.schema, keep_deletes=True)
        assert collapse(kept, case.spec) == collapse(whole, case.spec)


@EXAMPLES
@given(histories(group_ops=True, unique_first=True))
def test_a_base_state_over_a_base_is_the_general_one(history: tuple[Case, list[pa.Table]]) -> None:
    case, batches = history
    based = merge_to_base(batches, case.spec, case.schema, first_unique=True)
    general = merge_to_base(batches, case.spec, case.schema)
    assert based.schema == general.schema
    assert rows(based, case.spec.key) == rows(general, case.spec.key)


def test_a_group_deleted_before_the_rewrite_stays_deleted() -> None:
    # A lives only through its delete at 39; B lives at 57. A later delete of both groups, older
    # than A's delete but newer than B's upsert, kills the key: A's delete still stands.
    written = [_change(0, b=57, ts_b=57), _change(1, ts_a=39, ts_b=0)]
    later = _change(1, ts_a=2, ts_b=100)
    base = merge_to_base(written, SPEC, SCHEMA)
    assert base.column("_weir_op__A").to_pylist() == [1]
    assert base.column("_weir_op__B").to_pylist() == [None]
    assert merge([*written, later], SPEC, SCHEMA).num_rows == 0
    for first_unique in (False, True):
        assert merge([base, later], SPEC, SCHEMA, first_unique=first_unique).num_rows == 0
        gone = merge([base, later], SPEC, SCHEMA, keep_deletes=True, first_unique=first_unique)
        assert gone.column(OP_COLUMN).to_pylist() == [1]
