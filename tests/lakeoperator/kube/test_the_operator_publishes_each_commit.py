"""The real operator on a real API server publishes a LakeTable with spec.publish after each commit it
sees (here: writes from outside the operator, which its supervisor notices), within seconds: status
says per target the instant its readers see, `publishedInstant` follows the table's latest instant,
and the Iceberg table is registered in the catalog the spec's Secret describes (pyiceberg's SQL
catalog), whose readers get exactly `Table.read()`. Before the Secret exists the files are published
and the target says the Secret is missing."""

from __future__ import annotations

import base64
import json

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog

from lakecore import Table
from tests.lakecore.publish import readers
from tests.lakeoperator.kube.manifests import table
from tests.support.kube_client import resource_path
from tests.support.operator import Cluster

pytestmark = pytest.mark.k8s
AT_ONCE_S = 15

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("amount", pa.int64()), ("ts", pa.int64())])
CATALOG = {"table": "lake.orders", "name": "lake", "secretRef": {"name": "lake-catalog", "key": "properties"}}


def rows(ids: list[int], amount: int, ts: int) -> pa.Table:
    return pa.table({"id": ids, "amount": [amount] * len(ids), "ts": [ts] * len(ids)}, schema=SCHEMA)


def published(cluster: Cluster, instant: str) -> dict:
    return cluster.wait_status("LakeTable", "orders", lambda s: s.get("publishedInstant") == instant and
                               not any(e.get("error") for e in s.get("published") or ()),
                               timeout=AT_ONCE_S)["status"]


def test_each_commit_is_published_and_registered(cluster: Cluster) -> None:
    location = str(cluster.work / "lake" / "orders")
    properties = {"type": "sql", "uri": f"sqlite:///{cluster.work / 'catalog.db'}"}
    cluster.apply(table(cluster.work, publish={"targets": ["iceberg", "delta"], "catalog": CATALOG}))
    cluster.wait_status("LakeTable", "orders", lambda s: s.get("phase") == "Ready", timeout=30)
    t = Table.open(location)
    t.upsert(rows(list(range(8)), 1, 1))
    first = t.timeline().last_completed().requested_time
    status = cluster.wait_status("LakeTable", "orders", lambda s: s.get("publishedInstant") == first,
                                 timeout=AT_ONCE_S)["status"]
    iceberg = {e["format"]: e for e in status["published"]}["iceberg"]
    assert "no Secret 'lake-catalog'" in iceberg["error"]   # published by path, not registered
    readers.assert_same(readers.iceberg(location), readers.expected(t.read(), "iceberg"), ["id"],
                        reader="iceberg by path")

    secret = base64.b64encode(json.dumps(properties).encode()).decode()
    cluster.client.create(resource_path("v1", "secrets", cluster.namespace),
                          {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "lake-catalog"},
                           "data": {"properties": secret}})
    t.upsert(rows([1, 2, 20], 5, 2))
    t.delete(pa.table({"id": pa.array([3], pa.int64())}))
    second = t.timeline().last_completed().requested_time
    status = published(cluster, second)
    entries = {e["format"]: e for e in status["published"]}
    assert entries["iceberg"]["instant"] == entries["delta"]["instant"] == second
    # registered at this publish, or at one of the upsert alone before it (a slow pass) and moved on here
    said = entries["iceberg"]["catalog"]
    assert "lake.orders registered" in said or "lake.orders moved -> " in said, said
    want = t.read()
    catalog = load_catalog("lake", **properties)
    readers.assert_same(readers.normalized(catalog.load_table("lake.orders").scan().to_arrow()),
                        readers.expected(want, "iceberg"), ["id"], reader="catalog")
    readers.assert_same(readers.delta(location), readers.expected(want, "delta"), ["id"], reader="delta")
