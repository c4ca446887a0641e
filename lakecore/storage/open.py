"""Picks the storage implementation for a URI."""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlparse

from lakecore.storage.base import Storage
from lakecore.storage.fsspec_store import FsspecStorage
from lakecore.storage.local import LocalStorage


def open_storage(uri: str, options: dict[str, Any] | None = None) -> Storage:
    """Local paths and file:// go through the os module; every other scheme through fsspec. Local
    storage takes one option, `fsync` (default: on unless WEIR_FSYNC=off; see storage.local)."""
    scheme = urlparse(uri).scheme
    if scheme == "file":
        return LocalStorage(urlparse(uri).path, fsync=(options or {}).get("fsync"))
    if scheme == "" or (len(scheme) == 1 and os.name == "nt"):
        return LocalStorage(uri, fsync=(options or {}).get("fsync"))
    return FsspecStorage(uri, options)
