"""Concurrent schema evolution: which schema does a write commit, or does it conflict? Pure.

Owns the decision only (Hudi's SimpleSchemaConflictResolutionStrategy, HUDI-8221). It reads no
timeline and writes nothing: the commit path finds the three schemas under the lock and calls
`resolve_schema` before its file-group checks. The schemas are the table's at the start of our write
(its last completed instant then; None if there was none), the table's at validation (its latest
completed instant now) and our writer's:

| # | at start | at validation | writer | result                                               |
|---|----------|---------------|--------|------------------------------------------------------|
| 1 | none     | none          | S1     | S1: the first writer sets the schema                 |
| 2 | none     | S1            | S1     | S1                                                   |
| 3 | none     | S2            | S3     | conflict, or S2 + S3's nullable extras (reconciled)  |
| 4 | S1       | S1            | S1     | S1                                                   |
| 5 | S1       | S1            | S2     | S2: our write evolves the table                      |
| 6 | S1       | S2            | S1     | S2: keep the concurrent evolution                    |
| 7 | S1       | S2            | S2     | S2                                                   |
| 8 | S1       | S2            | S3     | conflict, or S2 + S3's nullable extras (reconciled)  |

Case 5 commits whatever the writer brings, drops included: no one changed the schema concurrently,
so whether the writer may evolve the table that way is not a concurrency question; the commit path
decides it (`evolution_problems` names what is more than added nullable columns).

Long-running writers (case 6 before the write started): a writer whose handle was opened before
another writer added a nullable column still writes the old schema. Its rows read that column as
null, so it does not drop it: the commit path first completes the writer's schema with the nullable
columns of the table at start that it lacks (`complete_writer_schema`), then decides as above. A
non-nullable column it lacks stays missing, and the decision names it.
A schema at start with none at validation (a restore removed every completed commit while we wrote)
is outside the table and conflicts.

Equality: the same top-level columns by name, each with the same type and nullability. Top-level
column order is ignored (readers resolve columns by name, so a reordering is not an evolution) and
so is metadata, of the schema and of its fields; the order of struct members is part of the type.
Column names must be unique (SchemaMismatch otherwise). When the writer's schema equals the table's,
the table's schema is committed as it is (cases 2, 4, 6, 7): an equal schema never reorders or
re-annotates the table.

Reconciliation (cases 3 and 8, `reconcile=True`): instead of aborting, commit the union when the two
competing schemas differ only by added nullable columns: they agree on every common column, every
column only one of them has is nullable (rows of the other side read it as null) and, in case 8, is
not in the schema at start: such a column was dropped by the other side, and the union would
resurrect it (or silently undo our drop). The union is the validation schema's columns in their
order followed by the writer-only columns in the writer's order.

The acceptance test is symmetric in the two schemas: whichever of two concurrent writers commits
first, the second one reconciles in exactly the same situations, and the union has the same columns
and types either way. Only its column order depends on who committed first (the committed table's
columns come first, so the table only ever appends columns); that order is fixed by the lock that
serialises commits, so the result is deterministic for a given commit order.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from lakecore.errors import SchemaConflict, SchemaMismatch

__all__ = ["SchemaDecision", "complete_writer_schema", "evolution_problems", "is_additive_evolution",
           "resolve_schema", "same_schema"]


@dataclass(frozen=True)
class SchemaDecision:
    schema: pa.Schema   # the schema to commit
    case: int           # 1..8, the row of the table that applied
    reconciled: bool    # True when the added-nullable-columns union was committed


def same_schema(a: pa.Schema, b: pa.Schema) -> bool:
    """Same columns by name, type and nullability; column order and metadata ignored."""
    return _columns(a) == _columns(b)


def is_additive_evolution(old: pa.Schema, new: pa.Schema) -> bool:
    """`new` keeps every column of `old` unchanged and adds only nullable columns (or none)."""
    return not evolution_problems(old, new)


def evolution_problems(old: pa.Schema, new: pa.Schema) -> list[str]:
    """What makes `new` more than `old` plus added nullable columns, one phrase per column."""
    before, after = _columns(old), _columns(new)
    found = []
    for name, spec in before.items():
        if name not in after:
            found.append(f"column {name!r} ({_show(spec)}) is missing")
        elif after[name] != spec:
            found.append(f"column {name!r} is {_show(spec)} in the table but {_show(after[name])} "
                         "in the writer")
    found += [f"column {name!r} ({_show(spec)}) is added but not nullable"
              for name, spec in after.items() if name not in before and not spec[1]]
    return found


def complete_writer_schema(table: pa.Schema | None, writer: pa.Schema) -> pa.Schema:
    """The schema a writer's rows have in `table`: the table's columns in its order (the writer's
    field where it has the column; the table's where it lacks a nullable one, which its rows read as
    null), then the writer's own additions. Non-nullable columns the writer lacks stay missing."""
    if table is None:
        return writer
    theirs = {f.name: f for f in writer}
    known = set(table.names)
    fields = [theirs.get(f.name, f) for f in table if f.name in theirs or f.nullable]
    return pa.schema([*fields, *(f for f in writer if f.name not in known)], metadata=writer.metadata)


