"""LakeTable decisions: create or adopt a table, which differences can be applied, what deletion does (pure).

Owns: `desired_config` (a LakeTableSpec translated into lakecore's `TableConfig`, once per pass: the value
the table is created from and compared with), `compare_config` (desired vs the config of an existing table
-> mismatches, each evolvable or refused; the lock compared by lakecore's own `LockSpec.mismatch`; the
codec evolvable both ways, so adopting a table of another codec sets the spec's; a spec without one
leaves the table's as it is: `plan_table(keep_codec=)`),
`plan_table`, `columns_to_add` (what an evolution adds, and to which column groups), `refused_changes` (a
spec update that changes identity fields), `deletion_action`.

Schema evolution: a new column is nullable; on a column-group table the spec lists it in one group's
columns in the same edit (specs.py refuses a column in no group, as lakecore does). Groups never change
otherwise: a column never leaves its group nor joins one it was not in.

Must not: touch storage (lakecore's config values only): the reconcile core reads table.json with
lakecore's read-side API, passes it in as a `TableConfig`, and carries out the plan.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from lakecore.config import (
    DEFAULT_CODEC,
    ColumnGroup,
    TableConfig,
    default_merge_mode,
    normalize_groups,
    schema_from_json,
)
from lakeoperator.specs import DECIMAL_TYPE, ColumnSpec, LakeTableSpec, ObjectRef

Severity = Literal["evolvable", "refused"]
# table.json keys a spec decides (format_version, name, column_defaults are lakecore's own)
COMPARED_KEYS = ("table_type", "record_key", "partition_fields", "ordering_field", "merge_mode",
                 "column_groups", "buckets", "concurrency_mode", "tombstone_retention_hours", "lock",
                 "compression", "schema")


class TableAction(enum.StrEnum):
    CREATE = "create"    # no table at spec.location: create it from the desired config
    ADOPT = "adopt"      # a table is there and matches: manage it as it is
    EVOLVE = "evolve"    # it matches but for evolvable mismatches: add the columns (to their groups), switch
                         # the lock, set the codec
    REFUSE = "refuse"    # it differs in what cannot change: touch nothing, report the mismatches


@dataclass(frozen=True)
class Mismatch:
    field: str            # table.json key, or schema.<column>
    desired: Any
    observed: Any
    severity: Severity
    message: str          # ends with what to do


@dataclass(frozen=True)
class TablePlan:
    action: TableAction
    mismatches: tuple[Mismatch, ...] = ()
    desired: TableConfig | None = None

    @property
    def refused(self) -> tuple[Mismatch, ...]:
        return tuple(m for m in self.mismatches if m.severity == "refused")


def column_type_json(type_name: str) -> dict[str, Any]:
    """A LakeTable column type -> lakecore's table.json type object."""
    if type_name in ("timestamp_ms", "timestamp_us"):
        return {"type": "timestamp", "unit": type_name[-2:], "tz": "UTC"}
    m = DECIMAL_TYPE.fullmatch(type_name)
    if m:
        return {"type": "decimal", "precision": int(m.group(1)), "scale": int(m.group(2))}
    return {"type": type_name}


def column_json(c: ColumnSpec) -> dict[str, Any]:
    return {"name": c.name, "nullable": c.nullable, **column_type_json(c.type)}


def desired_config(spec: LakeTableSpec, name: str) -> TableConfig:
    """The config lakecore creates the table with for this spec (`name`: the table's, the LakeTable's name);
    lakecore's own rules hold (InvalidTableConfig when it refuses the spec)."""
    groups = normalize_groups([ColumnGroup(g.name, tuple(g.columns), g.ordering_field)
                               for g in spec.column_groups])
    return TableConfig(
        name=name, schema=schema_from_json([column_json(c) for c in spec.schema]),
        record_key=spec.record_key, partition_fields=spec.partition_fields, table_type=spec.table_type,
        ordering_field=spec.ordering_field, merge_mode=default_merge_mode(spec.ordering_field, groups),
        column_groups=groups, buckets=spec.buckets, concurrency_mode=spec.concurrency.mode,
        tombstone_retention_hours=spec.tombstone_retention_hours, lock=spec.lock,
        compression=spec.compression or DEFAULT_CODEC)


