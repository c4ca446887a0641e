"""A property over random write histories (writes of every kind, deletes by key and by event time,
overwrites, compaction, clustering, clean, archival, added columns; both table types, both one-group
merge modes, partitioned or not): after every step, publishing both targets and reading them with
pyiceberg, deltalake's DataFusion reader and DuckDB (its iceberg and delta extensions, in its own
process: `make readers`) gives exactly `Table.read()`; and so do pyiceberg and DuckDB reading the
same histories published as Iceberg v3 (deletion vectors). Bounded to a few dozen examples: each step
publishes twice and reads four times."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.lakecore.publish import readers
from tests.lakecore.publish.histories import history, step, table_kind
from tests.support.readers import Readers

pytestmark = [pytest.mark.slow, pytest.mark.readers]

DUCKDB = {"iceberg": Readers.duckdb_iceberg, "delta": Readers.duckdb_delta}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_kind, st.lists(step, min_size=1, max_size=6))
def test_every_reader_reads_what_weir_reads_after_every_step(readers_session: Readers, kind, steps):
    with history(kind) as h:
        for op in h.run(steps):
            want = h.table.read()
            for target in ("iceberg", "delta"):
                result = h.table.publish(target)
                expected = readers.expected(want, target)
                got = readers.READERS[target](h.table.uri)
                readers.assert_same(got, expected, ["k"], reader=f"{target} after {op}")
                got = readers.normalized(DUCKDB[target](readers_session, result.location))
                readers.assert_same(got, expected, ["k"], reader=f"duckdb {target} after {op}")


@pytest.fixture(scope="module")
def readers_session(readers: Readers) -> Readers:
    """The session's reader processes (the module `readers` of this package is the comparison)."""
    return readers


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_kind, st.lists(step, min_size=1, max_size=6))
def test_iceberg_v3_readers_read_what_weir_reads_after_every_step(readers_session: Readers, kind, steps):
    with history(kind) as h:
        for op in h.run(steps):
            expected = readers.expected(h.table.read(), "iceberg")
            result = h.table.publish("iceberg", format_version=3)
            readers.assert_same(readers.iceberg(h.table.uri), expected, ["k"],
                                reader=f"pyiceberg v3 after {op}")
            got = readers.normalized(readers_session.duckdb_iceberg(result.location))
            readers.assert_same(got, expected, ["k"], reader=f"duckdb iceberg v3 after {op}")
