"""Picks the storage implementation for a URI."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

from lakecore.errors import InvalidInput
from lakecore.storage.base import Storage
from lakecore.storage.local import LocalStorage
from lakecore.storage.options import OptionsRef

# where a table can live besides a local path: storages that create a file only if it is absent, atomically
SCHEMES = ("file", "s3", "s3a", "memory")


def location_problem(uri: str) -> str | None:
    """What is wrong with a table location (None: nothing): a scheme Weir cannot keep a table on (gs://
    and hdfs:// cannot create a file only if it is absent), or an s3 URI with no bucket (`s3:/b/x`)."""
    parsed = urlparse(uri)
    scheme = parsed.scheme
    if scheme == "" or (len(scheme) == 1 and os.name == "nt"):
        return None
    if scheme not in SCHEMES:
        return f"location {uri!r}: a table cannot live on {scheme}:// storage; use a local path, " \
            "file://, s3:// (or s3a://) or memory://"
    if scheme in ("s3", "s3a") and not parsed.netloc:
        return f"location {uri!r} names no bucket; use {scheme}://BUCKET/PATH (did you mean " \
            f"{scheme}://{parsed.path.lstrip('/')}?)"
    return None


def open_storage(uri: str, options: dict[str, Any] | OptionsRef | None = None) -> Storage:
    """Local paths and file:// go through the os module; every other scheme through fsspec, with
    `options` as given or by reference (resolved in each process that uses the storage). Local
    storage takes one option, `fsync` (default: on unless WEIR_FSYNC=off; see storage.local). A location
    no table can live at is InvalidInput (`location_problem`); a scheme's case does not matter."""
    problem = location_problem(uri)
    if problem is not None:
        raise InvalidInput(problem)
    scheme = urlparse(uri).scheme   # in lower case: S3://b/x is s3://b/x
    uri = scheme + uri[len(scheme):]
    if scheme == "file":
        return LocalStorage(urlparse(uri).path, fsync=_fsync_option(options))
    if scheme == "" or (len(scheme) == 1 and os.name == "nt"):
        return LocalStorage(uri, fsync=_fsync_option(options))
    # imported here, not at the top: a process on local paths only (weir run, tests) never needs fsspec
    from lakecore.storage.fsspec_store import FsspecStorage

    return FsspecStorage(uri, options)


def _fsync_option(options: dict[str, Any] | OptionsRef | None) -> bool | None:
    """Local storage's one option. A reference is resolved as for any storage: a file or variable it
    names that is missing, or not a JSON object, is told here (InvalidStorageOptions), not ignored
    because a local path needs no credentials."""
    if isinstance(options, OptionsRef):
        return options.resolve().get("fsync")
    return (options or {}).get("fsync")