def compare_config(desired: TableConfig, observed: TableConfig) -> tuple[Mismatch, ...]:
    """Where an existing table's config differs from the desired one (in COMPARED_KEYS; a mismatch shows
    both values as table.json words them)."""
    want, have = desired.to_json(), observed.to_json()
    out: list[Mismatch] = []
    for key in COMPARED_KEYS:
        if key == "schema":
            out += _compare_schema(want["schema"], have["schema"], want["column_groups"], desired.record_key)
        elif key == "column_groups" and desired.column_groups and observed.column_groups:
            out += _compare_groups(want[key], have[key], have["schema"])
        elif key == "lock":
            if observed.lock.mismatch(desired.lock) is not None:   # no path in the spec: the table's
                out.append(Mismatch("lock", want["lock"], have["lock"], "evolvable",
                                    "the table records another lock; the operator switches it (no writer may "
                                    "run meanwhile)"))
        elif key == "compression":
            if desired.compression != observed.compression:   # files written before keep theirs
                out.append(Mismatch(key, want[key], have[key], "evolvable",
                                    f"the table writes {have[key]} files; the operator sets it to "
                                    f"{want[key]} for the files written from then on"))
        elif key == "tombstone_retention_hours":
            if desired.tombstone_retention_hours != observed.tombstone_retention_hours:
                out.append(Mismatch(key, want[key], have[key], "evolvable",
                                    f"the table keeps tombstones {_hours(have[key])}; the operator sets it "
                                    f"to {_hours(want[key])} for the rewrites from then on"))
        elif getattr(desired, key) != getattr(observed, key):
            field = SPEC_FIELDS.get(key, key)
            out.append(Mismatch(key, want[key], have[key], "refused",
                                f"the table at this location has {field} {_said(have[key])}, the spec "
                                f"{_said(want[key])}, and it cannot change; fix the spec to match, or "
                                "point spec.location at a new table"))
    return tuple(out)


# table.json's keys as a LakeTable's spec names them
SPEC_FIELDS = {"table_type": "tableType", "record_key": "recordKey", "partition_fields": "partitionFields",
               "ordering_field": "orderingField", "merge_mode": "mergeMode",
               "concurrency_mode": "concurrencyMode", "tombstone_retention_hours": "tombstoneRetentionHours"}


def _said(value: Any) -> str:
    return "unset" if value is None else repr(value)


def _hours(value: Any) -> str:
    return "for ever (tombstoneRetentionHours unset)" if value is None else f"{value:g} hours"


def _compare_groups(desired: list[Mapping[str, Any]], observed: list[Mapping[str, Any]],
                    observed_schema: list[Mapping[str, Any]]) -> list[Mismatch]:
    """The same groups (names, ordering fields) owning the same columns of the table; a group may list
    columns new to the table (added with the schema)."""
    shape = {g["name"]: g["ordering_field"] for g in desired}
    if shape != {g["name"]: g["ordering_field"] for g in observed}:
        return [Mismatch("column_groups", desired, observed, "refused", "the table at this location has "
                         f"column_groups {observed!r}, the spec {desired!r}, and groups cannot change; fix "
                         "the spec to match, or point spec.location at a new table")]
    existing = {c["name"] for c in observed_schema}
    wanted = {g["name"]: set(g["columns"]) for g in desired}
    out = []
    for g in observed:
        name, have = g["name"], set(g["columns"])
        out += [Mismatch(f"column_groups.{name}", sorted(wanted[name]), sorted(have), "refused",
                         f"column {c!r} is in column group {name!r} in the table but not in the spec, and a "
                         "column never leaves its group; put it back in that group's columns")
                for c in sorted(have - wanted[name])]
        out += [Mismatch(f"column_groups.{name}", sorted(wanted[name]), sorted(have), "refused",
                         f"column {c!r} of the table is in column group {name!r} in the spec but not in the "
                         "table, and a column never joins another group; take it out of that group")
                for c in sorted(wanted[name] - have) if c in existing]
    return out


