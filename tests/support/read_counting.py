"""A local table storage that counts what is read of its data files: the files opened through the Arrow
filesystem (Parquet footers and pages) and the bytes read from them. For tests and benchmarks that
show a read or a publish skips files (no mocks: the real LocalStorage and Arrow's local filesystem do
the I/O; only the counting is added)."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from lakecore.storage.local import LocalStorage


class _Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.opened: Counter[str] = Counter()
        self.bytes = 0

    def add(self, n: int) -> None:
        with self.lock:
            self.bytes += n


class _CountingFile:
    """A file object over an Arrow input file that adds the bytes each read returns."""

    def __init__(self, inner: pa.NativeFile, counts: _Counts) -> None:
        self._inner, self._counts = inner, counts
        self.closed = False

    def read(self, n: int = -1) -> bytes:
        data = self._inner.read() if n is None or n < 0 else self._inner.read(n)
        self._counts.add(len(data))
        return bytes(data)

    def seek(self, pos: int, whence: int = 0) -> int:
        return int(self._inner.seek(pos, whence))

    def tell(self) -> int:
        return int(self._inner.tell())

    def size(self) -> int:
        return int(self._inner.size())

    def close(self) -> None:
        self.closed = True
        self._inner.close()

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False


class _Handler(pafs.FileSystemHandler):
    def __init__(self, counts: _Counts) -> None:
        self._fs = pafs.LocalFileSystem()
        self._counts = counts

    def __eq__(self, other: Any) -> bool:
        return self is other

    def __ne__(self, other: Any) -> bool:
        return self is not other

    def get_type_name(self) -> str:
        return "counting-local"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: Any) -> Any:
        return self._fs.get_file_info(paths)

    def get_file_info_selector(self, selector: Any) -> Any:
        return self._fs.get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self._fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self._fs.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self._fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise OSError("not for a test's table")

    def delete_file(self, path: str) -> None:
        self._fs.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self._fs.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self._fs.copy_file(src, dest)

    def open_input_stream(self, path: str) -> Any:
        return self.open_input_file(path)

    def open_input_file(self, path: str) -> Any:
        with self._counts.lock:
            self._counts.opened[path] += 1
        return pa.PythonFile(_CountingFile(self._fs.open_input_file(path), self._counts), mode="r")

    def open_output_stream(self, path: str, metadata: Any) -> Any:
        return self._fs.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path: str, metadata: Any) -> Any:
        return self._fs.open_append_stream(path, metadata=metadata)


class CountingStorage(LocalStorage):
    """LocalStorage whose Arrow filesystem counts data-file opens and bytes read (`reset` to start
    over). Pickles as a plain LocalStorage would (the counts stay in this process)."""

    def __init__(self, root: str, *, fsync: bool | None = False) -> None:
        super().__init__(root, fsync=fsync)
        self._counts = _Counts()
        self._arrow = pafs.PyFileSystem(_Handler(self._counts))

    def __reduce__(self) -> Any:
        plain = LocalStorage(self._root, fsync=self.fsync)
        return LocalStorage, (self._root,), plain.__getstate__()

    def arrow(self) -> tuple[pafs.FileSystem, str]:
        return self._arrow, self._root

    def reset(self) -> None:
        with self._counts.lock:
            self._counts.opened.clear()
            self._counts.bytes = 0

    @property
    def bytes_read(self) -> int:
        return self._counts.bytes

    @property
    def opened(self) -> list[str]:
        """Paths (relative to the table base) of the files opened through the Arrow filesystem."""
        prefix = self._root.rstrip("/") + "/"
        return sorted(p[len(prefix):] if p.startswith(prefix) else p for p in self._counts.opened)
