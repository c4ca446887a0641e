"""Storage I/O failures as lakecore errors: the one place that decides what an OSError of a storage
operation means (a full disk or quota, a refusal, anything else) and words it with what to do.

Every backend wraps its operations in `translated`, and so do the Parquet reads and writes that go
through a storage's Arrow filesystem. Absence and existence (FileNotFoundError, NotADirectoryError,
IsADirectoryError, FileExistsError) pass through unchanged: callers ask those questions on purpose
(the protocol's `read` raises FileNotFoundError). Pure, apart from the context manager.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager

from lakecore.errors import StorageAccessDenied, StorageError, StorageFull

PASS_THROUGH = (FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError)
FULL = frozenset(c for c in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if c is not None)
DENIED = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


def storage_error(exc: OSError, what: str, where: str) -> StorageError:
    """The lakecore error for `exc`, raised while `what` (e.g. "writing") `where` (a path or URI)."""
    code = exc.errno
    reason = os.strerror(code) if code is not None else str(exc)
    if code in FULL:
        return StorageFull(f"{what} {where} failed: {reason}; free space on the storage (or raise the "
                           "quota), then retry: what failed is not visible and its partial files were "
                           "removed")
    if code in DENIED or isinstance(exc, PermissionError):
        return StorageAccessDenied(f"permission denied: {what} {where} ({reason}); give this user access to "
                                   "it (read for reads, write for writes and table services) or run as a "
                                   "user that has it")
    if code is None and ("NoSuchBucket" in reason or "bucket does not exist" in reason.lower()):
        return StorageError(f"{what} {where} failed: its bucket does not exist; create the bucket, or fix "
                            "the location (the bucket's name is its first part)")
    return StorageError(f"{what} {where} failed: {reason}; check the disk or the connection to the storage, "
                        "then retry")


@contextmanager
def translated(what: str, where: str) -> Iterator[None]:
    """Raise OSErrors from the block (other than absence/existence) as `storage_error`s."""
    try:
        yield
    except PASS_THROUGH:
        raise
    except OSError as exc:
        raise storage_error(exc, what, where) from exc
