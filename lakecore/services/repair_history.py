"""Repairing a damaged archived timeline: falling back from a history manifest that is missing or
does not parse to the newest older version that does (`history_store.KEPT_VERSIONS` are kept), and
reactivating the instants archived since from the history files the newer versions wrote. The newer
manifests and pointers go to `.weir/quarantine/`. Called by repair.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.concurrency import Lock, ensure_held
from lakecore.errors import AlreadyExists, CorruptMetadata
from lakecore.services.quarantine import quarantine
from lakecore.storage import Storage
from lakecore.timeline import TIMELINE_DIR, Instant, State
from lakecore.timeline.history import HISTORY_DIR, Manifest
from lakecore.timeline.history_store import HistoryStore, manifest_path, pointer_name

Clock = Callable[[], int]
log = logging.getLogger(__name__)


def fall_back_history(storage: Storage, lock: Lock, *, dry_run: bool, clock: Clock) -> tuple[str, str]:
    """Fall back to the newest older history version that parses (with dry_run: say how); returns
    (the damaged manifest's path, what was or would be done)."""
    history = HistoryStore(storage)
    versions = history.pointer_versions()
    newest = versions[-1] if versions else 0
    back_to, manifest = 0, Manifest()
    for v in reversed(versions[:-1]):
        try:
            manifest = history.summary(v).manifest
            back_to = v
            break
        except CorruptMetadata:
            continue
    rows = _archived_after(history, manifest)
    newer = [v for v in versions if v > back_to]
    what = (f"fall back from history version {newest} to {back_to or 'none'}, reactivate the "
            f"{rows.num_rows} instant(s) archived since, quarantine pointer(s)/manifest(s) "
            f"{', '.join(map(str, newer))}")
    if dry_run:
        return manifest_path(newest), f"would {what}"
    with lock:
        ensure_held(lock, "falling back to an older history version")
        _reactivate(storage, rows)
        for v in newer:  # manifests first: a crash in between leaves a pointer to a missing one: rerun
            if storage.exists(manifest_path(v)):
                quarantine(storage, manifest_path(v), clock)
        for v in newer:
            quarantine(storage, f"{TIMELINE_DIR}/{pointer_name(v)}", clock)
    return manifest_path(newest), f"did {what}"


def _archived_after(history: HistoryStore, manifest: Manifest) -> pa.Table:
    """History rows archived after `manifest` (completed after its boundary), from every history file
    on storage that `manifest` does not name, one row per instant."""
    named = {f.name for f in manifest.files}
    columns = ["requested_time", "completion_time", "action", "metadata", "plan"]
    parts = []
    for name in sorted(history.storage.list_names(HISTORY_DIR)):
        if not name.startswith("L") or not name.endswith(".parquet") or name in named:
            continue
        try:
            parts.append(history.read_file(name, columns))
        except CorruptMetadata as exc:  # another copy of its rows may be in a merged file
            log.warning("skipping unreadable history file %s: %s", name, exc)
    if not parts:
        return pa.table({c: pa.array([], pa.binary() if c in ("metadata", "plan") else pa.string())
                         for c in columns})
    rows = pa.concat_tables(parts)
    if manifest.boundary:
        rows = rows.filter(pc.greater(rows.column("completion_time"), manifest.boundary))
    # an instant may sit in an L0 file and in the merged file that replaced it: keep one row each
    # (a loop per archived instant, not per record)
    seen: dict[str, int] = {}
    for i, t in enumerate(rows.column("requested_time").to_pylist()):
        seen.setdefault(t, i)
    return rows.take(sorted(seen.values()))


def _reactivate(storage: Storage, rows: pa.Table) -> None:
    """Write the rows' instants back into the active timeline: requested files (plans) first, then
    the completed files (immutable copies of what they held before archival)."""
    entries = list(zip(rows.column("requested_time").to_pylist(), rows.column("completion_time").to_pylist(),
                       rows.column("action").to_pylist(), rows.column("metadata").to_pylist(),
                       rows.column("plan").to_pylist(), strict=True))
    for state in (State.REQUESTED, State.COMPLETED):
        for t, c, action, meta, plan in entries:
            inst = Instant(t, action, state, c if state is State.COMPLETED else None)
            body = (plan or b"") if state is State.REQUESTED else meta
            try:
                storage.write_if_absent(f"{TIMELINE_DIR}/{inst.file_name}", body)
            except AlreadyExists:
                continue