def _compare_schema(desired: list[Mapping[str, Any]], observed: list[Mapping[str, Any]],
                    groups: list[Mapping[str, Any]], keys: tuple[str, ...] = ()) -> list[Mismatch]:
    """A record key column's nullable is no mismatch: a write refuses a null key whatever the column says
    (a table made by `weir table create`, whose --schema marks no column non-null, is adopted by a spec
    that says `nullable: false`)."""
    out = []
    group_of = {c: g["name"] for g in groups for c in g["columns"]}
    have = {c["name"]: c for c in observed}
    want = {c["name"]: c for c in desired}
    for name, col in have.items():
        if name not in want:
            out.append(Mismatch(f"schema.{name}", None, col, "refused", f"column {name!r} is in the table "
                                "but not in the spec, and columns are never removed; add it back to "
                                "spec.schema"))
    for name, col in want.items():
        old = have.get(name)
        if old is None:
            if col.get("nullable", True):
                into = f" to column group {group_of[name]!r}" if name in group_of else ""
                out.append(Mismatch(f"schema.{name}", col, None, "evolvable",
                                    f"column {name!r} is new: the operator adds it (nullable){into}"))
            else:
                out.append(Mismatch(f"schema.{name}", col, None, "refused", f"new column {name!r} is not "
                                    "nullable, and existing rows have no value for it; make it nullable"))
            continue
        if _type(col) != _type(old):
            out.append(Mismatch(f"schema.{name}", col, old, "refused", f"column {name!r} is {_type(old)} in "
                                f"the table, {_type(col)} in the spec, and columns are never retyped; put "
                                "the table's type back in spec.schema"))
        elif bool(col.get("nullable", True)) != bool(old.get("nullable", True)) and name not in keys:
            out.append(Mismatch(f"schema.{name}", col, old, "refused", f"column {name!r} differs in "
                                f"nullable (table: {old.get('nullable')}); put the table's value in the "
                                "spec"))
    return out


def _type(col: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(col.items()) if k not in ("name", "nullable", "id"))


def plan_table(desired: TableConfig, observed: TableConfig | None, *, keep_codec: bool = False) -> TablePlan:
    """observed: the config of the table at spec.location (None: there is none). `keep_codec`: the spec
    names no codec, so an existing table keeps its own (a new one gets lakecore's default)."""
    if observed is None:
        return TablePlan(TableAction.CREATE, desired=desired)
    if keep_codec:
        desired = replace(desired, compression=observed.compression)
    mismatches = compare_config(desired, observed)
    if any(m.severity == "refused" for m in mismatches):
        return TablePlan(TableAction.REFUSE, mismatches, desired)
    return TablePlan(TableAction.EVOLVE if mismatches else TableAction.ADOPT, mismatches, desired)


def columns_to_add(plan: TablePlan) -> tuple[list[Mapping[str, Any]], dict[str, str]]:
    """The columns an EVOLVE plan adds (table.json's form) and the column group each joins (by name)."""
    # without the desired config's field id: the table numbers a column it adds
    added: list[Mapping[str, Any]] = [
        {k: v for k, v in m.desired.items() if k != "id"} for m in plan.mismatches
        if m.field.startswith("schema.") and m.observed is None and m.severity == "evolvable" and m.desired]
    names = {c["name"] for c in added}
    groups = {c: g.name for g in (plan.desired.column_groups if plan.desired else ()) for c in g.columns
              if c in names}
    return added, groups


# spec fields that name the table's identity: never changed by an update (column groups: see above)
IMMUTABLE = ("location", "record_key", "partition_fields", "table_type", "buckets", "ordering_field")


def refused_changes(old: LakeTableSpec, new: LakeTableSpec) -> tuple[str, ...]:
    """Why an update of a LakeTable's spec cannot be applied (empty: it can). Columns may be added
    (nullable, each into a column group on a column-group table), never removed or retyped; the identity
    fields never change."""
    reasons = [f"spec.{_camel(name)} is immutable; revert it (a different table needs a new LakeTable)"
               for name in IMMUTABLE if getattr(old, name) != getattr(new, name)]
    reasons += [m.message for m in compare_config(desired_config(new, "table"), desired_config(old, "table"))
                if m.field.startswith(("schema.", "column_groups")) and m.severity == "refused"]
    return tuple(reasons)


def deletion_action(spec: LakeTableSpec, ref: ObjectRef) -> Literal["retain", "delete"]:
    """What deleting the LakeTable does to its data: Delete only when asked and the table is managed."""
    return "delete" if spec.deletion_policy == "Delete" and ref.managed else "retain"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)
