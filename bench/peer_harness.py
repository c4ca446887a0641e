"""Runs the shared peers harness (../shared/bench/peers/bench.py) with lakecore as one more peer.

    python bench/peer_harness.py PEER OUT.jsonl [bench.py options]

PEER is `lakecore`, `lakecore-CODEC` (`lakecore-lz4`: the table's Parquet codec) or any peer the
shared harness knows (floor, deltalake, lance, pyiceberg). The harness measures write / read /
upsert / read, RSS and verifies the result the same way for all. This wrapper adds to the record it
writes each phase's CPU time in the process (`write_user_s`, `write_sys_s`, ... `read2_sys_s`) and
its minor page faults: on a VM whose fresh memory is costly, a phase's wall time depends on what the
phases before it left resident (docs/benchmarks.md, issue 27), its user time much less.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
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


PHASES = {"create": ["write"], "read": ["read1", "read2"], "upsert": ["upsert"]}


class Metered:
    """A peer whose create / read / upsert calls record their CPU time (user, system) and minor page
    faults under the harness's phase names (the first read is read1, the second read2)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "floor")
        self.cpu: dict[str, float] = {}
        self._calls: dict[str, int] = {}

    def __getattr__(self, attr: str) -> Any:
        fn = getattr(self.inner, attr)
        if attr not in PHASES:
            return fn

        def metered(*args: Any, **kwargs: Any) -> Any:
            n = self._calls.get(attr, 0)
            self._calls[attr] = n + 1
            before = resource.getrusage(resource.RUSAGE_SELF)
            try:
                return fn(*args, **kwargs)
            finally:
                after = resource.getrusage(resource.RUSAGE_SELF)
                phase = PHASES[attr][min(n, len(PHASES[attr]) - 1)]
                self.cpu[f"{phase}_user_s"] = round(after.ru_utime - before.ru_utime, 3)
                self.cpu[f"{phase}_sys_s"] = round(after.ru_stime - before.ru_stime, 3)
                self.cpu[f"{phase}_minflt"] = after.ru_minflt - before.ru_minflt
        return metered


def _add_to_last_record(out: str, fields: dict[str, float]) -> None:
    """The harness appended one JSON line for this run to `out`: add `fields` to it."""
    with open(out) as fh:
        lines = fh.read().splitlines()
    record = json.loads(lines[-1])
    record.update(fields)
    lines[-1] = json.dumps(record)
    with open(out, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def _load(name: str, file: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, os.path.join(PEERS, file))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    sys.path.insert(0, PEERS)
    shared = _load("shared_peers", "peers.py")
    metered: list[Metered] = []

    def meter(peer: Any) -> Metered:
        metered.append(Metered(peer))
        return metered[-1]

    facade = types.ModuleType("peers")
    facade.get = lambda name: meter(  # type: ignore[attr-defined]
        LakecorePeer(name.partition("-")[2] or "zstd") if name.startswith("lakecore")
        else shared.get(name))
    sys.modules["peers"] = facade
    harness = _load("peer_bench", "bench.py")
    floor = harness.Floor
    harness.Floor = lambda compression: meter(floor(compression))
    sys.argv = [os.path.join(PEERS, "bench.py"), *sys.argv[1:]]
    harness.main()
    if metered:
        _add_to_last_record(sys.argv[2], metered[0].cpu)


if __name__ == "__main__":
    main()
