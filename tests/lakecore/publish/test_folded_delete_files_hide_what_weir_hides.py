"""A fold merges each partition's position-delete files into one (readers open every delete file a
snapshot lists): over random write histories, folding at every other publish, pyiceberg reads exactly
`Table.read()` after every step, and a folded snapshot lists at most one delete file per partition."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.table import StaticTable

from lakecore.publish import iceberg
from tests.lakecore.publish import readers
from tests.lakecore.publish.histories import history, step, table_kind

pytestmark = [pytest.mark.slow]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table_kind, st.lists(step, min_size=2, max_size=10))
def test_folded_snapshots_read_what_weir_reads(kind, steps):
    with history(kind) as h, mock.patch.object(iceberg, "FOLD_AFTER", 1):  # fold when one is appended
        for op in h.run(steps):
            result = h.table.publish("iceberg")
            readers.assert_same(readers.iceberg(h.table.uri), readers.expected(h.table.read(), "iceberg"),
                                ["k"], reader=f"iceberg after {op}")
            folded = not [p for p in _manifests(result.location) if "-a-" in p]
            if folded and not result.up_to_date:
                tasks = list(StaticTable.from_metadata(result.location).scan().plan_files())
                partitions = {t.file.file_path.rpartition("/")[0] for t in tasks}
                assert len({d.file_path for t in tasks for d in t.delete_files}) <= len(partitions), op


def _manifests(metadata: str) -> list[str]:
    snapshot = StaticTable.from_metadata(metadata).current_snapshot()
    assert snapshot is not None
    io = StaticTable.from_metadata(metadata).io
    return [m.manifest_path for m in snapshot.manifests(io)]
