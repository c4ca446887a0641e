"""The operator process: `weir operator` / `python -m lakeoperator`.

Wires the parts together and runs kopf: credentials (kube.connect: in-cluster service account or a
kubeconfig, shared by kopf's watches and the controller's requests), the controller and its workers,
the kopf handlers, the liveness endpoint (kopf's `/healthz`), the Prometheus metrics endpoint
(prometheus_client, on its own port), logs (plain or JSON), and the namespaces watched (some, or all).
Every option has an environment variable (WEIR_*) for the Helm chart.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from dataclasses import dataclass, field
from typing import Annotated, Any

import typer

from lakeoperator.builders.driver_pod import PodSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OperatorConfig:
    namespaces: tuple[str, ...] = ()          # empty: every namespace
    kubeconfig: str | None = None
    context: str | None = None
    pod: PodSettings = field(default_factory=PodSettings)
    workers: int = 8
    metrics_address: str = "0.0.0.0"
    metrics_port: int = 9090                  # 0: no metrics endpoint
    liveness_port: int = 8080                 # 0: no liveness endpoint
    log_format: str = "plain"                 # plain | json
    verbose: bool = False
    peering: str | None = None                # None: standalone (one replica; the chart's default)
    leader_election: bool = True              # a Lease decides which replica reconciles
    lease_namespace: str = "default"
    lease_name: str = "weir-operator"
    identity: str = ""                        # default: the host name (the pod's name in a cluster)
    lease_duration_s: float = 15.0
    lease_renew_s: float = 5.0
    supervise_period_s: float = 1.0           # every supervised table is scanned this often
    conflict_grace_s: float = 10.0            # a conflict's loser still running this long is deleted


def run_operator(config: OperatorConfig, *, stop_flag: threading.Event | None = None,
                 ready_flag: threading.Event | None = None) -> None:
    """Run until stopped (SIGINT/SIGTERM, or `stop_flag`)."""
    import kopf
    from prometheus_client import start_http_server

    from lakeoperator.controller import Controller, ControllerSettings
    from lakeoperator.handlers import build_registry
    from lakeoperator.kube import Kube, connect
    from lakeoperator.metrics import OperatorMetrics

    kopf.configure(verbose=config.verbose,
                   log_format=kopf.LogFormat.JSON if config.log_format == "json" else kopf.LogFormat.FULL)
    if not config.verbose:   # one line per watch event and per probe is noise; our Events are logged below
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    api_client = connect(config.kubeconfig, config.context)
    metrics = OperatorMetrics()
    if config.metrics_port:
        start_http_server(config.metrics_port, addr=config.metrics_address, registry=metrics.registry)
    controller = Controller(Kube(api_client), ControllerSettings(
        pod=config.pod, workers=config.workers, supervise_period_s=config.supervise_period_s,
        conflict_grace_s=config.conflict_grace_s), metrics)
    elector = None
    if config.leader_election:
        from lakeoperator.leader import LeaderElector, LeaseTerms

        elector = LeaderElector(controller.kube, config.lease_namespace, config.lease_name,
                                config.identity or socket.gethostname(),
                                LeaseTerms(config.lease_duration_s, config.lease_renew_s),
                                controller.set_leading)
    registry = build_registry(controller, login=lambda: connection_info(api_client.configuration),
                              elector=elector)
    liveness = f"http://0.0.0.0:{config.liveness_port}/healthz" if config.liveness_port else None
    log.info("weir operator starting: namespaces=%s workers=%d image=%s",
             ",".join(config.namespaces) or "*", config.workers, config.pod.default_image)
    kopf.run(registry=registry, standalone=config.peering is None, peering_name=config.peering,
             clusterwide=not config.namespaces, namespaces=config.namespaces, liveness_endpoint=liveness,
             stop_flag=stop_flag, ready_flag=ready_flag)


def connection_info(configuration: Any) -> Any:
    """kopf's credentials from the kubernetes client's configuration (the same server, token, CA and
    client certificate the controller uses; a rotated service-account token is read afresh)."""
    import kopf

    header = configuration.get_api_key_with_prefix("BearerToken") or \
        configuration.get_api_key_with_prefix("authorization")
    parts = header.split(" ", 1) if header else []
    scheme, token = (None, None) if not parts else \
        (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])
    return kopf.ConnectionInfo(server=configuration.host, ca_path=configuration.ssl_ca_cert,
                               insecure=not configuration.verify_ssl, scheme=scheme, token=token,
                               username=configuration.username or None,
                               password=configuration.password or None,
                               certificate_path=configuration.cert_file,
                               private_key_path=configuration.key_file)


def operator_command(
    namespace: Annotated[list[str] | None, typer.Option(
        "--namespace", "-n", envvar="WEIR_NAMESPACES",
        help="A namespace to watch (repeat for more; WEIR_NAMESPACES is space-separated). "
             "None: every namespace.")] = None,
    kubeconfig: Annotated[str | None, typer.Option(
        envvar="WEIR_KUBECONFIG", help="Kubeconfig file (default: in-cluster service account, else "
                                       "$KUBECONFIG or ~/.kube/config).")] = None,
    context: Annotated[str | None, typer.Option(help="Kubeconfig context.")] = None,
    image: Annotated[str, typer.Option(envvar="WEIR_SPARK_IMAGE",
                                       help="Driver and executor image when a spec names none.")]
        = PodSettings.default_image,
    jobs_dir: Annotated[str, typer.Option(envvar="WEIR_JOBS_DIR",
                                          help="Where the sparkjobs files are in that image.")]
        = PodSettings.jobs_dir,
    spark_submit: Annotated[str, typer.Option(envvar="WEIR_SPARK_SUBMIT",
                                              help="spark-submit in that image.")] = PodSettings.spark_submit,
    api_server: Annotated[str, typer.Option(envvar="WEIR_API_SERVER",
                                            help="The API server drivers request executors from.")]
        = PodSettings.api_server,
    driver_service_account: Annotated[str | None, typer.Option(
        envvar="WEIR_DRIVER_SERVICE_ACCOUNT",
        help="Service account of driver and executor pods whose spec names none (drivers create their "
             "executors: it must be allowed to; the chart's is weir-spark). Default: the namespace's "
             "default account.")] = None,
    workers: Annotated[int, typer.Option(envvar="WEIR_WORKERS", min=1,
                                         help="Resources reconciled at once.")] = 8,
    metrics_port: Annotated[int, typer.Option(envvar="WEIR_METRICS_PORT",
                                              help="Prometheus metrics on this port (0: off).")] = 9090,
    metrics_address: Annotated[str, typer.Option(envvar="WEIR_METRICS_ADDRESS")] = "0.0.0.0",
    liveness_port: Annotated[int, typer.Option(envvar="WEIR_LIVENESS_PORT",
                                               help="/healthz on this port (0: off).")] = 8080,
    log_format: Annotated[str, typer.Option(envvar="WEIR_LOG_FORMAT", help="plain or json.")] = "plain",
    verbose: Annotated[bool, typer.Option("--verbose", help="Debug logs.")] = False,
    peering: Annotated[str | None, typer.Option(
        envvar="WEIR_PEERING", help="kopf peering name (default: standalone; replicas are coordinated by "
                                    "leader election).")] = None,
    leader_election: Annotated[bool, typer.Option(
        envvar="WEIR_LEADER_ELECTION", help="Only the replica holding the Lease reconciles; a standby takes "
                                            "over when it is not renewed.")] = True,
    lease_namespace: Annotated[str | None, typer.Option(
        envvar="WEIR_LEASE_NAMESPACE", help="Namespace of the Lease (default: $POD_NAMESPACE, else "
                                            "default).")] = None,
    lease_name: Annotated[str, typer.Option(envvar="WEIR_LEASE_NAME")] = "weir-operator",
    identity: Annotated[str | None, typer.Option(
        envvar="WEIR_IDENTITY", help="This replica's name in the Lease (default: the host name).")] = None,
    lease_duration: Annotated[float, typer.Option(
        envvar="WEIR_LEASE_DURATION",
        help="Seconds without renewal after which a standby takes over.")] = 15.0,
    lease_renew: Annotated[float, typer.Option(
        envvar="WEIR_LEASE_RENEW", help="Seconds between renewals (at most a third of the duration).")] = 5.0,
    supervise_period: Annotated[float, typer.Option(
        envvar="WEIR_SUPERVISE_PERIOD", min=0.05,
        help="Seconds between two scans of a table's live writes for conflicts and dead writers.")] = 1.0,
    conflict_grace: Annotated[float, typer.Option(
        envvar="WEIR_CONFLICT_GRACE", min=0.0,
        help="Seconds a conflict's loser may run after its abort before its driver is deleted.")] = 10.0,
) -> None:
    """Run the Weir operator: reconcile LakeTables, LakeWriters and TableServices on a cluster."""
    if log_format not in ("plain", "json"):
        raise typer.BadParameter("use plain or json", param_hint="--log-format")
    from lakeoperator.kube import KubeError

    namespaces = tuple(n for item in namespace or () for n in item.replace(",", " ").split())
    try:
        run_operator(OperatorConfig(
            namespaces=namespaces, kubeconfig=kubeconfig, context=context,
            pod=PodSettings(default_image=image, jobs_dir=jobs_dir, spark_submit=spark_submit,
                            api_server=api_server, service_account=driver_service_account or None),
            workers=workers, metrics_address=metrics_address, metrics_port=metrics_port,
            liveness_port=liveness_port, log_format=log_format, verbose=verbose, peering=peering,
            leader_election=leader_election,
            lease_namespace=lease_namespace or os.environ.get("POD_NAMESPACE") or "default",
            lease_name=lease_name, identity=identity or "", lease_duration_s=lease_duration,
            lease_renew_s=lease_renew, supervise_period_s=supervise_period, conflict_grace_s=conflict_grace))
    except (KubeError, OSError, ValueError) as exc:   # no credentials, a port in use, bad lease terms
        typer.echo(f"weir operator: {exc}", err=True)
        raise typer.Exit(1) from None


def main() -> None:
    typer.run(operator_command)


__all__ = ["OperatorConfig", "connection_info", "main", "operator_command", "run_operator"]
