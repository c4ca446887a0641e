"""Storage on any fsspec filesystem (memory://, s3://, ...). The only module that imports fsspec.

Create-if-absent uses fsspec's `pipe_file(mode="create")`, which s3fs maps to a conditional PUT
(`If-None-Match: *`) and the memory filesystem to an exclusive open. Schemes not known to do that
atomically refuse `write_if_absent` rather than risk two writers both "winning" a create. S3 answers a
conditional PUT that races another one on the same key with 409 ConditionalRequestConflict: that is
retried (the retry then finds the key created, or creates it), never surfaced as a raw OSError.

Options given by reference (`options.OptionsRef`) are resolved when the storage is made and again in
each process it is unpickled in: a pickle holds the reference, never the values.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Literal

import fsspec
import pyarrow.fs as pafs

from lakecore.errors import AlreadyExists, AtomicCreateUnsupported, StorageError
from lakecore.storage.base import FileInfo
from lakecore.storage.failures import storage_error, translated
from lakecore.storage.options import OptionsRef

ATOMIC_CREATE = frozenset({"memory", "s3", "s3a"})
CONFLICT_RETRIES = 8  # 409s in a row before giving up; S3 resolves a racing conditional PUT in milliseconds
CONFLICT_BACKOFF_S = (0.01, 0.5)
_memory_lock = threading.Lock()  # the memory filesystem checks-then-creates; serialize within the process


class FsspecStorage:
    def __init__(self, uri: str, options: dict[str, Any] | OptionsRef | None = None) -> None:
        self._uri = uri.rstrip("/")
        self._ref = options if isinstance(options, OptionsRef) else None
        # resolved now, so a missing variable or file fails where the storage is opened
        self._options: dict[str, Any] | None = (options.resolve() if isinstance(options, OptionsRef)
                                                else dict(options or {}))
        self._fs: Any = None
        self._root = ""

    def __getstate__(self) -> dict[str, Any]:
        options = None if self._ref else self._options  # by reference: resolved again where unpickled
        return {"_uri": self._uri, "_ref": self._ref, "_options": options, "_fs": None, "_root": ""}

    @property
    def uri(self) -> str:
        return self._uri

    @property
    def fs(self) -> Any:
        if self._fs is None:
            if self._options is None:
                assert self._ref is not None
                self._options = self._ref.resolve()
            self._fs, root = fsspec.core.url_to_fs(self._uri, **self._options)
            self._root = root.rstrip("/")
        return self._fs

    @property
    def protocol(self) -> str:
        p = self.fs.protocol
        return p if isinstance(p, str) else p[0]

    def _abs(self, path: str) -> str:
        self.fs  # noqa: B018 - resolves _root
        return f"{self._root}/{path}" if path else self._root

    def _rel(self, full: str) -> str:
        full = full.lstrip("/") if not self._root.startswith("/") else full
        return full[len(self._root):].lstrip("/")

    def read(self, path: str) -> bytes:
        with translated("reading", f"{self._uri}/{path}"):
            return bytes(self.fs.cat_file(self._abs(path)))

    def write(self, path: str, data: bytes, *, durable: bool = True) -> None:  # durable at PUT
        with translated("writing", f"{self._uri}/{path}"):
            self.fs.pipe_file(self._abs(path), data)

    def write_if_absent(self, path: str, data: bytes, *, durable: bool = True) -> None:
        proto = self.protocol
        if proto not in ATOMIC_CREATE:
            raise AtomicCreateUnsupported(
                f"storage {proto!r} cannot create files atomically; use local disk, s3:// or memory://")
        full = self._abs(path)
        for attempt in range(CONFLICT_RETRIES + 1):
            try:
                if proto == "memory":
                    with _memory_lock:
                        if self.fs.exists(full):
                            raise FileExistsError(full)
                        self.fs.pipe_file(full, data)
                else:
                    self.fs.pipe_file(full, data, mode="create")
                return
            except OSError as exc:
                kind = create_failure(exc)
                if kind == "exists":
                    raise AlreadyExists(f"{path} already exists") from None
                if kind == "other":
                    raise storage_error(exc, "creating", f"{self._uri}/{path}") from exc
                if attempt == CONFLICT_RETRIES:
                    raise StorageError(
                        f"creating {self._uri}/{path} met {CONFLICT_RETRIES + 1} conflicting conditional "
                        f"writes in a row (S3 409 ConditionalRequestConflict: {exc}); retry later") from exc
            low, cap = CONFLICT_BACKOFF_S
            time.sleep(min(cap, low * 2 ** attempt) * random.uniform(0.5, 1.5))

    def sync(self, path: str) -> None:
        """Nothing to do: object stores make an object durable before the PUT returns."""

    def exists(self, path: str) -> bool:
        return bool(self.fs.exists(self._abs(path)))

    def _infos(self, entries: Any) -> list[FileInfo]:
        out = []
        for e in entries:
            if e.get("type") != "file":
                continue
            mtime = e.get("LastModified") or e.get("mtime") or e.get("created") or 0
            if hasattr(mtime, "timestamp"):
                mtime = mtime.timestamp()
            out.append(FileInfo(self._rel(e["name"]), int(e.get("size") or 0), float(mtime)))
        return out

    def list_dir(self, directory: str) -> list[FileInfo]:
        try:
            with translated("listing", f"{self._uri}/{directory}"):
                return self._infos(self.fs.ls(self._abs(directory), detail=True, refresh=True))
        except FileNotFoundError:
            return []

    def list_names(self, directory: str) -> list[str]:
        return [f.path.rsplit("/", 1)[-1] for f in self.list_dir(directory)]

    def list_tree(self, directory: str) -> list[FileInfo]:
        try:
            with translated("listing", f"{self._uri}/{directory}"):
                found = self.fs.find(self._abs(directory), detail=True)
        except FileNotFoundError:
            return []
        return self._infos(found.values())

    def delete(self, path: str) -> None:
        try:
            with translated("deleting", f"{self._uri}/{path}"):
                self.fs.rm_file(self._abs(path))
        except FileNotFoundError:
            pass

    def arrow(self) -> tuple[pafs.FileSystem, str]:
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs)), self._abs("")


def create_failure(exc: BaseException) -> Literal["exists", "conflict", "other"]:
    """Why a create-if-absent failed: the file exists (412 PreconditionFailed, or the filesystem's own
    FileExistsError), a conditional write on the same key was in progress (409
    ConditionalRequestConflict: retry), or anything else. Looks through s3fs's translation to the
    botocore error it came from (`__cause__`, whose `response` holds the S3 error code and status)."""
    if isinstance(exc, FileExistsError):
        return "exists"
    seen: BaseException | None = exc
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            error = response.get("Error") or {}
            code = str(error.get("Code", ""))
            status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            if code in ("ConditionalRequestConflict", "OperationAborted", "409") or status == 409:
                return "conflict"
            if code == "PreconditionFailed" or status == 412:
                return "exists"
        seen = seen.__cause__ or seen.__context__
    text = str(exc)
    if "ConditionalRequestConflict" in text:
        return "conflict"
    if "PreconditionFailed" in text or "412" in text:
        return "exists"
    return "other"
