"""Spark driver pods: a LakeWriter's or TableService's job as one Pod, built as a plain dict.

The driver runs in client mode inside the pod (`spark-submit --deploy-mode client`); in `spark.mode:
kubernetes` it asks the API server for its executor pods itself, owned by the driver pod (so they go
when it goes), labelled with the table, the owner and the submission; in `spark.mode: local` the job
runs `local[N]` inside the pod, and so does every job `weir run` starts (PodSettings.local_only). The
pod is owned by its resource (deleted with it), named after the owner and the submission id (a re-run
of a handler builds the same name, so it can never create a second pod for one submission), and never
restarted by the kubelet (`restartPolicy: Never`: restarts are the operator's decision, per the
restart policy).

Owns: names, labels, the Spark configuration the operator manages, the env that carries the pod IP,
the storage Secret, the ZooKeeper credentials Secret (driver and executors alike: executors take
ZooKeeper locks in early conflict detection `direct_zk`) and a Kafka source's credentials Secret.
Must not decide whether to submit (plan/), talk to the API (kube.py), or put a secret value anywhere
(Secrets are referenced, never read).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from lakeoperator.builders.job_args import (
    KAFKA_OPTIONS_ENV,
    SCHEMA_REGISTRY_AUTH_ENV,
    STORAGE_ENV,
    ZOOKEEPER_PASSWORD_ENV,
    ZOOKEEPER_USERNAME_ENV,
    service_args,
    writer_args,
)
from lakeoperator.plan.writer import SUBMISSION_LABEL
from lakeoperator.specs import (
    LakeTableSpec,
    LakeWriterSpec,
    ObjectRef,
    SparkSpec,
    StorageSpec,
    TableServiceSpec,
    ZookeeperCredentialsRef,
    spark_memory_mib,
)
from sparkjobs.contract import POD_NAME_ENV, SUBMISSION_ENV, WRITER_ENV

API_VERSION = "weir.dev/v1alpha1"
POD_IP_ENV = "WEIR_POD_IP"
Component = Literal["writer", "table-service"]

_DNS_LABEL_MAX = 63


@dataclass(frozen=True)
class PodSettings:
    """How this operator's pods run (operator settings, not part of any resource)."""

    default_image: str = "ghcr.io/weir-dev/weir-spark:0.1.0"
    jobs_dir: str = "/opt/weir/sparkjobs"   # sparkjobs/*.py in the image (spark-submit takes files)
    spark_submit: str = "spark-submit"
    api_server: str = "https://kubernetes.default.svc"   # executors are requested from here (in-cluster)
    # drivers create their executor pods: the service account allowed to (the chart's `weir-spark`) when a
    # spec names none; None: the namespace's default account
    service_account: str | None = None
    # `weir run`: no cluster to ask for executor pods, so a spec's `spark.mode: kubernetes` (the default)
    # runs local[spark.localCores] in the driver's process too, as `spark.mode: local` does
    local_only: bool = False


def child_name(submission_id: str) -> str:
    """The driver pod's name: the submission (or service run) id, which already carries its owner's
    name (plan/); a DNS label, cut and suffixed with a hash should it be too long, so two submissions
    never share a name and a re-run of the same one always gets the same name."""
    name = submission_id.lower()
    if len(name) <= _DNS_LABEL_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:_DNS_LABEL_MAX - 9].rstrip('-.')}-{digest}"


def _pod_memory(value: str) -> str:
    """What a JVM given `value` of heap needs: Spark's own overhead rule (10%, at least 384 MiB)."""
    heap = spark_memory_mib(value)
    assert heap is not None, "the spec parser refuses memory in another notation"
    return f"{heap + max(384, heap // 10)}Mi"


def labels(owner: ObjectRef, component: Component, table: str, submission_id: str) -> dict[str, str]:
    key = "weir.dev/writer" if component == "writer" else "weir.dev/service"
    return {"app.kubernetes.io/name": "weir", "app.kubernetes.io/component": component,
            "app.kubernetes.io/managed-by": "weir-operator", "weir.dev/table": table, key: owner.name,
            SUBMISSION_LABEL: submission_id}


def owner_reference(owner: ObjectRef, kind: str) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "name": owner.name, "uid": owner.uid,
            "controller": True, "blockOwnerDeletion": True}


def secret_env(storage: StorageSpec,
               zookeeper: ZookeeperCredentialsRef | None) -> dict[str, tuple[str, str]]:
    """Variable -> (Secret, key) of every Secret value a job's driver and executors read."""
    env: dict[str, tuple[str, str]] = {}
    if storage.secret_ref is not None:
        env[STORAGE_ENV] = (storage.secret_ref.name, storage.secret_ref.key)
    if zookeeper is not None:
        env[ZOOKEEPER_USERNAME_ENV] = (zookeeper.name, zookeeper.username_key)
        env[ZOOKEEPER_PASSWORD_ENV] = (zookeeper.name, zookeeper.password_key)
    return env


