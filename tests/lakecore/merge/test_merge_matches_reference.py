"""The vectorized merge agrees with the plain reference model on random histories.

Histories have colliding keys, ties, partial rows, omitted columns, deletes with and without
orderings, per-group ops (a group deleted on an upsert row, or kept on a delete row), one to three
groups of either ordering, and int, string and composite keys.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings

from lakecore.merge import OP_COLUMN, merge
from tests.lakecore.merge.reference import reference_merge
from tests.lakecore.merge.strategies import Case, collapse, histories, rows, rows_by_key

EXAMPLES = settings(max_examples=200, deadline=None)


@EXAMPLES
@given(histories(group_ops=True))
def test_snapshot_matches_reference(history: tuple[Case, list[pa.Table]]) -> None:
    case, batches = history
    result = merge(batches, case.spec, case.schema)
    assert result.schema == case.schema
    assert rows(result, case.spec.key) == reference_merge(batches, case.spec, case.schema)


@EXAMPLES
@given(histories(group_ops=True))
def test_kept_deletes_read_back_as_the_reference(history: tuple[Case, list[pa.Table]]) -> None:
    case, batches = history
    result = merge(batches, case.spec, case.schema, keep_deletes=True)
    assert result.schema.names == [*case.schema.names, OP_COLUMN]
    expected = reference_merge(batches, case.spec, case.schema, keep_deletes=True)
    assert collapse(result, case.spec) == expected
    for restated in rows_by_key(result, case.spec.key).values():
        ops = [r[OP_COLUMN] for r in restated]
        assert ops in ([0], [1], [1, 0], [1, 1], [1, 1, 0]), ops
        if case.single_group:
            assert ops in ([0], [1], [1, 0], [1, 1]), "one group: a marker is the only extra row"


@EXAMPLES
@given(histories(unique_first=True, group_ops=True))
def test_base_path_gives_the_general_result(history: tuple[Case, list[pa.Table]]) -> None:
    case, batches = history
    for keep_deletes in (False, True):
        general = merge(batches, case.spec, case.schema, keep_deletes=keep_deletes)
        based = merge(batches, case.spec, case.schema, keep_deletes=keep_deletes, first_unique=True)
        assert based.schema == general.schema
        assert rows_by_key(based, case.spec.key) == rows_by_key(general, case.spec.key)
