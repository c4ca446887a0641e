"""`weir_resources{kind, phase}` counts the resources the operator reconciles now: a deleted one leaves its
phase's count. Before, a deleted Failed LakeTable kept `phase="Failed"` at 1 until the operator
restarted, so the dashboard's "resources by phase" showed a failure that was gone. Through the real
operator on the real API server, its metrics endpoint scraped."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from lakecore import Table
from tests.lakeoperator.kube.manifests import table
from tests.support.operator import Cluster, wait_until

pytestmark = [pytest.mark.k8s]


def count(cluster: Cluster, kind: str, phase: str) -> float:
    pattern = rf'^weir_resources\{{kind="{kind}",phase="{phase}"\}} (\S+)$'
    found = re.search(pattern, cluster.operator.metrics(), re.M)
    return float(found.group(1)) if found else 0.0


def test_a_deleted_failed_table_leaves_the_failed_count(cluster: Cluster) -> None:
    # a table whose files do not match its spec (2 buckets on disk, 4 in the spec): refused, Failed
    Table.create(str(cluster.work / "lake" / "refused"), record_key="id", buckets=2,
                 schema=pa.schema([pa.field("id", pa.int64(), nullable=False), ("amount", pa.int64()),
                                   ("ts", pa.int64())]))
    cluster.apply(table(cluster.work, "refused", buckets=4))
    cluster.apply(table(cluster.work, "fine"))
    cluster.wait_status("LakeTable", "refused", lambda s: s.get("phase") == "Failed", timeout=30)
    cluster.wait_status("LakeTable", "fine", lambda s: s.get("phase") == "Ready", timeout=30)
    both = lambda: (count(cluster, "LakeTable", "Failed"), count(cluster, "LakeTable", "Ready"))  # noqa: E731
    wait_until(lambda: both() == (1, 1), timeout=30, show=cluster.operator.metrics)

    cluster.delete("LakeTable", "refused")
    wait_until(lambda: count(cluster, "LakeTable", "Failed") == 0, timeout=30, show=cluster.operator.metrics)
    assert count(cluster, "LakeTable", "Ready") == 1
