"""A merge that keeps deletes is a change batch with the effect of the batches it replaces.

Prefix position (a reduced history followed by more batches) is exact for every spec. Any other
position (after older data) is exact for one-group specs, and for the key and group columns of
event-time-only specs; the ungrouped columns of a multi-group key come from the reduced row winner.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from lakecore.merge import OP_COLUMN, merge, precombine
from tests.lakecore.merge.reference import reference_merge
from tests.lakecore.merge.strategies import Case, batch, collapse, histories, only, rows, tables

EXAMPLES = settings(max_examples=150, deadline=None)


def _same_effect(case: Case, history: list[pa.Table], replaced: list[pa.Table]) -> None:
    """`replaced` merges like `history`: snapshot and kept deletes, on the columns it must keep."""
    columns = case.schema.names if case.single_group else case.group_columns
    expected = rows(merge(history, case.spec, case.schema), case.spec.key)
    actual = rows(merge(replaced, case.spec, case.schema), case.spec.key)
    assert only(actual, columns) == only(expected, columns)
    kept = collapse(merge(history, case.spec, case.schema, keep_deletes=True), case.spec)
    kept_replaced = collapse(merge(replaced, case.spec, case.schema, keep_deletes=True), case.spec)
    assert only(kept_replaced, [*columns, OP_COLUMN]) == only(kept, [*columns, OP_COLUMN])


@EXAMPLES
@given(histories(), st.data())
def test_a_reduced_prefix_merges_like_its_batches(
    history: tuple[Case, list[pa.Table]], data: st.DataObject
) -> None:
    case, batches = history
    split = data.draw(st.integers(min_value=0, max_value=len(batches)))
    prefix = merge(batches[:split], case.spec, case.schema, keep_deletes=True)
    replaced = [prefix, *batches[split:]]
    assert rows(merge(replaced, case.spec, case.schema), case.spec.key) == rows(
        merge(batches, case.spec, case.schema), case.spec.key
    )
    assert collapse(merge(replaced, case.spec, case.schema, keep_deletes=True), case.spec) == collapse(
        merge(batches, case.spec, case.schema, keep_deletes=True), case.spec
    )


@EXAMPLES
@given(histories(min_batches=2), st.data())
def test_a_reduced_run_merges_like_its_batches_anywhere(
    history: tuple[Case, list[pa.Table]], data: st.DataObject
) -> None:
    case, batches = history
    assume(case.single_group or case.event_time_only)
    start = data.draw(st.integers(min_value=0, max_value=len(batches) - 1))
    stop = data.draw(st.integers(min_value=start + 1, max_value=len(batches)))
    run = merge(batches[start:stop], case.spec, case.schema, keep_deletes=True)
    _same_effect(case, batches, [*batches[:start], run, *batches[stop:]])


@EXAMPLES
@given(histories(min_batches=1, max_batches=4), st.data())
def test_a_precombined_write_merges_like_the_write(
    history: tuple[Case, list[pa.Table]], data: st.DataObject
) -> None:
    case, batches = history
    assume(case.single_group or case.event_time_only)
    at = data.draw(st.integers(min_value=0, max_value=len(batches) - 1))
    write = batches[at]
    _same_effect(case, batches, [*batches[:at], precombine(write, case.spec, case.schema), *batches[at + 1 :]])


@EXAMPLES
@given(histories(min_batches=1, max_batches=1))
def test_precombine_reads_back_as_the_reference(history: tuple[Case, list[pa.Table]]) -> None:
    case, (write,) = history
    keys = [tuple(r[k] for k in case.spec.key) for r in write.to_pylist()]
    assume(len(set(keys)) < len(keys))  # unique keys take the as-is path, tested below
    result = precombine(write, case.spec, case.schema)
    expected = reference_merge([write], case.spec, case.schema, keep_deletes=True)
    assert collapse(result, case.spec) == only(expected, result.schema.names)


@EXAMPLES
@given(tables().flatmap(lambda case: st.tuples(st.just(case), batch(case, unique_keys=True))))
def test_precombine_returns_a_batch_with_unique_keys_as_it_is(write: tuple[Case, pa.Table]) -> None:
    case, table = write
    result = precombine(table, case.spec, case.schema)
    for name in result.schema.names:
        if name == OP_COLUMN:
            ops = table.column(OP_COLUMN).to_pylist() if OP_COLUMN in table.column_names else None
            assert result.column(name).to_pylist() == (ops or [0] * table.num_rows)
        elif name in table.column_names:
            assert result.column(name).to_pylist() == table.column(name).to_pylist()
        else:
            assert result.column(name).null_count == table.num_rows
