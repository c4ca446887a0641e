"""The narrow storage protocol every other layer talks to.

Owns: `Storage` (paths relative to the table base, '/'-separated) and `FileInfo`. Implementations live
one per module (`local`, `fsspec_store`, `memory`); `open_storage` picks one by URI scheme. Nothing
above this layer knows which backend it runs on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import pyarrow.fs as pafs


@dataclass(frozen=True)
class FileInfo:
    path: str  # relative to the table base
    size: int
    mtime: float  # seconds since the epoch


@runtime_checkable
class Storage(Protocol):
    """A table's files. Picklable: tasks in other processes re-open it from its URI and options."""

    @property
    def uri(self) -> str:
        """The table base URI this storage is rooted at."""
        ...

    def read(self, path: str) -> bytes:
        """Whole file; raises FileNotFoundError when absent."""
        ...

    def write(self, path: str, data: bytes, *, durable: bool = True) -> None:
        """Create or replace the file with exactly `data` (readers never see a partial file); durable
        when it returns. `durable=False`: files nothing needs after a power loss (markers, heartbeats,
        empty pending-instant files) skip the sync; atomicity is the same."""
        ...

    def write_if_absent(self, path: str, data: bytes, *, durable: bool = True) -> None:
        """Atomically create the file with `data`; raises errors.AlreadyExists when it exists. Durable
        when it returns (a completed instant file is the commit point); `durable` as for write."""
        ...

    def sync(self, path: str) -> None:
        """Make a file written through `arrow()` durable (fsync of the file and its directory on
        local disk; nothing where a finished upload is durable)."""
        ...

    def exists(self, path: str) -> bool: ...

    def list_dir(self, directory: str) -> list[FileInfo]:
        """Files directly inside `directory` (not recursive); [] when it does not exist."""
        ...

    def list_tree(self, directory: str) -> list[FileInfo]: ...

    def list_names(self, directory: str) -> list[str]:
        """Names of the files directly inside `directory` (no sizes: cheaper); [] when absent."""
        ...

    def delete(self, path: str) -> None:
        """Remove a file; a missing file is fine."""
        ...

    def arrow(self) -> tuple[pafs.FileSystem, str]:
        """(pyarrow filesystem, root path inside it) for Parquet reads and writes."""
        ...


class Staged(Protocol):
    """A file's bytes written ahead of its name (`stage`): invisible until `publish` creates it."""

    def publish(self, path: str, *, sync: bool = True) -> None:
        """Atomically create `path` with the staged bytes (errors.AlreadyExists when it exists).
        `sync=False` leaves making the new directory entry durable to `sync()`: a caller that must
        keep a critical section short publishes inside it and syncs after."""
        ...

    def sync(self) -> None:
        """Make the published entry durable (nothing to do where a finished create is durable)."""
        ...

    def discard(self) -> None:
        """Drop staged bytes that were not published (a published file stays)."""
        ...


class _WriteOnPublish:
    """Staging for stores without a cheap way to write ahead: the whole create happens at publish."""

    def __init__(self, storage: Storage, data: bytes) -> None:
        self._storage, self._data = storage, data

    def publish(self, path: str, *, sync: bool = True) -> None:
        self._storage.write_if_absent(path, self._data)

    def sync(self) -> None:
        pass

    def discard(self) -> None:
        pass


def stage(storage: Storage, directory: str, data: bytes) -> Staged:
    """`data` written (and made durable) ahead, to be published under a name inside `directory` chosen
    later: local disk writes and syncs a hidden temp file there now, so publishing is a link; other
    stores create the whole file when it is published."""
    ahead = getattr(storage, "stage", None)
    return ahead(directory, data) if ahead is not None else _WriteOnPublish(storage, data)


def remove_empty_dirs(storage: Storage, directory: str, keep: Callable[[str], bool] = lambda name: False
                      ) -> int:
    """Remove the empty directories below `directory` except under the children `keep` protects, where
    the storage has directories (local disk: `LocalStorage.remove_empty_dirs`); object stores have none
    to leave behind, so elsewhere this does nothing. Returns how many were removed."""
    remove = getattr(storage, "remove_empty_dirs", None)
    return int(remove(directory, keep)) if remove is not None else 0


def join(*parts: str) -> str:
    return "/".join(p.strip("/") for p in parts if p and p.strip("/"))
