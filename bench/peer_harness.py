"""Runs the shared peers harness (../shared/bench/peers/bench.py) with lakecore as one more peer.

    python bench/peer_harness.py PEER OUT.jsonl [bench.py options]

PEER is `lakecore`, `lakecore-CODEC` (`lakecore-lz4`: the table's Parquet codec) or any peer the
shared harness knows (floor, deltalake, lance, pyiceberg). The harness measures write / read /
upsert / read, RSS and verifies the result the same way for all. This wrapper adds to the record it
writes each phase's CPU time in the process (`write_user_s`, `write_sys_s`, ... `read2_sys_s`) and
its minor page faults: on a VM whose fresh memory is costly, a phase's wall time depends on what the
phases before it left resident (docs/benchmarks.md, issue 27), its user time much less.

    python bench/peer_harness.py PEER OUT.jsonl --keep DIR [bench.py options]
    python bench/peer_harness.py --fresh-read PEER DIR OUT.jsonl

`--keep DIR` keeps the table as read2 found it (hard links into DIR, made when the harness deletes its
own, after its timed phases).
`--fresh-read` reads such a table in this new process, where every peer starts from the same memory
state, and adds `fresh_read_s` (and its user / system time, page faults and rows) to the last record of
OUT.jsonl: the read after the upsert measured without what the earlier phases left resident.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import shutil
import sys
import time
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
        self.read2_path: str | None = None  # the table read2 read
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
                if attr == "read" and n == 1:
                    self.read2_path = args[0]
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


def _pop_option(argv: list[str], option: str) -> str | None:
    """The value of `option` in `argv`, removed from it (the harness does not know it)."""
    if option not in argv:
        return None
    at = argv.index(option)
    value = argv[at + 1]
    del argv[at:at + 2]
    return value


def _load_harness() -> tuple[types.ModuleType, types.ModuleType]:
    """The shared peers module and the harness (bench.py), loaded without running it."""
    sys.path.insert(0, PEERS)
    shared = _load("shared_peers", "peers.py")
    return shared, _load("peer_bench", "bench.py")


def _peer(name: str, shared: types.ModuleType) -> Any:
    return LakecorePeer(name.partition("-")[2] or "zstd") if name.startswith("lakecore") else shared.get(name)


def fresh_read(name: str, path: str, out: str) -> None:
    """Read the table `path` kept at read2 (`--keep`) in this fresh process and add the figures to the
    last record of `out`."""
    shared, harness = _load_harness()
    peer = harness.Floor("zstd") if name == "floor" else _peer(name, shared)
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    table = peer.read(path)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    with open(out) as fh:
        read2_rows = json.loads(fh.read().splitlines()[-1]).get("read2_rows")
    _add_to_last_record(out, {
        "fresh_read_s": round(wall, 4), "fresh_read_user_s": round(after.ru_utime - before.ru_utime, 3),
        "fresh_read_sys_s": round(after.ru_stime - before.ru_stime, 3),
        "fresh_read_minflt": after.ru_minflt - before.ru_minflt, "fresh_read_rows": table.num_rows,
        "verify_fresh_rows_ok": table.num_rows == read2_rows})


def main() -> None:
    if sys.argv[1] == "--fresh-read":
        fresh_read(*sys.argv[2:5])
        # The figures are written: end here. A peer's library may crash while the interpreter tears
        # it down (delta-rs 1.6.6 once did, "terminate called without an active exception"), which
        # would report a read that ran and was verified as failed.
        sys.stdout.flush()
        os._exit(0)
    keep = _pop_option(sys.argv, "--keep")
    shared, harness = _load_harness()
    metered: list[Metered] = []

    def meter(peer: Any) -> Metered:
        metered.append(Metered(peer))
        return metered[-1]

    def rmtree(path: str, **kwargs: Any) -> None:
        """The harness's own deletes; the last, of read2's table, keeps a copy first (`--keep`)."""
        if keep and metered and path == metered[0].read2_path and os.path.isdir(path):
            shutil.copytree(path, keep, copy_function=os.link)
        shutil.rmtree(path, **kwargs)

    facade = types.ModuleType("peers")
    facade.get = lambda name: meter(_peer(name, shared))  # type: ignore[attr-defined]
    sys.modules["peers"] = facade
    floor = harness.Floor
    harness.Floor = lambda compression: meter(floor(compression))
    harness.shutil = types.SimpleNamespace(rmtree=rmtree)  # the only use the harness makes of it
    sys.argv = [os.path.join(PEERS, "bench.py"), *sys.argv[1:]]
    harness.main()
    if metered:
        _add_to_last_record(sys.argv[2], metered[0].cpu)


if __name__ == "__main__":
    main()
