"""kill -9 after every storage call of a publish (a first one, an incremental one that expires older
snapshots, both for Iceberg v2 and v3, and a Delta one that checkpoints and drops old versions):
readers then see the previous published snapshot or the new one, never a broken one, and the next
publish completes, after which they see Table.read()."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.concurrency import InProcessLock
from lakecore.config import LockSpec
from lakecore.services.published import read_pins
from tests.lakecore.publish import readers
from tests.lakecore.publish.publish_crash import count_calls, publish_options

pytestmark = [pytest.mark.crash, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def rows(ids: list[int], ts: int) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "v": [f"v{i}.{ts}" for i in ids]}, schema=SCHEMA)


def shown(uri: str, target: str) -> pa.Table | None:
    """What the target's reader sees (None: nothing published yet)."""
    iceberg = target.startswith("iceberg")
    reader = readers.iceberg if iceberg else readers.delta
    if not (Path(uri) / ("metadata/version-hint.text" if iceberg else "_delta_log")).exists():
        return None
    return reader(uri)


def table(uri: str) -> Table:
    return Table.open(uri, lock=InProcessLock(uri))


def prepare(uri: str, target: str, scenario: str) -> int:
    """The table before the publish that gets killed; returns its `keep`."""
    t = Table.create(uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2,
                     lock=LockSpec("in_process"))
    t = table(uri)
    t.upsert(rows(list(range(20)), 1))
    if scenario == "first":
        t.delete(pa.table({"id": [3]}))
        return 10
    versions = 10 if scenario == "checkpoint" else 2
    for i in range(versions):
        t.upsert(rows([i], 2 + i))
        publish(t, target)
    t.upsert(rows([5, 25], 50))
    t.delete(pa.table({"id": [1, 2]}))
    return 1


def publish(t: Table, target: str, **kw):
    fmt, options = publish_options(target)
    return t.publish(fmt, **kw, **options)


@pytest.mark.parametrize("target,scenario", [("iceberg", "first"), ("iceberg", "expiring"),
                                             ("iceberg-v3", "first"), ("iceberg-v3", "expiring"),
                                             ("delta", "first"), ("delta", "expiring"),
                                             ("delta", "checkpoint")])
def test_a_publish_killed_anywhere_is_consistent_and_repaired(tmp_path, target, scenario):
    dry = str(tmp_path / "dry")
    keep = prepare(dry, target, scenario)
    before = shown(dry, target)
    after = readers.expected(table(dry).read(), publish_options(target)[0])
    calls = []
    t = table(dry)
    count_calls(t.storage, calls.append)
    publish(t, target, keep=keep)
    assert len(calls) >= 3

    for nth in range(1, len(calls) + 1):
        uri = str(tmp_path / f"kill-{nth}")  # built there: Iceberg metadata names absolute paths
        prepare(uri, target, scenario)
        proc = subprocess.run([sys.executable, "-m", "tests.lakecore.publish.publish_crash", uri, target,
                               str(keep), str(nth)], cwd=ROOT, capture_output=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT}/operator"})
        assert proc.returncode == -signal.SIGKILL, (nth, proc.returncode, proc.stderr.decode()[-2000:])
        seen = shown(uri, target)
        if seen is None:
            assert before is None, f"kill after call {nth}: the published table vanished"
        else:
            readers.assert_before_or_after(seen, before, after, ["id"],
                                           reader=f"{target} after a kill at call {nth}")
        done = publish(table(uri), target, keep=keep)
        readers.assert_same(shown(uri, target), after, ["id"],
                            reader=f"{target} republished after a kill at call {nth}")
        assert done.snapshot.completion in read_pins(table(uri).storage, publish_options(target)[0])

