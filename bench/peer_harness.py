"""Runs the shared peers harness (../shared/bench/peers/bench.py) with lakecore as one more peer.

    python bench/peer_harness.py PEER OUT.jsonl [bench.py options]

PEER is `lakecore`, `lakecore-CODEC` (`lakecore-lz4`: the table's Parquet codec) or any peer the
shared harness knows (floor, deltalake, lance, pyiceberg). The harness measures write / read /
upsert / read, RSS and verifies the result the same way for all.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import PEERS

from lakecore import Table


class LakecorePeer:
    """Merge-on-read, event-time ordering on `ts`, bucket index with 4 buckets, zstd (the default) or
    the codec the peer's name gives (`lakecore-lz4`)."""

    def __init__(self, compression: str = "zstd") -> None:
        self.name = "lakecore" if compression == "zstd" else f"lakecore-{compression}"
        self.compression = compression

    def create(self, path: str, tbl: Any, partition_by: Any = None) -> None:
        Table.create(path, schema=tbl.schema, record_key="key", ordering_field="ts", buckets=4,
                     partition_fields=partition_by or (),
                     compression=self.compression).bulk_insert(tbl)

    def append(self, path: str, tbl: Any) -> None:
        Table.open(path).insert(tbl)

    def upsert(self, path: str, tbl: Any, part: Any = None) -> Any:
        return Table.open(path).upsert(tbl).stats[:1]

    def read(self, path: str) -> Any:
        return Table.open(path).read()


def _load(name: str, file: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, os.path.join(PEERS, file))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    sys.path.insert(0, PEERS)
    shared = _load("shared_peers", "peers.py")
    facade = types.ModuleType("peers")
    facade.get = lambda name: (  # type: ignore[attr-defined]
        LakecorePeer(name.partition("-")[2] or "zstd") if name.startswith("lakecore")
        else shared.get(name))
    sys.modules["peers"] = facade
    harness = _load("peer_bench", "bench.py")
    sys.argv = [os.path.join(PEERS, "bench.py"), *sys.argv[1:]]
    harness.main()


if __name__ == "__main__":
    main()
