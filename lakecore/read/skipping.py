"""Data skipping: which file slices a filtered read can leave unread, from the per-column statistics each
file's write stat carries (`lakecore.formats.stats`), for filters on any table column. Pure.

Merge-on-read rule: every row a slice's merged read returns is one row version stored whole in one of
its files (base or log), in the one-group merge modes (`commit_time`, `event_time`). So a slice can be
skipped only when NO file of it (the base and every log) may hold a matching row: a key whose base row
does not match keeps its slice when a log's newer version might, and a matching base row keeps its
slice even when a newer version in a log will replace it (the filter applies after the merge). A file
without statistics (written before Weir recorded them, rebuilt by a repair, or archived) may match
anything. `partial_update` tables are never skipped: a merged row takes columns from several files and
column defaults fill groups no file holds.

Each file's statistics become an Arrow guarantee (`min <= c <= max`, or null; all null), and Arrow's
own expression simplifier (the one it prunes Parquet row groups with) decides whether the filter can
hold under it. A filter that does not bind to the table's columns (one on meta columns) skips nothing.
Floating-point columns holding NaN give no bounds (NaN compares false, yet `!=` holds for it).
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from lakecore.config import TableConfig
from lakecore.formats.stats import FileStats, known_nans
from lakecore.layout import FileSlice

_ALWAYS = ds.scalar(True)
_MAX_SPLIT = 3
_BIND_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError)


def guarantees(stats: Mapping[str, Any] | None, schema: pa.Schema, columns: Collection[str]
               ) -> list[ds.Expression]:
    """What the rows of a file with `stats` (FileStats JSON) satisfy, over the `columns` of `schema`
    (those a filter names), as alternatives: each row satisfies one of them. A column with some
    nulls is either within its bounds or null; Arrow's simplifier does not reason over such an
    `or`, so each of up to `_MAX_SPLIT` such columns doubles the alternatives instead."""
    if stats is None:
        return [_ALWAYS]
    parsed = FileStats.from_json(stats)
    fixed = _ALWAYS
    split: list[tuple[ds.Expression, ds.Expression]] = []
    for name in columns:
        col = parsed.columns.get(name)
        if col is None or name not in schema.names:
            continue
        field = ds.field(name)
        if parsed.rows and col.nulls == parsed.rows:
            fixed = fixed & field.is_null()
            continue
        t = schema.field(name).type
        bounds = col.bounds(t) if known_nans(col, t) else None
        if bounds is None:
            continue
        inside = (field >= ds.scalar(bounds[0])) & (field <= ds.scalar(bounds[1]))
        if not col.nulls:
            fixed = fixed & inside
        elif len(split) < _MAX_SPLIT:
            split.append((inside, field.is_null()))
    return [functools.reduce(operator.and_, choice, fixed) for choice in itertools.product(*split)]


def skippable(config: TableConfig) -> bool:
    """Whether file statistics can decide a filter for this table (see the module docstring)."""
    return config.merge_mode != "partial_update"


def matching(filter: pc.Expression, guarantees: Sequence[ds.Expression], schema: pa.Schema
             ) -> list[bool] | None:
    """Per guarantee, whether a row under it may satisfy `filter` (None: `filter` does not bind to
    `schema`, so nothing is decided)."""
    if not guarantees:
        return []
    paths = [f"/{i}" for i in range(len(guarantees))]
    dataset = ds.FileSystemDataset.from_paths(paths, schema=schema, format=ds.ParquetFileFormat(),
                                              filesystem=pafs.LocalFileSystem(), partitions=list(guarantees))
    try:  # no file is opened: only the guarantees are simplified
        kept = {f.path for f in dataset.get_fragments(filter=filter)}
    except _BIND_ERRORS:
        return None
    return [p in kept for p in paths]


def keep_slices(slices: Sequence[FileSlice], config: TableConfig, filter: pc.Expression | None, *,
                base_only: bool = False) -> list[FileSlice]:
    """The slices a read with `filter` must open: those with a file that may hold a matching row."""
    if filter is None or not slices or not skippable(config):
        return list(slices)
    named = referenced(filter, config.schema)
    owners: list[int] = []   # the slice of each alternative
    alternatives: list[ds.Expression] = []
    for i, s in enumerate(slices):
        for f in ((s.base,) if s.base else ()) if base_only else s.files:
            found = guarantees(f.stats, config.schema, named)
            owners += [i] * len(found)
            alternatives += found
    verdict = matching(filter, alternatives, config.schema)
    if verdict is None:
        return list(slices)
    wanted = {i for i, may in zip(owners, verdict, strict=True) if may}
    return [s for i, s in enumerate(slices) if i in wanted]


def referenced(filter: pc.Expression, schema: pa.Schema) -> list[str]:
    """The columns of `schema` a filter may name. pyarrow has no public accessor for an expression's
    field references; its text names them. A word that is no reference costs only a weaker guarantee
    left unused, never a wrong answer (every guarantee is a fact about the file)."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", str(filter)))
    return [n for n in schema.names if n in words]


def pushable(config: TableConfig, filter: pc.Expression | None) -> pc.Expression | None:
    """`filter` when it may select row groups of base-only slices (it binds to the table's columns and
    the table merges one group), else None."""
    if filter is None or not skippable(config):
        return None
    return filter if matching(filter, [_ALWAYS], config.schema) is not None else None
