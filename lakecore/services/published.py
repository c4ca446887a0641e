"""Published snapshots clean must keep readable: per publish target (Iceberg, Delta), the completion
times of the Weir instants its retained snapshots show.

`lakecore.publish` writes `.weir/publish/<target>.json` (`{"points": [...]}`), a superset before it
commits a snapshot and the exact retained set after, under the table lock; clean reads every target's
points under the same lock when it plans and keeps the files of the view as of each one. A pin file
that does not parse stops clean (CorruptMetadata) rather than let it delete a file a reader may need.
Owns only this small record; the publishing itself lives above the services layer.
"""

from __future__ import annotations

import json

from lakecore.errors import CorruptMetadata
from lakecore.storage import Storage

PUBLISH_DIR = ".weir/publish"


def pins_path(target: str) -> str:
    return f"{PUBLISH_DIR}/{target}.json"


def read_pins(storage: Storage, target: str) -> tuple[str, ...]:
    """The completion times `target`'s retained snapshots show (none when it never published)."""
    path = pins_path(target)
    try:
        raw = storage.read(path)
    except (FileNotFoundError, NotADirectoryError):
        return ()
    try:
        points = json.loads(raw)["points"]
        if not isinstance(points, list) or not all(isinstance(p, str) for p in points):
            raise ValueError("points must be a list of instant times")
        return tuple(points)
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise CorruptMetadata(
            f"{storage.uri}/{path} (the instants published snapshots show) does not parse ({exc!r}); clean "
            f"refuses to run without it: publish the table again (`weir table publish {storage.uri} --format "
            f"{target}`), which rewrites it") from exc


def write_pins(storage: Storage, target: str, points: tuple[str, ...]) -> None:
    storage.write(pins_path(target), json.dumps({"points": sorted(set(points))}).encode())


def pinned_points(storage: Storage) -> tuple[str, ...]:
    """Every target's pinned completion times, sorted."""
    names = [n for n in storage.list_names(PUBLISH_DIR) if n.endswith(".json")]
    return tuple(sorted({p for n in names for p in read_pins(storage, n[: -len(".json")])}))