def resolve_schema(at_start: pa.Schema | None, at_validation: pa.Schema | None, writer: pa.Schema, *,
                   reconcile: bool = True) -> SchemaDecision:
    """The schema our write commits, or SchemaConflict; see the module docstring for the table."""
    if at_validation is None:
        if at_start is None:
            return SchemaDecision(writer, 1, False)
        raise SchemaConflict("the table had a schema when this write started but has no completed commit "
                             "now (a restore or rollback removed them while it ran); rerun the write "
                             "against the current table")
    if same_schema(writer, at_validation):
        if at_start is None:
            return SchemaDecision(at_validation, 2, False)
        return SchemaDecision(at_validation, 4 if same_schema(at_start, at_validation) else 7, False)
    if at_start is not None and same_schema(at_start, at_validation):
        return SchemaDecision(writer, 5, False)
    if at_start is not None and same_schema(writer, at_start):
        return SchemaDecision(at_validation, 6, False)
    case = 3 if at_start is None else 8
    problems = _incompatibilities(at_start, at_validation, writer)
    if reconcile and not problems:
        return SchemaDecision(_union(at_validation, writer), case, True)
    raise SchemaConflict(_message(case, at_validation, writer, problems, reconcile))


# -- internals ---------------------------------------------------------------------------------

_Spec = tuple[pa.DataType, bool]  # (type, nullable) of one column


def _columns(schema: pa.Schema) -> dict[str, _Spec]:
    columns = {f.name: (f.type, f.nullable) for f in schema}
    if len(columns) != len(schema):
        twice = sorted({n for n in schema.names if schema.names.count(n) > 1})
        raise SchemaMismatch(f"schema [{_listing(schema)}] repeats column(s) {', '.join(twice)}; give every "
                             "column a distinct name")
    return columns


def _show(spec: _Spec) -> str:
    return f"{spec[0]}{'' if spec[1] else ' not null'}"


def _incompatibilities(at_start: pa.Schema | None, table: pa.Schema, writer: pa.Schema) -> list[str]:
    """Why `table` and `writer` do not differ only by added nullable columns (empty if they do)."""
    theirs, ours = _columns(table), _columns(writer)
    start = _columns(at_start) if at_start is not None else {}
    found = [f"column {name!r} is {_show(theirs[name])} in the table but {_show(ours[name])} in the writer"
             for name in theirs.keys() & ours.keys() if theirs[name] != ours[name]]
    for side, cols, other, others in (("table", theirs, "writer", ours), ("writer", ours, "table", theirs)):
        for name, spec in cols.items():
            if name in others:
                continue
            if name in start:  # case 8: not an addition but a column the other side dropped
                found.append(f"column {name!r} ({_show(start[name])}) was dropped by the {other} while "
                             "this write ran")
            elif not spec[1]:
                found.append(f"column {name!r} ({_show(spec)}) is only in the {side} and is not nullable")
    return sorted(found)


def _union(table: pa.Schema, writer: pa.Schema) -> pa.Schema:
    known = set(table.names)
    return pa.schema([*table, *(f for f in writer if f.name not in known)], metadata=table.metadata)


def _message(case: int, table: pa.Schema, writer: pa.Schema, problems: list[str], reconcile: bool) -> str:
    head = (f"incompatible concurrent schema evolution (case {case}): another write committed table schema "
            f"[{_listing(table)}] while this write ran with schema [{_listing(writer)}]")
    if not problems:  # reconcilable, but reconciliation is off
        added = sorted(set(table.names) ^ set(writer.names))
        return (f"{head}; they differ only by added nullable column(s) {', '.join(map(repr, added))} but "
                "reconciliation is disabled: rebase the writer on the current table schema and retry, or "
                "enable reconciliation")
    return (f"{head}: {'; '.join(problems)}. Rebase the writer on the current table schema and retry "
            "(concurrent writers may only add nullable columns, and must agree on the ones they share)")


def _listing(schema: pa.Schema) -> str:
    return ", ".join(f"{f.name}: {_show((f.type, f.nullable))}" for f in schema)
