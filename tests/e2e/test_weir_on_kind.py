"""Weir as a user installs it: a kind cluster, the operator and Spark images built from this tree, the
Helm chart, tables on S3 (an S3 endpoint in the cluster). The chart's own `helm test` passes; the GitOps
example (a table, two writers, a compaction) is applied with kustomize and its writers run; two batch
writers on one file group, held mid-write in their driver pods, conflict — the supervisor stops the
younger from outside and it is restarted after the winner — and the table holds exactly what the writes
give. The checks are the API
server tests' (tests/support/scenario_checks.py).

Runs with `make e2e` where a Docker engine exists (see conftest.py); takes about ten minutes."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import s3fs

from lakecore import Table
from tests.e2e.kind import NAMESPACE, KindCluster, kind_cluster, wait_for
from tests.lakecore.concurrency.conflicts.test_occ_conflicts import keys_in_bucket
from tests.support.scenario_checks import (
    check_conflict_decided,
    check_conflict_events,
    check_ran_once,
    check_restarted_after_conflict,
    check_rows,
)

pytestmark = [pytest.mark.e2e]

WEIR = "weir.dev/v1alpha1"
PAUSE_DIR = "/tmp/weir-pause"   # in the driver pod: the task makes it with its hold (sparkjobs/write.py)
SCHEMA = [{"name": "id", "type": "int64", "nullable": False}, {"name": "amount", "type": "int64"},
          {"name": "ts", "type": "int64"}]
STORAGE = {"secretRef": {"name": "lake-storage", "key": "options.json"}}


@pytest.fixture(scope="module")
def kind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KindCluster, dict[str, Any]]]:
    with kind_cluster(tmp_path_factory.mktemp("kind")) as cluster:
        cluster.build_and_load_images()
        cluster.install_chart()
        yield cluster, cluster.deploy_s3()


def lake_table(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": WEIR, "kind": "LakeTable", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"location": f"s3://lake/{name}", "schema": SCHEMA, "recordKey": ["id"],
                     "orderingField": "ts", "buckets": 2, "storage": STORAGE, **spec}}


def held_writer(name: str, source_table: str) -> dict[str, Any]:
    """A batch writer reading a landing table, whose task holds in its driver pod until released."""
    return {"apiVersion": WEIR, "kind": "LakeWriter", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"tableRef": {"name": "orders"}, "mode": "batch",
                     "source": {"table": {"name": source_table}},
                     "spark": {"mode": "local", "localCores": 1, "driver": {"memory": "512m"},
                               "conf": {"spark.executorEnv.WEIR_TEST_PAUSE_DIR": PAUSE_DIR}},
                     "restartPolicy": {"backoff": {"initialSeconds": 1, "maxSeconds": 2}}}}


def landing(cluster: KindCluster, local: dict[str, Any], name: str, ids: list[int],
            ts: int) -> list[dict[str, Any]]:
    """A LakeTable the operator creates on S3, filled from this machine through the port-forward."""
    cluster.apply(lake_table(name))
    cluster.wait_status("LakeTable", name, lambda s: s.get("phase") == "Ready")
    rows = [{"id": i, "amount": i * 10, "ts": ts} for i in ids]
    Table.open(f"s3://lake/{name}", storage_options=local).upsert(pa.Table.from_pylist(rows))
    return rows


def test_the_chart_installs_and_its_helm_test_passes(kind: tuple[KindCluster, dict[str, Any]]) -> None:
    cluster, _ = kind
    cluster.helm_test()
    assert "weir_leader 1.0" in cluster.metrics()   # the one replica leads


def test_the_gitops_example_runs(kind: tuple[KindCluster, dict[str, Any]]) -> None:
    """examples/gitops/base through tests/e2e/overlay: the backfill reads a Parquet export on S3 through
    Spark's s3a (the Spark image's connector) and commits every row; the stream runs, waiting on its landing
    prefix."""
    cluster, local = kind
    export = pa.table({
        "order_id": pa.array(range(1, 101), pa.int64()),
        "customer_id": [f"c{i % 7}" for i in range(1, 101)],
        "amount": pa.array([Decimal(i) / 4 for i in range(1, 101)], pa.decimal128(18, 2)),
        "status": ["shipped"] * 100,
        "updated_at": pa.array([datetime(2025, 6, 1, tzinfo=UTC)] * 100, pa.timestamp("us")),
        "order_date": pa.array([date(2025, 6, 1 + i % 3) for i in range(1, 101)], pa.date32())})
    fs = s3fs.S3FileSystem(**local)
    with fs.open("lake/exports/orders-2025/part-0.parquet", "wb") as out:
        pq.write_table(export, out)
    fs.touch("lake/landing/orders/_ready")   # the prefix exists; Spark skips files named _*

    cluster.apply_kustomization(Path(__file__).parent / "overlay")
    cluster.wait_status("LakeWriter", "orders-stream", lambda s: s.get("phase") == "Running", timeout=600)
    done = cluster.wait_status("LakeWriter", "orders-backfill", lambda s: s.get("phase") == "Succeeded",
                               timeout=600)
    check_ran_once(done["status"])
    got = Table.open("s3://lake/orders", storage_options=local).read(columns=["order_id", "amount"])
    assert sorted(got.column("order_id").to_pylist()) == list(range(1, 101))
    assert sum(got.column("amount").to_pylist()) == sum(export.column("amount").to_pylist())


def test_a_conflict_is_stopped_from_outside_and_the_data_is_correct(
        kind: tuple[KindCluster, dict[str, Any]]) -> None:
    cluster, local = kind
    group_0, group_1 = keys_in_bucket(0, 20, buckets=2), keys_in_bucket(1, 5, buckets=2)
    older_rows = landing(cluster, local, "landing-older", group_0[:10], ts=1)
    younger_rows = landing(cluster, local, "landing-younger", group_0[5:15], ts=2)
    apart_rows = landing(cluster, local, "landing-apart", group_1, ts=1)
    cluster.apply(lake_table("orders"))
    cluster.wait_status("LakeTable", "orders", lambda s: s.get("phase") == "Ready")

    cluster.apply(held_writer("older", "landing-older"))
    (older_instant,) = wait_for(lambda: cluster.reached("older", PAUSE_DIR), timeout=300, what="older held")
    cluster.apply(held_writer("apart", "landing-apart"))
    cluster.apply(held_writer("younger", "landing-younger"))

    lost = cluster.wait_status("LakeWriter", "younger",
                               lambda s: (s.get("lastConflict") or {}).get("role") == "Lost")
    won = cluster.wait_status("LakeWriter", "older", lambda s: "lastConflict" in s, timeout=30)
    check_conflict_decided(lost["status"], won["status"], winner_instant=older_instant,
                           winner_writer=f"{NAMESPACE}/older", loser_name="younger")
    cluster.wait_status("LakeWriter", "younger", lambda s: s.get("phase") == "BackingOff")

    wait_for(lambda: cluster.reached("apart", PAUSE_DIR), timeout=300, what="apart held")
    cluster.release("older", PAUSE_DIR)
    cluster.release("apart", PAUSE_DIR)
    cluster.wait_status("LakeWriter", "older", lambda s: s.get("phase") == "Succeeded")
    apart = cluster.wait_status("LakeWriter", "apart", lambda s: s.get("phase") == "Succeeded")
    check_ran_once(apart["status"])
    # the restarted attempt is a new pod: its task holds again until released
    wait_for(lambda: cluster.reached("younger", PAUSE_DIR), timeout=300, what="younger's second attempt")
    cluster.release("younger", PAUSE_DIR)
    again = cluster.wait_status("LakeWriter", "younger", lambda s: s.get("phase") == "Succeeded")
    check_restarted_after_conflict(again["status"])

    got = Table.open("s3://lake/orders", storage_options=local).read().to_pylist()
    check_rows(got, older_rows, younger_rows, apart_rows)
    check_conflict_events(cluster.events("younger"), cluster.events("older"))
