"""A real Confluent-compatible schema registry for tests: Apicurio Registry with in-memory storage (`make
schema-registry` builds it into .tools/schema-registry/<version>/ from tests/support/schema-registry/pom.xml),
run as a child process on a free 127.0.0.1 port, stopped by pid. It serves the Confluent REST API under
/apis/ccompat/v6 (`url`); `register` adds a schema version to a subject the way a Confluent producer does
(POST /subjects/{subject}/versions) and returns its id. Owns one registry's process and log.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from lakeoperator.dev.server_process import ServerProcess
from lakeoperator.dev.zookeeper import HOST, free_port, java_executable

ROOT = Path(__file__).resolve().parents[2]
POM = ROOT / "tests" / "support" / "schema-registry" / "pom.xml"
CONFLUENT_API = "/apis/ccompat/v6"
_JSON = "application/vnd.schemaregistry.v1+json"


def registry_jar() -> Path | None:
    """The runner jar `make schema-registry` builds (None without the pom's version)."""
    found = re.search(r"<apicurio\.version>([^<]+)</apicurio\.version>", POM.read_text())
    if not found:
        return None
    return ROOT / ".tools" / "schema-registry" / found.group(1).strip() / "schema-registry-1-runner.jar"


def schema_registry_missing_reason() -> str | None:
    """Why a schema registry cannot be started here, or None if it can."""
    if java_executable() is None:
        return "java not found (install OpenJDK 17 or set JAVA_HOME)"
    jar = registry_jar()
    if jar is None or not jar.exists():
        return f"the schema registry is not built at {jar}; run `make schema-registry`"
    return None


class SchemaRegistry(ServerProcess):
    """One Apicurio Registry on 127.0.0.1 (in-memory: a restart forgets every schema), its log under
    `workdir`."""

    def __init__(self, workdir: Path, *, start_timeout_s: float = 120.0) -> None:
        self.workdir = Path(workdir)
        self.log_path = self.workdir / "registry.log"
        self.port = free_port()
        self.start_timeout_s = start_timeout_s
        self.startup_seconds: float | None = None
        self._process = None

    @property
    def url(self) -> str:
        """The Confluent-compatible API's base URL (what a writer's schemaRegistry.url names)."""
        return f"http://{HOST}:{self.port}{CONFLUENT_API}"

    def start(self) -> SchemaRegistry:
        if self.is_running:
            return self
        reason = schema_registry_missing_reason()
        if reason is not None:
            raise RuntimeError(f"cannot start the schema registry: {reason}")
        began = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        command = [str(java_executable()), "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   f"-Dquarkus.http.port={self.port}", f"-Dquarkus.http.host={HOST}",
                   "-jar", str(registry_jar())]
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, cwd=self.workdir,
                                             start_new_session=True)
        self._wait_until_ready()
        self.startup_seconds = time.monotonic() - began
        return self

    def register(self, subject: str, schema: dict[str, object]) -> int:
        """Registers `schema` (Avro, as JSON) under `subject`; its id (the same one again for the same
        schema)."""
        body = json.dumps({"schema": json.dumps(schema)}).encode()
        request = urllib.request.Request(f"{self.url}/subjects/{subject}/versions", data=body, method="POST",
                                         headers={"Content-Type": _JSON, "Accept": _JSON})
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(json.loads(response.read())["id"])

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no log written)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def _wait_until_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"the schema registry exited with code {self._process.returncode} during "
                                   f"start-up (port {self.port}); log {self.log_path}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        self.stop(kill=True)
        raise RuntimeError(f"the schema registry did not answer on {self.url} within "
                           f"{self.start_timeout_s:.0f} s; log {self.log_path}:\n{self.log_tail()}")
