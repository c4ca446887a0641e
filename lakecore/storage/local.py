"""Local-disk storage through the os module (faster than fsspec and truly atomic on POSIX).

Atomicity: `write` writes a temp file and renames it over the target; `write_if_absent` writes a temp
file and hard-links it to the target, which fails if the target exists, so a reader sees either no
file or the whole file, and exactly one of several racing creators wins.

Durability: the temp file is fsynced before it is linked or renamed into place and the directory
after, and a directory this storage creates is made durable in its parent, so a completed instant
(the commit point) survives a power loss whole. Writes with `durable=False` (markers, heartbeats,
empty requested/inflight files: nothing reads them after a power loss, when every writer
is dead) skip both syncs and stay atomic. `sync` does the same for files written through
`arrow()` (data files), which the write path calls before the commit point. `WEIR_FSYNC=off` (or
`LocalStorage(root, fsync=False)`) turns syncing off: for benchmarks and tables on tmpfs only.

Failures: an OSError (a full disk, a refusal, an I/O error) leaves no temp file behind and is raised
as a lakecore StorageError (`failures.translated`); absence stays FileNotFoundError. Directories:
`remove_empty_dirs` removes the ones a table no longer needs (per-instant marker dirs), which only a
file system has: object stores have no directories to leave behind.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Callable

import pyarrow.fs as pafs

from lakecore.errors import AlreadyExists
from lakecore.storage.base import FileInfo
from lakecore.storage.failures import translated

TMP_MARK = ".weirtmp-"
FSYNC_ENV = "WEIR_FSYNC"


def fsync_default() -> bool:
    """Sync unless WEIR_FSYNC says off/0/false/no."""
    return os.environ.get(FSYNC_ENV, "on").strip().lower() not in ("off", "0", "false", "no")


class LocalStorage:
    # Every change is a system call on this machine: once a process has ended, none of its writes is
    # still on its way (the storage lock breaks a dead local holder at once only on such storage; an
    # object store may still apply a request a killed process had already sent).
    writes_may_land_after_exit = False

    def __init__(self, root: str, *, fsync: bool | None = None) -> None:
        self._root = os.path.abspath(root)
        self._fsync = fsync_default() if fsync is None else fsync
        self._durable_dirs: set[str] = set()  # directories known to be durable in their parent

    def __getstate__(self) -> dict[str, object]:
        return {"_root": self._root, "_fsync": self._fsync, "_durable_dirs": set()}

    @property
    def uri(self) -> str:
        return self._root

    @property
    def fsync(self) -> bool:
        return self._fsync

    def _abs(self, path: str) -> str:
        return os.path.join(self._root, path) if path else self._root

    # -- durability ------------------------------------------------------------------------------

    def _sync_fd_of(self, path: str, flags: int) -> None:
        fd = os.open(path, flags)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _sync_dir(self, directory: str) -> None:
        if self._fsync:
            self._sync_fd_of(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))

    def _ensure_dir(self, directory: str, durable: bool = True) -> None:
        """Create `directory` (and missing parents); with syncing, make each directory from the root
        down durable in its parent (once per process: a synced entry stays durable)."""
        os.makedirs(directory, exist_ok=True)
        if not (durable and self._fsync) or directory in self._durable_dirs:
            return
        chain = []
        d = directory
        while (d == self._root or d.startswith(self._root + os.sep)) and d not in self._durable_dirs:
            chain.append(d)
            d = os.path.dirname(d)
        for new in reversed(chain):
            self._sync_dir(os.path.dirname(new))
            self._durable_dirs.add(new)

    def sync(self, path: str) -> None:
        """Make a file written through `arrow()` durable: fsync it, its directory entry and any
        directory above it (up to the root) not yet known durable in this process."""
        if not self._fsync:
            return
        target = self._abs(path)
        with translated("syncing", target):
            self._sync_fd_of(target, os.O_RDONLY)
            directory = os.path.dirname(target)
            self._ensure_dir(directory)
            self._sync_dir(directory)

    # -- reads and writes ------------------------------------------------------------------------

    def _temp_beside(self, target: str, data: bytes, durable: bool) -> str:
        return self._temp_in(os.path.dirname(target), data, durable)

    def _temp_in(self, directory: str, data: bytes, durable: bool) -> str:
        self._ensure_dir(directory, durable)
        tmp = f"{directory}/{TMP_MARK}{uuid.uuid4().hex}"
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
                if durable and self._fsync and data:  # an empty file has no data: its entry is synced after
                    fh.flush()
                    os.fsync(fh.fileno())
        except BaseException:
            _unlink(tmp)  # a full disk leaves no partial temp file behind
            raise
        return tmp

    def read(self, path: str) -> bytes:
        with translated("reading", self._abs(path)), open(self._abs(path), "rb") as fh:
            return fh.read()

    def write(self, path: str, data: bytes, *, durable: bool = True) -> None:
        target = self._abs(path)
        with translated("writing", target):
            tmp = self._temp_beside(target, data, durable)
            try:
                os.replace(tmp, target)
            except BaseException:
                _unlink(tmp)
                raise
            if durable:
                self._sync_dir(os.path.dirname(target))

    def write_if_absent(self, path: str, data: bytes, *, durable: bool = True) -> None:
        target = self._abs(path)
        with translated("creating", target):
            tmp = self._temp_beside(target, data, durable)
            try:
                os.link(tmp, target)
            except FileExistsError:
                raise AlreadyExists(f"{path} already exists") from None
            finally:
                _unlink(tmp)
            if durable:
                self._sync_dir(os.path.dirname(target))

    def stage(self, directory: str, data: bytes) -> _Staged:
        """A durable temp file in `directory` holding `data`, published by hard-linking it (base.stage)."""
        with translated("staging a file in", self._abs(directory)):
            return _Staged(self, self._temp_in(self._abs(directory), data, durable=True))

    def exists(self, path: str) -> bool:
        return os.path.exists(self._abs(path))

    def list_dir(self, directory: str) -> list[FileInfo]:
        base = self._abs(directory)
        out = []
        try:
            with translated("listing", base):
                entries = os.scandir(base)
        except (FileNotFoundError, NotADirectoryError):
            return []
        with entries:
            for e in entries:
                if TMP_MARK in e.name:
                    continue
                try:  # a file may vanish between the listing and its stat (rollbacks delete files)
                    if not e.is_file():
                        continue
                    st = e.stat()
                except FileNotFoundError:
                    continue
                else:
                    out.append(FileInfo(f"{directory.strip('/')}/{e.name}".lstrip("/"), st.st_size,
                                        st.st_mtime))
        return out

    def list_names(self, directory: str) -> list[str]:
        try:
            with translated("listing", self._abs(directory)), os.scandir(self._abs(directory)) as entries:
                # d_type comes with the directory entry: no stat per file
                return [e.name for e in entries
                        if TMP_MARK not in e.name and e.is_file(follow_symlinks=False)]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def list_tree(self, directory: str) -> list[FileInfo]:
        out = []
        base = self._abs(directory)
        for dirpath, _, names in os.walk(base):
            rel = os.path.relpath(dirpath, self._root)
            for n in names:
                if TMP_MARK in n:
                    continue
                try:
                    st = os.stat(os.path.join(dirpath, n))
                except FileNotFoundError:
                    continue
                path = n if rel == "." else f"{rel}/{n}"
                out.append(FileInfo(path, st.st_size, st.st_mtime))
        return out

    def delete(self, path: str) -> None:
        with translated("deleting", self._abs(path)):
            _unlink(self._abs(path))

    def remove_empty_dirs(self, directory: str, keep: Callable[[str], bool] = lambda name: False) -> int:
        """Remove the empty directories below `directory` (bottom-up; `directory` itself stays), except
        those under a child of it whose name `keep` protects. A directory that gains a file meanwhile
        stays. Returns how many were removed."""
        base = self._abs(directory)
        try:
            with os.scandir(base) as entries:
                children = [e.name for e in entries if e.is_dir(follow_symlinks=False)]
        except (FileNotFoundError, NotADirectoryError):
            return 0
        removed = 0
        with translated("removing empty directories in", base):
            for name in (n for n in children if not keep(n)):
                for dirpath, _, _ in os.walk(os.path.join(base, name), topdown=False):
                    try:
                        os.rmdir(dirpath)
                        removed += 1
                    except OSError as exc:  # not empty (a file, or a directory that kept one), or gone
                        if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                            raise
        return removed

    def arrow(self) -> tuple[pafs.FileSystem, str]:
        return pafs.LocalFileSystem(), self._root


class _Staged:
    def __init__(self, storage: LocalStorage, tmp: str) -> None:
        self._storage, self._tmp = storage, tmp
        self._published: str | None = None

    def publish(self, path: str, *, sync: bool = True) -> None:
        if self._published is not None:
            raise AlreadyExists(f"staged bytes were already published as {self._published}")
        target = self._storage._abs(path)
        if os.path.dirname(target) != os.path.dirname(self._tmp):
            raise ValueError(f"{path} is not in the directory its bytes were staged in")
        try:
            with translated("creating", target):
                os.link(self._tmp, target)
        except FileExistsError:
            raise AlreadyExists(f"{path} already exists") from None
        self._published = target
        self.discard()
        if sync:
            self.sync()

    def sync(self) -> None:
        if self._published is not None:
            with translated("syncing", self._published):
                self._storage._sync_dir(os.path.dirname(self._published))

    def discard(self) -> None:
        _unlink(self._tmp)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
