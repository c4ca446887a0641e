"""A real Apache Kafka broker (KRaft mode, one node that is broker and controller) run as a child process on
this machine: the tests' broker (tests/support/kafka_broker.py re-exports it) and the demo's.

The jars come from Maven Central through the project's own pom (tests/support/kafka/pom.xml; `make kafka`
copies kafka_2.13 and its runtime dependencies into .tools/kafka/<version>/libs). Starting formats the
storage with a fresh cluster id (Kafka's own StorageTool), then runs `kafka.Kafka` with a generated
server.properties: broker and controller listeners on free 127.0.0.1 ports, log dirs under `workdir`.
Stopped by pid; a restart keeps the ports, the cluster id and the data, so tests can take the broker away
and bring the same one back. Owns one broker's files, ports and process; must not produce or consume.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import time
import uuid
from pathlib import Path

from lakeoperator.dev.server_process import ServerProcess
from lakeoperator.dev.zookeeper import HOST, free_port, java_executable, port_is_open

ROOT = Path(__file__).resolve().parents[3]   # the checkout (operator/lakeoperator/dev/kafka.py)
POM = ROOT / "tests" / "support" / "kafka" / "pom.xml"
LIBS_ENV = "WEIR_KAFKA_LIBS"   # another directory of the broker's jars
_READY = "Kafka Server started"
# C1 only: the broker starts in about half the time; tests move little data through it
FAST_START_JVM = ("-XX:TieredStopAtLevel=1",)


def kafka_version(pom: Path = POM) -> str | None:
    """The Kafka release the pom pins (None without a checkout's pom)."""
    try:
        found = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", pom.read_text())
    except OSError:
        return None
    return found.group(1).strip() if found else None


def kafka_libs() -> Path | None:
    """The directory of the broker's jars: $WEIR_KAFKA_LIBS, else the checkout's
    .tools/kafka/<version>/libs."""
    if os.environ.get(LIBS_ENV):
        return Path(os.environ[LIBS_ENV])
    version = kafka_version()
    return ROOT / ".tools" / "kafka" / version / "libs" if version else None


def kafka_missing_reason() -> str | None:
    """Why a local Kafka broker cannot be started here, or None if it can."""
    if java_executable() is None:
        return "java not found (install OpenJDK 17 or set JAVA_HOME)"
    libs = kafka_libs()
    if libs is None or not any(libs.glob("kafka_2.13-*.jar")):
        return f"the Kafka broker's jars are not in {libs}; run `make kafka` (Maven fetches them once)"
    return None


def new_cluster_id() -> str:
    """A KRaft cluster id: a random UUID, URL-safe base64 without padding (what `kafka-storage random-uuid`
    prints), never starting with '-' (Kafka's own ids avoid it too: `format -t -x...` reads as an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaBroker(ServerProcess):
    """One single-node KRaft Kafka on 127.0.0.1, its config, data and log under `workdir`."""

    STOP_GRACE_S = 20.0   # a controlled shutdown moves leadership and flushes logs first

    def __init__(self, workdir: Path, *, start_timeout_s: float = 120.0, heap: str = "512m",
                 fast_start: bool = True, partitions: int = 1) -> None:
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / "data"
        self.config_path = self.workdir / "server.properties"
        self.log_config_path = self.workdir / "log4j2.properties"
        self.log_path = self.workdir / "kafka.log"
        self.port = free_port()
        self.controller_port = free_port()
        self.cluster_id = new_cluster_id()
        self.start_timeout_s = start_timeout_s
        self.heap = heap
        self.fast_start = fast_start
        self.partitions = partitions
        self.startup_seconds: float | None = None   # of the last start, format included
        self._process = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self) -> KafkaBroker:
        if self.is_running:
            return self
        reason = kafka_missing_reason()
        if reason is not None:
            raise RuntimeError(f"cannot start Kafka: {reason}")
        began = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        if not (self.data_dir / "meta.properties").exists():   # a restart keeps the formatted storage
            self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                       "-c", str(self.config_path))
        with self.log_path.open("ab") as log:
            offset = log.tell()
            self._process = subprocess.Popen(
                self._command("kafka.Kafka", str(self.config_path)), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, cwd=self.workdir,
                start_new_session=True)   # a Ctrl-C meant for pytest must not reach the broker first
        self._wait_until_ready(offset)
        self.startup_seconds = time.monotonic() - began
        return self


    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no log written)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


    def _command(self, main: str, *args: str) -> list[str]:
        jvm = [f"-Xmx{self.heap}", "-XX:+UseSerialGC", *(FAST_START_JVM if self.fast_start else ()),
               f"-Dlog4j2.configurationFile={self.log_config_path}"]
        return [str(java_executable()), *jvm, "-cp", f"{kafka_libs()}/*", main, *args]

    def _java(self, main: str, *args: str) -> None:
        done = subprocess.run(self._command(main, *args), stdin=subprocess.DEVNULL, capture_output=True,
                              cwd=self.workdir, timeout=self.start_timeout_s)
        if done.returncode != 0:
            raise RuntimeError(f"Kafka's {main} {' '.join(args[:1])} failed with code {done.returncode}:\n"
                               f"{done.stdout.decode(errors='replace')[-3000:]}"
                               f"{done.stderr.decode(errors='replace')[-3000:]}")

    def _write_config(self) -> None:
        settings = {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@{HOST}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": self.data_dir,
            "num.partitions": self.partitions,
            # one node: every internal topic has one replica
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": "false",   # a topic a test forgot is an error, not an empty topic
        }
        self.config_path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        self.log_config_path.write_text(
            "rootLogger.level=INFO\nrootLogger.appenderRef.out.ref=OUT\n"
            "appender.out.type=Console\nappender.out.name=OUT\nappender.out.layout.type=PatternLayout\n"
            "appender.out.layout.pattern=[%d] %p %m (%c)%n\n"
            # the broker prints its whole configuration at start-up: once is plenty, at WARN not at all
            "logger.config.name=org.apache.kafka.common.config.AbstractConfig\nlogger.config.level=WARN\n")

    def _wait_until_ready(self, offset: int) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"Kafka exited with code {self._process.returncode} during start-up "
                                   f"(port {self.port}); log {self.log_path}:\n{self.log_tail()}")
            with self.log_path.open("rb") as log:
                log.seek(offset)
                started = _READY.encode() in log.read()
            if started and port_is_open(self.port):
                return
            time.sleep(0.1)
        self.stop(kill=True)
        raise RuntimeError(f"Kafka did not start on {self.bootstrap_servers} within "
                           f"{self.start_timeout_s:.0f} s; log {self.log_path}:\n{self.log_tail()}")
