"""What a completed instant records: the files it wrote, the schema, the operation, and (writes since
issue 9) the table's configuration, so a lost table.json can be recreated from the timeline.

Owns `WriteStat` (one data file written for one file group), `RowCounts` (what a write's files hold,
named for what it is) and `CommitMetadata` (the JSON body of a completed instant file), with strict
parsing: a truncated or hand-edited file raises CorruptMetadata naming the file, never a KeyError from
deep inside a reader.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lakecore.errors import CorruptMetadata

FileKind = Literal["base", "log"]


@dataclass(frozen=True)
class WriteStat:
    partition: str          # partition path ("" for unpartitioned tables)
    file_id: str            # file group id within the partition
    file_name: str          # data file name inside the partition directory
    kind: FileKind
    records: int            # rows in the file (upserts + deletes)
    deletes: int = 0
    bytes: int = 0
    base_instant: str | None = None  # for base files written by a merge: the base they replace
    # per-column statistics, `lakecore.formats.stats.FileStats` JSON (None: a file written before
    # Weir recorded them, or rebuilt by a repair); not part of the stat's identity
    stats: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def path(self) -> str:
        return f"{self.partition}/{self.file_name}" if self.partition else self.file_name

    @property
    def rows(self) -> int:
        """Rows in the file, deletes not counted (a log file's `records` include its deletes, a base
        file's are its live rows)."""
        return self.records - self.deletes if self.kind == "log" else self.records

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"partition": self.partition, "file_id": self.file_id, "file": self.file_name,
                             "kind": self.kind, "records": self.records, "deletes": self.deletes,
                             "bytes": self.bytes}
        if self.base_instant:
            d["base_instant"] = self.base_instant
        if self.stats is not None:
            d["stats"] = self.stats
        return d

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> WriteStat:
        kind = d["kind"]
        if kind not in ("base", "log"):
            raise ValueError(f"unknown file kind {kind!r}")
        return cls(partition=str(d["partition"]), file_id=str(d["file_id"]), file_name=str(d["file"]),
                   kind=kind, records=int(d["records"]), deletes=int(d.get("deletes", 0)),
                   bytes=int(d.get("bytes", 0)), base_instant=d.get("base_instant"), stats=d.get("stats"))


@dataclass(frozen=True)
class RowCounts:
    """What a write's files hold. `written`: rows in the files written, deletes not counted (a base file
    holds its file group's rows, those the write left untouched included); `delete_keys`: the record
    keys the write deletes, as given: a key the table does not hold deletes nothing, so this is not the
    number of rows erased (which a merge-on-read delete never looks up)."""

    written: int
    delete_keys: int

    @classmethod
    def of(cls, stats: Iterable[WriteStat]) -> RowCounts:
        listed = list(stats)
        return cls(sum(s.rows for s in listed), sum(s.deletes for s in listed))

    def describe(self) -> str:
        """`10,000 rows written`, `3,000,300 delete keys`, or both (`1 row written`)."""
        said = []
        if self.written or not self.delete_keys:
            said.append(f"{counted(self.written, 'row')} written")
        if self.delete_keys:
            said.append(counted(self.delete_keys, "delete key"))
        return ", ".join(said)


def counted(n: int, noun: str) -> str:
    """`1 file group`, `3,000 file groups`: how weir's messages count things."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


@dataclass(frozen=True)
class CommitMetadata:
    operation: str
    write_stats: tuple[WriteStat, ...] = ()
    schema: list[dict[str, Any]] | None = None  # config.schema_to_json form
    extra: Mapping[str, Any] = field(default_factory=dict)
    # TableConfig.to_json() without the schema (which is `schema`): what `weir table repair` rebuilds
    # table.json from. Written by writes; None in older instants and in table services' instants.
    table: Mapping[str, Any] | None = None

    @property
    def file_groups(self) -> frozenset[tuple[str, str]]:
        return frozenset((s.partition, s.file_id) for s in self.write_stats)

    @property
    def records(self) -> int:
        """Rows in the files written, deletes included (`counts` names them apart)."""
        return sum(s.records for s in self.write_stats)

    @property
    def counts(self) -> RowCounts:
        return RowCounts.of(self.write_stats)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"operation": self.operation,
                             "write_stats": [s.to_json() for s in self.write_stats],
                             "schema": self.schema, "extra": dict(self.extra)}
        if self.table is not None:
            d["table"] = dict(self.table)
        return d

    def dumps(self) -> bytes:
        return json.dumps(self.to_json(), separators=(",", ":")).encode()

    @classmethod
    def loads(cls, data: bytes, *, source: str, table: str = "TABLE") -> CommitMetadata:
        """Parse an instant file's body; `table` (the table URI) goes into the remedy."""
        try:
            obj = json.loads(data)
            recorded = obj.get("table")
            return cls(operation=str(obj["operation"]),
                       write_stats=tuple(WriteStat.from_json(s) for s in obj.get("write_stats", ())),
                       schema=obj.get("schema"), extra=dict(obj.get("extra") or {}),
                       table=dict(recorded) if recorded is not None else None)
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError,
                AttributeError) as exc:
            raise CorruptMetadata(
                f"instant file {source} is truncated or corrupted ({exc!r}); the table cannot be read "
                f"past it and writers refuse it: `weir table repair {table}` shows how it is repaired and "
                f"`weir table repair {table} --run` does it, rebuilding the instant from its data files "
                "(when a file it wrote is missing, the write is rolled back instead: restore that file "
                "from a backup first to keep its rows)") from exc


WRITER_KEYS = ("writer", "weir.writer")  # the operator's --extra writer=ns/name; a streaming writer's own key


def writer_of(extra: Mapping[str, Any]) -> str | None:
    """Who made a commit, from its metadata's extra fields (None when it does not say)."""
    for key in WRITER_KEYS:
        value = extra.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None
