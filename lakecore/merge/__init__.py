"""The record merge engine: change batches in, one result per record key out. Pure and vectorized.

Owns the merge contract below and nothing else: no files, no timeline, no Python loop per
record (numpy and Arrow compute only; loops run over columns, groups and batches).

Data model
    A change batch is a `pa.Table` with the record key columns (never null), an optional
    `_weir_op` int8 column (0 = upsert, 1 = delete; absent = all upserts), optional per-group op
    columns `_weir_op__<group>` (int8; where not null, the row's op for that group instead of its
    `_weir_op`; base states use them) and data columns. Batches
    are given oldest first; within a batch a later row is newer. A row's seq is its position in
    the concatenation of the batches. Columns of the schema a batch lacks are null in its rows;
    columns the schema lacks are ignored. `MergeSpec.groups` split the data columns into column
    groups; other non-key columns are ungrouped (commit time, partition columns, ...).
    A group's ordering column always travels with that group's winner, even when it is a hidden
    column (`_weir_ord__<group>`) that no group lists among its `columns`.

Contract, per key k and group g
    A row carries g iff it is a delete of g (a delete row is one of every group, unless its op for
    g says otherwise; a delete whose ordering value for g is null is a key-only delete, a barrier),
    or it is an upsert of g and either g orders by
    commit time (`ordering=None`) and its batch has at least one of g's columns, or g orders by
    event time and the row's value in g's ordering column is not null (a partial row leaves a
    group alone by leaving its ordering value null).
    The winner of g is the fold over k's rows carrying g in seq order: the first row, replaced by
    each next row r iff r's ordering is null (commit-time group or key-only delete), or the current
    winner's ordering is null, or r's ordering >= the current one (ties: the newer row wins).
    Equivalently: after the last barrier the greatest ordering value wins, ties to the newest row;
    with nothing after it, the barrier wins.
    k is live iff some group's winner is an upsert of it. g's columns come from its winner if that
    is an upsert of g, else are null; g's ordering column holds its winner's ordering value either way
    (a delete's, or null when no row carried g). Key columns hold the key; ungrouped columns come
    from the row winner, the newest of the groups' winners. Keys no row carries do not appear.

Output
    `merge(..., keep_deletes=False)` gives one row per live key with `schema`'s columns, a
    snapshot. `keep_deletes=True` adds `_weir_op` and restates each key as a change batch: dead keys
    as one delete row (orderings as above), live keys as one upsert row, except where one row
    cannot hold the state; then a key gets up to three rows (see `assemble.py`): a reset marker
    when an event-time winner follows a key-only delete, and a delete row before the upsert row
    when some group of a live key was deleted. That makes the result a batch with the same effect:
    `merge([merge(A, keep_deletes=True), *B]) == merge([*A, *B])` for every split, and a reduced
    batch placed after older data has the effect of its rows there too, exactly for one-group
    specs and for the groups' columns of event-time-only specs (ungrouped columns come from the
    reduced row winner, which an older row could have beaten in some groups), given batches
    without per-group op columns (a marker carries every group). Row order is
    unspecified but deterministic.
    `merge_to_base` gives the state a base file stores: one row per key some row carried, dead
    keys as tombstones (op 1), live keys with the per-group op columns marking their deleted
    groups and their commit-time groups no row carried (a base row carries every commit-time
    group, as its batch has their columns; a delete there acts like no row);
    `merge([merge_to_base(A), *B]) == merge([*A, *B])` for every split.
"""

from lakecore.merge.changes import conform
from lakecore.merge.engine import merge, merge_to_base, precombine
from lakecore.merge.keys import unique as unique_keys
from lakecore.merge.spec import DELETE, OP_COLUMN, UPSERT, GroupSpec, MergeSpec, group_op_column

__all__ = [
    "DELETE",
    "OP_COLUMN",
    "UPSERT",
    "GroupSpec",
    "MergeSpec",
    "conform",
    "group_op_column",
    "merge",
    "merge_to_base",
    "precombine",
    "unique_keys",
]
