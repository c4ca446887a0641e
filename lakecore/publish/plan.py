"""What a published snapshot shows: the data files of a Weir table at an instant and, per file, the
rows a reader must not show. Pure: the rows come from a function the caller passes (the I/O shell
passes `lakecore.read.positions.shown_rows`, lakecore's own merged read), so the merge rules are
never implemented here.

Views:
- `snapshot`: the merged merge-on-read snapshot, what `Table.read()` returns. Every base and log
  file of the latest slices is listed as it is; each hides its tombstones, superseded and losing
  versions and delete rows. Only for one-group merge modes (`commit_time`, `event_time`), where
  every surviving row lives whole in one file.
- `read_optimized`: the base files only, what `Table.read(query="read_optimized")` returns (their
  tombstones hidden): the last compacted state. The only view of `partial_update` tables, whose
  merged rows take columns from several files (and not even that one when they have column
  defaults: no target can show a default for a group no write carried).

Incremental: given the view the target showed before (`since`), only the file groups whose slice
changed are planned (only their files are read); `dropped` names the groups that left the view.
Files showing no row (a log of deletes only, an emptied file group's base) are left out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import pyarrow as pa

from lakecore.config import TableConfig, schema_to_json
from lakecore.errors import NotPublishable
from lakecore.formats import FileStats
from lakecore.layout import FileSlice, FileSystemView
from lakecore.read.positions import FileRows, Positions
from lakecore.read.spec import base_schema
from lakecore.timeline import Instant

PublishView = Literal["snapshot", "read_optimized"]
VIEWS: tuple[str, ...] = get_args(PublishView)
GroupKey = tuple[str, str]  # (partition path, file id)
RowsOf = Callable[[Sequence[FileSlice]], Sequence[Sequence[FileRows]]]


@dataclass(frozen=True, eq=False)
class PlannedFile:
    """A data file as a target lists it."""

    path: str            # relative to the table base
    partition: str       # partition path ("" when unpartitioned)
    file_id: str
    bytes: int
    rows: int            # rows stored in the file
    hidden: Positions    # sorted positions of the rows a reader must not show
    stats: FileStats | None = None  # its column statistics (None: unknown, a file written before them)

    @property
    def shown(self) -> int:
        return self.rows - len(self.hidden)


@dataclass(frozen=True)
class PlannedGroup:
    partition: str
    file_id: str
    files: tuple[PlannedFile, ...]  # the files showing at least one row
    # incremental, a group whose slice only gained files since the previous snapshot (new logs over the
    # same base): the paths that snapshot could list, all still in the slice, and those of them that now
    # show no row. Their rows hidden then are hidden now too (a row that lost the merge keeps losing),
    # so a target may keep their entries and add the new files and row positions. None: new or replaced.
    before: frozenset[str] | None = None
    emptied: tuple[PlannedFile, ...] = ()

    @property
    def key(self) -> GroupKey:
        return self.partition, self.file_id


@dataclass(frozen=True)
class PublishPlan:
    instant: Instant                  # the completed Weir instant the snapshot shows
    view: PublishView
    schema: pa.Schema                 # the columns readers see: the table's, as Table.read() returns them
    stored: pa.Schema                 # every column a data file may store (meta columns included)
    partition_fields: tuple[str, ...]
    groups: tuple[PlannedGroup, ...]  # every file group of the view, or (incremental) the changed ones
    dropped: frozenset[GroupKey]      # incremental: groups the previous snapshot showed, gone now
    full: bool                        # True: `groups` is the whole snapshot

    @property
    def files(self) -> tuple[PlannedFile, ...]:
        return tuple(f for g in self.groups for f in g.files)

    @property
    def fingerprint(self) -> str:
        return schema_fingerprint(self.schema)

    @property
    def replaced(self) -> frozenset[GroupKey]:
        """Incremental: the groups whose previous entries the target drops."""
        return frozenset(g.key for g in self.groups) | self.dropped

    @property
    def rewritten(self) -> frozenset[GroupKey]:
        """Incremental: the groups whose previous entries a target that keeps appended groups' entries
        (`PlannedGroup.before`) must drop: groups replaced or gone."""
        return frozenset(g.key for g in self.groups if g.before is None) | self.dropped


def schema_fingerprint(schema: pa.Schema) -> str:
    """Names the columns a snapshot shows: a table that gained columns (add_columns, no new instant)
    is published again."""
    return hashlib.sha256(json.dumps(schema_to_json(schema), sort_keys=True).encode()).hexdigest()[:16]


def choose_view(config: TableConfig, asked: str | None) -> PublishView:
    """The view to publish: `asked`, or by default the merged snapshot (the compacted view for
    column-group tables, which is all they can show)."""
    if asked is not None and asked not in VIEWS:
        raise NotPublishable(f"unknown view {asked!r}; use one of {', '.join(VIEWS)}")
    if config.merge_mode == "partial_update":
        if asked == "snapshot":
            raise NotPublishable(
                f"table {config.name!r} merges column groups (partial_update): a merged row takes columns "
                "from several files, which Iceberg and Delta cannot express without rewriting data; publish "
                "its compacted view, read_optimized (`--view read_optimized`; in Python "
                "view=\"read_optimized\"; a LakeTable's spec.publish.view), and compact the table first to "
                "include its latest writes")
        if config.column_defaults:
            raise NotPublishable(
                f"table {config.name!r} shows column_defaults {sorted(config.column_defaults)} for column "
                "groups no write carried; Iceberg v2 and Delta have no such default, so their readers would "
                "show null there: this table cannot be published until Iceberg v3 defaults are supported")
        return "read_optimized"
    return "snapshot" if asked is None else asked  # type: ignore[return-value]


def visible_slices(view: FileSystemView, kind: PublishView) -> dict[GroupKey, FileSlice]:
    """The slices a published view reads: all of them, or (read-optimized) their base files alone."""
    out: dict[GroupKey, FileSlice] = {}
    for s in view.slices:
        if kind == "read_optimized":
            if s.base is None:
                continue
            s = FileSlice(s.partition, s.file_id, s.base_instant, s.base, ())
        out[(s.partition, s.file_id)] = s
    return out


def changed_groups(now: dict[GroupKey, FileSlice], before: dict[GroupKey, FileSlice]
                   ) -> tuple[list[GroupKey], frozenset[GroupKey]]:
    """(groups whose files differ, sorted; groups that left the view)."""
    changed = [k for k, s in now.items() if k not in before or _paths(before[k]) != _paths(s)]
    return sorted(changed), frozenset(before) - frozenset(now)


def plan_publish(config: TableConfig, schema: pa.Schema, instant: Instant, view: FileSystemView,
                 kind: PublishView, rows_of: RowsOf, *, since: FileSystemView | None = None) -> PublishPlan:
    """The plan of a snapshot of `view` (the table as of `instant`). With `since` (the view the
    target's last snapshot showed), only what changed since then."""
    now = visible_slices(view, kind)
    before: dict[GroupKey, FileSlice] = {}
    if since is None:
        keys, dropped = sorted(now), frozenset[GroupKey]()
    else:
        before = visible_slices(since, kind)
        keys, dropped = changed_groups(now, before)
    slices = [now[k] for k in keys]
    groups = tuple(_group(s, rows, before.get((s.partition, s.file_id)))
                   for s, rows in zip(slices, rows_of(slices), strict=True))
    stored = base_schema(config.with_schema(schema) if schema != config.schema else config)
    return PublishPlan(instant, kind, schema, stored, config.partition_fields, groups, dropped,
                       full=since is None)


def _group(fs: FileSlice, rows: Sequence[FileRows], before: FileSlice | None) -> PlannedGroup:
    listed = None
    if before is not None and before.base_instant == fs.base_instant and \
            set(_paths(before)) <= set(_paths(fs)):
        listed = frozenset(_paths(before))
    emptied = tuple(_file(fs, r) for r in rows if not len(r.shown) and listed and r.stat.path in listed)
    return PlannedGroup(fs.partition, fs.file_id, tuple(_file(fs, r) for r in rows if len(r.shown)), listed,
                        emptied)


def _file(fs: FileSlice, r: FileRows) -> PlannedFile:
    return PlannedFile(r.stat.path, fs.partition, fs.file_id, r.stat.bytes, r.rows, r.hidden,
                       None if r.stat.stats is None else FileStats.from_json(r.stat.stats))


def _paths(fs: FileSlice) -> tuple[str, ...]:
    return tuple(f.path for f in fs.files)
