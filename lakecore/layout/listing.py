"""Listing a table's data files by the instant their names carry (one listing of the whole table)."""

from __future__ import annotations

from lakecore.layout.file_names import is_table_path, parse_data_file_name
from lakecore.storage import FileInfo, Storage


def data_files(storage: Storage) -> dict[str, dict[str, FileInfo]]:
    """Every data file of the table (one listing), by the instant its name carries."""
    out: dict[str, dict[str, FileInfo]] = {}
    for f in storage.list_tree(""):
        if not is_table_path(f.path):
            continue
        name = parse_data_file_name(f.path.rsplit("/", 1)[-1])
        if name is not None:
            out.setdefault(name.instant_time, {})[f.path] = f
    return out
