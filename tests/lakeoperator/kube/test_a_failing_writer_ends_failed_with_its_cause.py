"""Writers that cannot succeed end Failed with the reason, under the real operator and the process kubelet:
a driver whose image never pulls does not stay Submitted — after startTimeoutSeconds its pod is deleted
and the attempt counts as an infrastructure failure; once maxInfraRestarts is spent the writer is
Failed. A batch writer whose input is bad (a null record key: the job exits 2) is Failed at once,
never retried, its status and Event saying the job's own error (the column, the count: the driver's
termination message); a new restartNonce after fixing the input runs it again and it succeeds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore import Table
from tests.lakeoperator.kube.manifests import batch_writer, table
from tests.support.kube_server import ControlPlane
from tests.support.operator import Cluster, start_cluster, wait_until

pytestmark = [pytest.mark.k8s, pytest.mark.spark]
SCHEMA = pa.schema([("id", pa.int64()), ("amount", pa.int64()), ("ts", pa.int64())])


def phase(name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda status: status.get("phase") == name


@pytest.fixture
def pull_failing_cluster(kube_server: ControlPlane, kube_namespace: str, tmp_path):  # type: ignore[no-untyped-def]
    yield from start_cluster(kube_server, kube_namespace, tmp_path, image_pull_failures=r"^never-pulls")


def test_a_driver_that_never_starts_times_out_until_the_budget_is_spent(
        pull_failing_cluster: Cluster) -> None:
    cluster = pull_failing_cluster
    cluster.apply(table(cluster.work))
    writer = batch_writer(cluster.work, startTimeoutSeconds=2,
                          restartPolicy={"maxInfraRestarts": 1,
                                         "backoff": {"initialSeconds": 1, "maxSeconds": 1}})
    writer["spec"]["spark"]["image"] = "never-pulls:1"
    cluster.apply(writer)
    failed = cluster.wait_status("LakeWriter", "orders-load", phase("Failed"), timeout=60)
    status = failed["status"]
    assert [h["cause"] for h in status["history"]] == ["infrastructure", "infrastructure"]
    assert status["attempts"]["infraFailures"] == 2 and status["attempts"]["total"] == 2
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"
    assert "StartTimeout" in [e["reason"] for e in cluster.events("orders-load")]
    # timed-out drivers are deleted: the operator's delete sets deletionTimestamp, and the pod goes when
    # the kubelet has confirmed it (a moment later, even with grace period 0)
    wait_until(lambda: not cluster.pods(selector="weir.dev/writer=orders-load"), timeout=30,
               show=lambda: cluster.pods(selector="weir.dev/writer=orders-load"))


def test_bad_input_fails_at_once_and_a_new_nonce_runs_the_fixed_input(cluster: Cluster) -> None:
    folder = cluster.work / "input" / "orders"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"id": [1, None], "amount": [1, 2], "ts": [1, 1]}, schema=SCHEMA),
                   folder / "part-0.parquet")
    cluster.apply(table(cluster.work))
    cluster.apply(batch_writer(cluster.work))
    failed = cluster.wait_status("LakeWriter", "orders-load", phase("Failed"), timeout=120)
    history = failed["status"]["history"]
    assert [(h["cause"], h["exitCode"]) for h in history] == [("badInput", 2)]
    assert failed["status"]["attempts"]["total"] == 1   # never retried
    cause = "SchemaMismatch: column 'id' is declared non-nullable but has 1 nulls; fill them before writing"
    ready = next(c for c in failed["status"]["conditions"] if c["type"] == "Ready")
    assert ready["reason"] == "BadInput" and cause in ready["message"], ready
    # the Event follows the status patch: wait for it rather than race it
    wait_until(lambda: any(e["reason"] == "BadInput" and cause in e["message"]
                           for e in cluster.events("orders-load")), timeout=30,
               show=lambda: cluster.events("orders-load"))
    assert Table.open(str(cluster.work / "lake" / "orders")).read().num_rows == 0

    pq.write_table(pa.table({"id": [1, 2], "amount": [1, 2], "ts": [1, 1]}, schema=SCHEMA),
                   folder / "part-0.parquet")
    cluster.patch("LakeWriter", "orders-load", {"spec": {"restartNonce": "fixed"}})
    done = cluster.wait_status("LakeWriter", "orders-load", phase("Succeeded"), timeout=120)
    assert done["status"]["attempts"]["total"] == 2
    assert Table.open(str(cluster.work / "lake" / "orders")).read().num_rows == 2
