"""Specs that cannot mean one thing, and batches that cannot be merged, are refused with a remedy."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakecore.errors import InvalidChanges, InvalidMergeSpec, LakecoreError
from lakecore.merge import OP_COLUMN, GroupSpec, MergeSpec, merge, precombine

G = GroupSpec("g", ("a",), "ts")
SCHEMA = pa.schema([("k", pa.int64()), ("a", pa.int64()), ("ts", pa.float64())])
SPEC = MergeSpec(key=("k",), groups=(G,))


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: MergeSpec(key=(), groups=(G,)), "at least one record key"),
        (lambda: MergeSpec(key=("k",), groups=()), "at least one column group"),
        (lambda: MergeSpec(key=("k", "k"), groups=(G,)), "repeats"),
        (lambda: MergeSpec(key=("k",), groups=(G, GroupSpec("h", ("a",), None))), "at most one group"),
        (lambda: MergeSpec(key=("a",), groups=(G,)), "key columns never belong"),
        (lambda: MergeSpec(key=("ts",), groups=(G,)), "key columns never belong"),
        (lambda: MergeSpec(key=("k",), groups=(G, GroupSpec("g", ("b",), None))), "names"),
        (
            lambda: MergeSpec(key=("k",), groups=(GroupSpec("g", ("a",), "o"), GroupSpec("h", ("b",), "o"))),
            "shared by several groups",
        ),
        (
            lambda: MergeSpec(key=("k",), groups=(GroupSpec("g", ("a",), "b"), GroupSpec("h", ("b",), None))),
            "belongs to group 'h'",
        ),
        (lambda: GroupSpec("", ("a",), None), "needs a name"),
        (lambda: GroupSpec("g", (), None), "has no columns"),
        (lambda: GroupSpec("g", ("a", "a"), None), "more than once"),
        (lambda: GroupSpec("g", ("a",), OP_COLUMN), "op marker"),
    ],
)
def test_an_inconsistent_spec_is_refused(build: object, says: str) -> None:
    with pytest.raises(InvalidMergeSpec, match=says) as raised:
        build()  # type: ignore[operator]
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, LakecoreError)


def test_a_schema_without_the_spec_columns_is_refused() -> None:
    with pytest.raises(InvalidMergeSpec, match=r"\['ts'\].*not in the table schema"):
        merge([], SPEC, pa.schema([("k", pa.int64()), ("a", pa.int64())]))
    with pytest.raises(InvalidMergeSpec, match="added by the merge"):
        merge([], SPEC, SCHEMA.append(pa.field(OP_COLUMN, pa.int8())))
    with pytest.raises(InvalidMergeSpec, match="has no order"):
        merge([], SPEC, SCHEMA.set(2, pa.field("ts", pa.list_(pa.int64()))))


@pytest.mark.parametrize(
    ("batch", "says"),
    [
        (pa.table({"a": [1]}), "no record key column 'k'"),
        (pa.table({"k": [1, None]}), "has nulls"),
        (pa.table({"k": [1], OP_COLUMN: pa.array([2], pa.int8())}), "other than 0"),
        (pa.table({"k": [1, 2], OP_COLUMN: pa.array([0, -1], pa.int8())}), "other than 0"),
        (pa.table({"k": [1], OP_COLUMN: pa.array([None], pa.int8())}), "has nulls"),
        (pa.table({"k": [1], "ts": [float("nan")]}), "NaN"),
        (pa.table({"k": ["one"]}), "does not cast to the table's int64"),
    ],
)
def test_a_batch_that_cannot_be_merged_is_refused(batch: pa.Table, says: str) -> None:
    for run in (
        lambda: merge([batch], SPEC, SCHEMA),
        lambda: merge([batch], SPEC, SCHEMA, first_unique=True),
        lambda: merge([pa.table({"k": [9]}), batch], SPEC, SCHEMA, first_unique=True),
        lambda: precombine(batch, SPEC, SCHEMA),
    ):
        with pytest.raises(InvalidChanges, match=says):
            run()
