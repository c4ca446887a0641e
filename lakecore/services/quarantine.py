"""`.weir/quarantine/`: where `weir table repair` keeps the metadata files it moves aside or replaces.

Nothing reads it; a file there is named `<time>-<its table path with / as __>`. Copies are made with
create-if-absent, so two repairs never overwrite each other's copies.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable

from lakecore.errors import AlreadyExists
from lakecore.storage import Storage
from lakecore.timeline import now_ms

QUARANTINE_DIR = ".weir/quarantine"
Clock = Callable[[], int]
log = logging.getLogger(__name__)


def keep_copy(storage: Storage, path: str, clock: Clock = now_ms) -> str:
    """Copy a file into .weir/quarantine/ (it stays where it is); returns the copy's path."""
    dest = f"{QUARANTINE_DIR}/{clock()}-{path.replace('/', '__')}"
    data = storage.read(path)
    try:
        storage.write_if_absent(dest, data)
    except AlreadyExists:
        dest = f"{dest}.{uuid.uuid4().hex[:8]}"
        storage.write_if_absent(dest, data)
    return dest


def quarantine(storage: Storage, path: str, clock: Clock = now_ms) -> str:
    """Move a file into .weir/quarantine/ (copy, then delete: works on every storage); returns where."""
    dest = keep_copy(storage, path, clock)
    storage.delete(path)
    log.info("quarantined %s/%s as %s", storage.uri, path, dest)
    return dest
