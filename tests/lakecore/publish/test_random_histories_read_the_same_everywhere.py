"""A property over random write histories (writes of every kind, deletes by key and by event time,
overwrites, compaction, clustering, clean, archival, added columns; both table types, both one-group
merge modes, partitioned or not): after every step, publishing both targets and reading them with
pyiceberg and deltalake's DataFusion reader gives exactly `Table.read()`. Bounded to a few dozen
examples: each step publishes and reads twice."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.lakecore.publish import readers
from tests.lakecore.publish.histories import history, step, table_kind

pytestmark = pytest.mark.slow


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_kind, st.lists(step, min_size=1, max_size=6))
def test_every_reader_reads_what_weir_reads_after_every_step(kind, steps):
    with history(kind) as h:
        for op in h.run(steps):
            want = h.table.read()
            for target in ("iceberg", "delta"):
                h.table.publish(target)
                got = readers.READERS[target](h.table.uri)
                readers.assert_same(got, readers.expected(want, target), ["k"], reader=f"{target} after {op}")
