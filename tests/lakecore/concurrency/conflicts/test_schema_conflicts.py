"""Concurrent schema evolution: the 8-case table (start / validation / writer), one test per case, then
reconciliation of writers that only added nullable columns, and properties over random schemas."""

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore.concurrency.conflicts.schema import (
    SchemaDecision,
    complete_writer_schema,
    evolution_problems,
    is_additive_evolution,
    resolve_schema,
)
from lakecore.errors import SchemaConflict, SchemaMismatch

S1 = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
S2 = pa.schema([*S1, ("a", pa.float64())])     # S1 + nullable a
S3 = pa.schema([*S1, ("b", pa.int32())])       # S1 + nullable b
UNION = pa.schema([*S1, ("a", pa.float64()), ("b", pa.int32())])


def test_case_1_first_writer_sets_the_schema():
    assert resolve_schema(None, None, S1) == SchemaDecision(S1, 1, False)


def test_case_2_writer_matches_the_schema_committed_while_it_ran():
    assert resolve_schema(None, S1, S1) == SchemaDecision(S1, 2, False)


def test_case_3_two_first_writers_with_different_schemas_conflict_without_reconciliation():
    with pytest.raises(SchemaConflict, match=r"case 3"):
        resolve_schema(None, S2, S3, reconcile=False)
    assert resolve_schema(None, S2, S3) == SchemaDecision(UNION, 3, True)


def test_case_4_nothing_changed():
    assert resolve_schema(S1, S1, S1) == SchemaDecision(S1, 4, False)


def test_case_5_writer_evolves_an_unchanged_table():
    assert resolve_schema(S1, S1, S2) == SchemaDecision(S2, 5, False)


def test_case_6_writer_keeps_a_schema_evolved_concurrently():
    assert resolve_schema(S1, S2, S1) == SchemaDecision(S2, 6, False)


def test_case_7_writer_made_the_same_evolution_as_a_concurrent_commit():
    assert resolve_schema(S1, S2, S2) == SchemaDecision(S2, 7, False)


def test_case_8_writer_and_a_concurrent_commit_evolved_differently_conflict_without_reconciliation():
    with pytest.raises(SchemaConflict, match=r"case 8"):
        resolve_schema(S1, S2, S3, reconcile=False)
    assert resolve_schema(S1, S2, S3) == SchemaDecision(UNION, 8, True)


def test_a_table_that_lost_its_schema_while_the_write_ran_conflicts():
    with pytest.raises(SchemaConflict, match="rerun the write"):
        resolve_schema(S1, None, S1)


# -- reconciliation (cases 3 and 8) -----------------------------------------------------------------


def test_writers_that_added_different_nullable_columns_commit_the_union_table_columns_first():
    writer = pa.schema([("c", pa.string()), *S1, ("b", pa.int32())])  # its own order for its extras
    decision = resolve_schema(S1, S2, writer)
    assert decision.reconciled and decision.case == 8
    assert decision.schema.names == ["id", "v", "a", "c", "b"]


def test_an_added_non_nullable_column_conflicts():
    writer = pa.schema([*S1, pa.field("b", pa.int32(), nullable=False)])
    with pytest.raises(SchemaConflict, match=r"'b' \(int32 not null\) is only in the writer and is not "
                                             r"nullable.*[Rr]ebase the writer on the current table schema"):
        resolve_schema(S1, S2, writer)


def test_a_common_column_with_another_type_conflicts_naming_it_and_both_types():
    writer = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.large_string()),
                        ("b", pa.int32())])
    with pytest.raises(SchemaConflict) as err:
        resolve_schema(S1, S2, writer)
    problems = str(err.value).rsplit("]: ", 1)[1]
    assert "'v' is string in the table but large_string in the writer" in problems
    assert "'a'" not in problems and "'b'" not in problems  # nullable extras are no problem
    assert "retry" in problems


def test_a_common_column_with_other_nullability_conflicts():
    writer = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()),
                        pa.field("a", pa.float64(), nullable=False), ("b", pa.int32())])
    with pytest.raises(SchemaConflict, match=r"'a' is double in the table but double not null"):
        resolve_schema(S1, S2, writer)


def test_a_column_dropped_concurrently_is_not_resurrected():
    dropped_v = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.float64())])
    with pytest.raises(SchemaConflict, match=r"'v' \(string\) was dropped by the table"):
        resolve_schema(S1, dropped_v, S3)
    with pytest.raises(SchemaConflict, match=r"'v' \(string\) was dropped by the writer"):
        resolve_schema(S1, S3, dropped_v)


def test_reconcile_false_conflicts_even_when_the_schemas_could_be_reconciled():
    with pytest.raises(SchemaConflict, match=r"nullable column\(s\) 'a', 'b' but reconciliation is disabled"
                                             r".*[Rr]ebase"):
        resolve_schema(S1, S2, S3, reconcile=False)


# -- writers older than a column -------------------------------------------------------------------


