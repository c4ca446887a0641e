"""Local-disk storage through the os module (faster than fsspec and truly atomic on POSIX).

Atomicity: `write` writes a temp file and renames it over the target; `write_if_absent` writes a temp
file and hard-links it to the target, which fails if the target exists, so a reader sees either no
file or the whole file, and exactly one of several racing creators wins.
"""

from __future__ import annotations

import os
import uuid

import pyarrow.fs as pafs

from lakecore.errors import AlreadyExists
from lakecore.storage.base import FileInfo

TMP_MARK = ".weirtmp-"


class LocalStorage:
    def __init__(self, root: str) -> None:
        self._root = os.path.abspath(root)

    @property
    def uri(self) -> str:
        return self._root

    def _abs(self, path: str) -> str:
        return os.path.join(self._root, path) if path else self._root

    def _temp_beside(self, target: str, data: bytes) -> str:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = f"{os.path.dirname(target)}/{TMP_MARK}{uuid.uuid4().hex}"
        with open(tmp, "wb") as fh:
            fh.write(data)
        return tmp

    def read(self, path: str) -> bytes:
        with open(self._abs(path), "rb") as fh:
            return fh.read()

    def write(self, path: str, data: bytes) -> None:
        target = self._abs(path)
        tmp = self._temp_beside(target, data)
        os.replace(tmp, target)

    def write_if_absent(self, path: str, data: bytes) -> None:
        target = self._abs(path)
        tmp = self._temp_beside(target, data)
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise AlreadyExists(f"{path} already exists") from None
        finally:
            os.unlink(tmp)

    def exists(self, path: str) -> bool:
        return os.path.exists(self._abs(path))

    def list_dir(self, directory: str) -> list[FileInfo]:
        base = self._abs(directory)
        out = []
        try:
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
            with os.scandir(self._abs(directory)) as entries:
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
        try:
            os.unlink(self._abs(path))
        except FileNotFoundError:
            pass

    def arrow(self) -> tuple[pafs.FileSystem, str]:
        return pafs.LocalFileSystem(), self._root
