"""Picks the storage implementation for a URI."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

from lakecore.storage.base import Storage
from lakecore.storage.local import LocalStorage
from lakecore.storage.options import OptionsRef


def open_storage(uri: str, options: dict[str, Any] | OptionsRef | None = None) -> Storage:
    """Local paths and file:// go through the os module; every other scheme through fsspec, with
    `options` as given or by reference (resolved in each process that uses the storage). Local
    storage takes one option, `fsync` (default: on unless WEIR_FSYNC=off; see storage.local)."""
    scheme = urlparse(uri).scheme
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