def test_a_writer_lacking_nullable_columns_of_the_table_writes_them_as_null():
    assert complete_writer_schema(S2, S1) == S2                      # S1 rows read `a` as null
    assert complete_writer_schema(S2, S3) == UNION                   # plus its own addition, after
    assert complete_writer_schema(None, S1) == S1
    strict = pa.schema([*S1, pa.field("n", pa.int64(), nullable=False)])
    assert complete_writer_schema(strict, S1) == S1                  # a non-nullable one stays missing
    assert resolve_schema(S2, S2, complete_writer_schema(S2, S1)) == SchemaDecision(S2, 4, False)


def test_evolution_problems_name_each_column():
    strict = pa.schema([*S1, pa.field("n", pa.int64(), nullable=False)])
    assert evolution_problems(S1, S2) == []
    assert evolution_problems(strict, S1) == ["column 'n' (int64 not null) is missing"]
    assert evolution_problems(S1, pa.schema([S1.field("id"), ("v", pa.large_string())])) == \
        ["column 'v' is string in the table but large_string in the writer"]
    assert evolution_problems(S1, strict) == ["column 'n' (int64 not null) is added but not nullable"]


# -- equality ---------------------------------------------------------------------------------------


def test_column_order_does_not_make_schemas_differ_and_the_table_order_is_kept():
    reordered = pa.schema(list(reversed(S2)))
    assert resolve_schema(S1, S2, reordered) == SchemaDecision(S2, 7, False)
    assert resolve_schema(S2, reordered, S2).case == 4


def test_metadata_does_not_make_schemas_differ():
    annotated = pa.schema([S1.field("id").with_metadata({"doc": "key"}), S1.field("v")], metadata={"x": "1"})
    assert resolve_schema(S1, S1, annotated) == SchemaDecision(S1, 4, False)


def test_repeated_column_names_are_rejected():
    with pytest.raises(SchemaMismatch, match="repeats column"):
        resolve_schema(None, S1, pa.schema([("id", pa.int64()), ("id", pa.int64())]))


def test_additive_evolution_adds_only_nullable_columns_and_keeps_the_old_ones():
    assert is_additive_evolution(S1, S2) and is_additive_evolution(S1, S1)
    assert is_additive_evolution(S1, pa.schema(list(reversed(UNION))))
    assert not is_additive_evolution(S2, S1)                                  # drops a
    assert not is_additive_evolution(S1, pa.schema([*S1, pa.field("b", pa.int32(), nullable=False)]))
    assert not is_additive_evolution(S1, pa.schema([S1.field("id"), ("v", pa.large_string())]))


# -- properties -------------------------------------------------------------------------------------

fields = st.builds(pa.field, st.sampled_from(["id", "a", "b", "c", "d"]),
                   st.sampled_from([pa.int64(), pa.string()]), st.booleans())
schemas = st.lists(fields, min_size=1, max_size=4, unique_by=lambda f: f.name).map(pa.schema)


@st.composite
def evolved(draw: st.DrawFn, base: pa.Schema) -> pa.Schema:
    kept = [f for f in base if draw(st.integers(0, 5))]  # mostly kept, sometimes dropped
    added = draw(st.lists(fields, min_size=1, max_size=2, unique_by=lambda f: f.name))
    return pa.schema([*kept, *(f for f in added if f.name not in base.names)])


@st.composite
def three_schemas(draw: st.DrawFn) -> tuple[pa.Schema | None, pa.Schema | None, pa.Schema]:
    """Start, validation and writer schemas drawn from a base and a few evolutions of it."""
    base = draw(schemas)
    pool = st.sampled_from([base, *draw(st.lists(evolved(base), min_size=2, max_size=2))])
    at_start = draw(pool | pool | st.none())
    return at_start, draw(pool if at_start is not None else pool | st.none()), draw(pool)


def columns(schema: pa.Schema) -> dict[str, tuple[pa.DataType, bool]]:
    return {f.name: (f.type, f.nullable) for f in schema}


@settings(max_examples=300)
@given(three_schemas())
def test_only_the_writer_itself_drops_a_column_of_the_table_never_a_concurrent_resolution(drawn):
    at_start, at_validation, writer = drawn
    try:
        decision = resolve_schema(at_start, at_validation, writer)
    except SchemaConflict:
        return
    dropped = set(at_validation.names if at_validation else []) - set(decision.schema.names)
    assert not dropped or decision.case == 5  # no concurrent change: the writer's own evolution


@settings(max_examples=300)
@given(three_schemas())
def test_whichever_writer_commits_first_the_other_gets_the_same_columns(drawn):
    at_start, first, second = drawn
    if first is None:
        return
    outcomes = []
    for table, writer in ((first, second), (second, first)):
        try:
            outcomes.append(columns(resolve_schema(at_start, table, writer).schema))
        except SchemaConflict:
            outcomes.append(None)
    assert outcomes[0] == outcomes[1]
