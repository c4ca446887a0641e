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
from tests.lakecore.merge.reference import Row, reference_merge
from tests.lakecore.merge.strategies import Case, batch, collapse, histories, only, rows, tables

EXAMPLES = settings(max_examples=150, deadline=None)


def _effect(case: Case, batches: list[pa.Table]) -> tuple[list[Row], list[Row]]:
    """Snapshot and kept deletes of `batches`, on the columns a reduced run must reproduce."""
    columns = case.schema.names if case.single_group else case.group_columns
    snapshot = rows(merge(batches, case.spec, case.schema), case.spec.key)
    kept = collapse(merge(batches, case.spec, case.schema, keep_deletes=True), case.spec)
    return only(snapshot, columns), only(kept, [*columns, OP_COLUMN])


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
@given(histories(min_batches=2))
def test_a_reduced_run_merges_like_its_batches_anywhere(history: tuple[Case, list[pa.Table]]) -> None:
    case, batches = history
    assume(case.single_group or case.event_time_only)
    expected = _effect(case, batches)
    for start in range(len(batches)):
        for stop in range(start + 1, len(batches) + 1):
            run = merge(batches[start:stop], case.spec, case.schema, keep_deletes=True)
            assert _effect(case, [*batches[:start], run, *batches[stop:]]) == expected


@EXAMPLES
@given(histories(min_batches=1, max_batches=4))
def test_a_precombined_write_merges_like_the_write(history: tuple[Case, list[pa.Table]]) -> None:
    case, batches = history
    assume(case.single_group or case.event_time_only)
    expected = _effect(case, batches)
    for at, write in enumerate(batches):
        reduced = precombine(write, case.spec, case.schema)
        assert _effect(case, [*batches[:at], reduced, *batches[at + 1 :]]) == expected


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
