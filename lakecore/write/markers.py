"""Markers: one per data file, created BEFORE the data file.

Direct: an empty file `<base>/.weir/markers/<T>/<partition>/<data file name>.marker.<IO type>`.
Batched (written by the marker service, `marker_service.py`): the same names, relative to the
instant's marker dir, one per line in `<base>/.weir/markers/<T>/MARKERS<i>`, beside a `MARKERS.type`
file. Reading understands both at once, so a reader never needs to know which kind a writer used. A
crashed or aborted write is cleaned up from its markers alone (every file it may have created is
named by one), and the markers are deleted after the instant completes, with the instant's marker
directory where the storage has directories (`prune_marker_dirs` removes what older versions left).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from lakecore.storage import Storage, join, remove_empty_dirs

MARKERS_DIR = ".weir/markers"
IOType = Literal["create", "merge", "append"]
IO_TYPES: tuple[IOType, ...] = ("create", "merge", "append")
MARKER_TYPE_FILE = "MARKERS.type"    # says the dir holds batched markers; readers do not need it
BATCHED_TYPE = b"BATCHED"
_BATCH_FILE = re.compile(r"MARKERS\d+")
_INSTANT_DIR = re.compile(r"\d{17}")


@dataclass(frozen=True)
class Marker:
    instant_time: str
    data_path: str   # data file path relative to the table base
    io_type: IOType


class MarkerWriter(Protocol):
    """Creates the marker of a data file before the file is written. Early conflict detection and
    the batched marker service plug in here; raising stops the write before the file exists."""

    def create(self, storage: Storage, marker: Marker, partition: str, file_id: str) -> None: ...


class DirectMarkers:
    """The default: one marker file per data file, no conflict checks."""

    def create(self, storage: Storage, marker: Marker, partition: str, file_id: str) -> None:
        create_marker(storage, marker)


def marker_path(m: Marker) -> str:
    return join(MARKERS_DIR, m.instant_time, f"{m.data_path}.marker.{m.io_type}")


def create_marker(storage: Storage, m: Marker) -> None:
    storage.write(marker_path(m), b"", durable=False)  # empty; after a power loss no writer is alive


def batch_file(instant_time: str, index: int) -> str:
    """Path of the `index`-th MARKERS file of an instant (marker service)."""
    return join(MARKERS_DIR, instant_time, f"MARKERS{index}")


def is_batch_file(name: str) -> bool:
    """Whether a file name directly in an instant's marker dir is a MARKERS<i> file."""
    return _BATCH_FILE.fullmatch(name) is not None


def parse_marker_name(instant_time: str, name: str) -> Marker | None:
    """`<partition>/<data file>.marker.<io>` (relative to the instant's marker dir) -> Marker; None for
    anything else (temp files, a line cut short)."""
    data_path, sep, io_type = name.rpartition(".marker.")
    if sep and data_path and io_type in IO_TYPES:
        return Marker(instant_time, data_path, io_type)
    return None


def read_batch_file(storage: Storage, path: str) -> list[str]:
    """Marker names in one MARKERS file. Blank lines are skipped; a file deleted meanwhile is empty."""
    try:
        data = storage.read(path)
    except FileNotFoundError:
        return []
    return [line for line in data.decode("utf-8", errors="replace").splitlines() if line.strip()]


def list_markers(storage: Storage, instant_time: str) -> list[Marker]:
    """Every marker of the instant, direct and batched, each once."""
    root = join(MARKERS_DIR, instant_time)
    out: dict[Marker, None] = {}  # ordered set: a marker named twice is listed once
    for f in storage.list_tree(root):
        rel = f.path[len(root) + 1:]
        names = read_batch_file(storage, f.path) if is_batch_file(rel) else [rel]
        for name in names:
            m = parse_marker_name(instant_time, name)
            if m is not None:
                out[m] = None
    return list(out)


def bytes_named(storage: Storage, instant_time: str) -> int:
    """Size of the data files the instant's markers name (what a write had produced so far)."""
    wanted = {m.data_path for m in list_markers(storage, instant_time)}
    sizes: dict[str, int] = {}
    for directory in {p.rsplit("/", 1)[0] if "/" in p else "" for p in wanted}:
        sizes.update({f.path: f.size for f in storage.list_dir(directory)})
    return sum(sizes.get(p, 0) for p in wanted)


def delete_markers(storage: Storage, instant_time: str) -> None:
    """Remove the instant's marker dir: direct marker files, MARKERS<i> files, then MARKERS.type."""
    files = storage.list_tree(join(MARKERS_DIR, instant_time))
    # The type file goes last, so a dir with batched markers left is never without it.
    for f in sorted(files, key=lambda f: f.path.endswith("/" + MARKER_TYPE_FILE)):
        storage.delete(f.path)
    remove_empty_dirs(storage, MARKERS_DIR, keep=lambda name: name != instant_time)


def prune_marker_dirs(storage: Storage, pending: Collection[str], newest: str | None) -> int:
    """Remove the empty marker directories that versions deleting marker files only left behind, of
    instants neither `pending` nor newer than `newest` (the newest time of the timeline the caller
    loaded: a new instant, whose writer makes its directory just before its first marker, is newer).
    Returns how many directories were removed."""

    def keep(name: str) -> bool:
        return name in pending or not _INSTANT_DIR.fullmatch(name) or newest is None or name > newest

    return remove_empty_dirs(storage, MARKERS_DIR, keep=keep)


def delete_unreported(storage: Storage, instant_time: str, reported: Iterable[str]) -> list[str]:
    """Delete the data files the instant's markers name but `reported` (data paths of the files its
    tasks returned stats for) does not: what failed, retried or speculative task attempts wrote.
    Returns the deleted paths. Call before completing the instant."""
    keep = set(reported)
    gone = [m.data_path for m in list_markers(storage, instant_time) if m.data_path not in keep]
    for path in gone:
        storage.delete(path)
    return gone
