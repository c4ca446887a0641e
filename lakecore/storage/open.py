"""Picks the storage implementation for a URI."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

from lakecore.storage.base import Storage
from lakecore.storage.fsspec_store import FsspecStorage
from lakecore.storage.local import LocalStorage
from lakecore.storage.options import OptionsRef


def open_storage(uri: str, options: dict[str, Any] | OptionsRef | None = None) -> Storage:
    """Local paths and file:// go through the os module; every other scheme through fsspec, with
    `options` as given or by reference (resolved in each process that uses the storage)."""
    scheme = urlparse(uri).scheme
    if scheme == "file":
        return LocalStorage(urlparse(uri).path)
    if scheme == "" or (len(scheme) == 1 and os.name == "nt"):
        return LocalStorage(uri)
    return FsspecStorage(uri, options)
