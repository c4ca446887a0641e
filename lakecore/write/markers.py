"""Direct markers: one empty file per data file, created BEFORE the data file.

`<base>/.weir/markers/<T>/<partition>/<data file name>.marker.<IO type>`. A crashed or aborted write
is cleaned up from its markers alone (every file it may have created is named by one), and the
markers are deleted after the instant completes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lakecore.storage import Storage, join

MARKERS_DIR = ".weir/markers"
IOType = Literal["create", "merge", "append"]


@dataclass(frozen=True)
class Marker:
    instant_time: str
    data_path: str   # data file path relative to the table base
    io_type: IOType


def marker_path(m: Marker) -> str:
    return join(MARKERS_DIR, m.instant_time, f"{m.data_path}.marker.{m.io_type}")


def create_marker(storage: Storage, m: Marker) -> None:
    storage.write(marker_path(m), b"")


def list_markers(storage: Storage, instant_time: str) -> list[Marker]:
    root = join(MARKERS_DIR, instant_time)
    out = []
    for f in storage.list_tree(root):
        rel = f.path[len(root) + 1:]
        data_path, sep, io_type = rel.rpartition(".marker.")
        if sep and io_type in ("create", "merge", "append"):
            out.append(Marker(instant_time, data_path, io_type))  # type: ignore[arg-type]
    return out


def delete_markers(storage: Storage, instant_time: str) -> None:
    for f in storage.list_tree(join(MARKERS_DIR, instant_time)):
        storage.delete(f.path)