def spark_conf(owner: ObjectRef, pod_name: str, spark: SparkSpec, image: str,
               pod_labels: Mapping[str, str], secrets: Mapping[str, tuple[str, str]],
               settings: PodSettings) -> dict[str, str]:
    """Every --conf the driver is started with: the spec's own (none of MANAGED_CONF_PREFIXES: the spec
    parser refuses those), then the ones the operator manages."""
    conf = dict(sorted(spark.conf.items()))
    conf["spark.app.name"] = f"weir-{owner.namespace}-{owner.name}"
    if spark.mode == "local" or settings.local_only:
        conf |= {"spark.master": f"local[{spark.local_cores}]", "spark.driver.host": "127.0.0.1",
                 "spark.driver.bindAddress": "127.0.0.1"}
        return conf
    conf |= {
        "spark.master": f"k8s://{settings.api_server}",
        "spark.submit.deployMode": "client",
        "spark.driver.host": f"$({POD_IP_ENV})",   # the kubelet expands it from the env below
        "spark.driver.bindAddress": "0.0.0.0",
        "spark.kubernetes.namespace": owner.namespace,
        "spark.kubernetes.driver.pod.name": pod_name,   # executors get an owner reference to it
        "spark.kubernetes.executor.podNamePrefix": pod_name,
        "spark.kubernetes.container.image": image,
        "spark.executor.instances": str(spark.executor.instances),
        "spark.executor.cores": str(spark.executor.cores),
        "spark.executor.memory": spark.executor.memory,
        "spark.driver.memory": spark.driver.memory,
    }
    account = spark.service_account_name or settings.service_account
    if account:
        conf["spark.kubernetes.authenticate.driver.serviceAccountName"] = account
        conf["spark.kubernetes.authenticate.executor.serviceAccountName"] = account
    for key, value in pod_labels.items():
        conf[f"spark.kubernetes.executor.label.{key}"] = value
    for variable, (secret, key) in secrets.items():
        conf[f"spark.kubernetes.executor.secretKeyRef.{variable}"] = f"{secret}:{key}"
    return conf


def _driver_pod(owner: ObjectRef, kind: str, component: Component, table_name: str, submission_id: str,
                spark: SparkSpec, table: LakeTableSpec, entry: str, argv: list[str],
                settings: PodSettings, who: dict[str, str] | None = None,
                more_secrets: dict[str, tuple[str, str]] | None = None) -> dict[str, Any]:
    name = child_name(submission_id)
    image = spark.image or settings.default_image
    pod_labels = labels(owner, component, table_name, submission_id)
    secrets = secret_env(table.storage, table.lock_credentials) | (more_secrets or {})
    conf = spark_conf(owner, name, spark, image, pod_labels, secrets, settings)
    submit = [arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")]
    env: list[dict[str, Any]] = [
        {"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]
    for variable, (secret, key) in secrets.items():
        env.append({"name": variable, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
    env.extend({"name": k, "value": v} for k, v in (who or {}).items())
    memory = _pod_memory(spark.driver.memory)
    container = {
        "name": "driver", "image": image, "command": [settings.spark_submit],
        "args": [*submit, f"{settings.jobs_dir}/{entry}.py", *argv],
        "env": env,
        "resources": {"requests": {"cpu": str(spark.driver.cores), "memory": memory},
                      "limits": {"memory": memory}},
        # the job writes its JSON outcome as the termination message (sparkjobs.entry); a driver that
        # died before writing one reports the end of its log instead
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": owner.namespace, "labels": pod_labels,
                     "ownerReferences": [owner_reference(owner, kind)]},
        "spec": {"restartPolicy": "Never", "containers": [container]},
    }
    account = spark.service_account_name or settings.service_account
    if account:
        pod["spec"]["serviceAccountName"] = account
    return pod


def build_writer_pod(owner: ObjectRef, writer: LakeWriterSpec, table: LakeTableSpec, submission_id: str,
                     settings: PodSettings = PodSettings(), *,
                     source_location: str | None = None) -> dict[str, Any]:
    """The driver pod of one submission of a LakeWriter."""
    args = writer_args(owner, writer, table, source_location=source_location)
    entry = "batch_write" if writer.mode == "batch" else "stream_write"
    who = {WRITER_ENV: f"{owner.namespace}/{owner.name}", SUBMISSION_ENV: submission_id,
           POD_NAME_ENV: child_name(submission_id)}
    kafka = writer.source.kafka
    credentials: dict[str, tuple[str, str]] = {}
    if kafka is not None and kafka.credentials is not None:
        credentials[KAFKA_OPTIONS_ENV] = (kafka.credentials.name, kafka.credentials.key)
    if kafka is not None and kafka.schema_registry_credentials is not None:
        registry = kafka.schema_registry_credentials
        credentials[SCHEMA_REGISTRY_AUTH_ENV] = (registry.name, registry.key)
    return _driver_pod(owner, "LakeWriter", "writer", writer.table_ref.name, submission_id, writer.spark,
                       table, entry, args.to_argv(), settings, who, credentials)


def build_service_pod(owner: ObjectRef, service: TableServiceSpec, table: LakeTableSpec, run_id: str,
                      settings: PodSettings = PodSettings()) -> dict[str, Any]:
    """The driver pod of one run of a TableService (clean and archival need no executors: local mode
    would do, but they run as the spec says)."""
    args = service_args(owner, service, table)
    return _driver_pod(owner, "TableService", "table-service", service.table_ref.name, run_id,
                       service.spark, table, "table_service", args.to_argv(), settings)
