"""kill -9 after every storage call and every SQL statement or commit of a publish through pyiceberg's
SQL catalog (SQLite), with keep=1 so the publish expires the snapshot the catalog shows: the catalog's
table then reads the previous snapshot or the new one, never a snapshot whose files are gone, and the
next publish moves it to the new one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog

from lakecore import Table
from lakecore.concurrency import InProcessLock
from lakecore.config import LockSpec
from lakecore.publish import CatalogRef
from tests.lakecore.publish import readers
from tests.lakecore.publish.publish_crash import sql_catalog

pytestmark = [pytest.mark.crash, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def rows(ids: list[int], ts: int) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "v": [f"v{i}.{ts}" for i in ids]}, schema=SCHEMA)


def table(uri: str) -> Table:
    return Table.open(uri, lock=InProcessLock(uri))


def prepare(directory: Path) -> tuple[str, CatalogRef]:
    """A table published twice through the catalog (keep=1), then changed: the publish to kill."""
    uri = str(directory / "t")
    Table.create(uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2,
                 lock=LockSpec("in_process"))
    ref = sql_catalog(str(directory / "catalog.db"))
    t = table(uri)
    t.upsert(rows(list(range(20)), 1))
    t.publish("iceberg", keep=1, catalog=ref)
    t.upsert(rows([1, 2, 30], 2))
    t.publish("iceberg", keep=1, catalog=ref)
    t.upsert(rows([5, 25], 3))
    t.delete(pa.table({"id": [3, 4]}))
    return uri, ref


def through(ref: CatalogRef) -> pa.Table:
    catalog = load_catalog(ref.name, **dict(ref.properties))
    return readers.normalized(catalog.load_table(ref.table).scan().to_arrow())


def test_a_publish_killed_anywhere_leaves_the_catalog_readable_and_is_repaired(tmp_path):
    uri, ref = prepare(tmp_path / "dry")
    before = through(ref)
    after = readers.expected(table(uri).read(), "iceberg")
    # the calls of the publish, counted in a child (the patch of the SQL sessions is process-wide)
    probe = subprocess.run([sys.executable, "-c", COUNT, uri, ref.properties["uri"]], cwd=ROOT,
                           capture_output=True, text=True, timeout=120, env=_env())
    assert probe.returncode == 0, probe.stderr[-2000:]
    total = int(probe.stdout.split()[-1])
    assert total >= 10

    for nth in range(1, total + 1):
        uri, ref = prepare(tmp_path / f"kill-{nth}")  # built there: Iceberg metadata names absolute paths
        proc = subprocess.run([sys.executable, "-m", "tests.lakecore.publish.publish_crash", uri, "iceberg",
                               "1", str(nth), ref.properties["uri"].removeprefix("sqlite:///")], cwd=ROOT,
                              capture_output=True, timeout=120, env=_env())
        assert proc.returncode == -signal.SIGKILL, (nth, proc.returncode, proc.stderr.decode()[-2000:])
        try:
            seen = through(ref)
        except Exception as error:  # a metadata file or manifest the catalog names is gone
            raise AssertionError(f"kill at call {nth} of {total}: the catalog's table does not read: "
                                 f"{type(error).__name__}: {error}") from error
        readers.assert_before_or_after(seen, before, after, ["id"],
                                       reader=f"the catalog after a kill at call {nth}")
        done = table(uri).publish("iceberg", keep=1, catalog=ref)
        assert "lake.events" in done.catalog
        readers.assert_same(through(ref), after, ["id"], reader=f"the catalog republished after call {nth}")


COUNT = """
import sys
from lakecore import Table
from lakecore.concurrency import InProcessLock
from tests.lakecore.publish.publish_crash import count_calls, sql_catalog
uri, db = sys.argv[1], sys.argv[2].removeprefix("sqlite:///")
t = Table.open(uri, lock=InProcessLock(uri))
calls = []
count_calls(t.storage, calls.append, sql=True)
t.publish("iceberg", keep=1, catalog=sql_catalog(db))
print(len(calls))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT}/operator"}

