"""Tables as older lakecore versions left them, for compatibility tests and before/after benches."""

from __future__ import annotations

import json

from lakecore import Table
from lakecore.table.table import CONFIG_PATH


def as_format_1(t: Table) -> Table:
    """Rewrite table.json as a format-1 lakecore wrote it (no bucket_hash: the weir_v1 hash), reopened."""
    obj = json.loads(t.storage.read(CONFIG_PATH))
    obj["format_version"] = 1
    del obj["bucket_hash"]
    t.storage.write(CONFIG_PATH, json.dumps(obj).encode())
    return Table.open(t.uri)
