"""A real ZooKeeper server (Debian package `zookeeper`) run as a child process on this machine: the
demo's table lock (`weir demo`) and the tests' ensemble (tests/support/zookeeper.py re-exports it).

Owns one server's config, data dir, port and process. Started without systemd, stopped by pid; restarts
keep the port and the data dir, so tests can take ZooKeeper away mid-run and bring the same ensemble back.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from lakeoperator.dev.server_process import ServerProcess

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
# zookeeper.jar's manifest Class-Path names its other jars; only a logging binding is missing.
SLF4J_BINDING_JAR = Path("/usr/share/java/slf4j-simple.jar")
HOST = "127.0.0.1"


def java_executable() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def zookeeper_missing_reason() -> str | None:
    """Why a local ZooKeeper cannot be started here, or None if it can."""
    if java_executable() is None:
        return "java not found (install OpenJDK 17 or set JAVA_HOME)"
    for jar in (ZOOKEEPER_JAR, SLF4J_BINDING_JAR):
        if not jar.exists():
            return f"{jar} not found; run `make system-deps` (apt-get install -y zookeeper)"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def port_is_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((HOST, port)) == 0


class ZooKeeperServer(ServerProcess):
    """One standalone ZooKeeper server on 127.0.0.1, with its own zoo.cfg and data dir under `workdir`."""

    def __init__(self, workdir: Path, *, tick_ms: int = 500, start_timeout_s: float = 30.0) -> None:
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / "data"
        self.config_path = self.workdir / "zoo.cfg"
        self.log_path = self.workdir / "zookeeper.log"
        self.port = free_port()
        self.tick_ms = tick_ms
        self.start_timeout_s = start_timeout_s
        self._process = None

    @property
    def connect_string(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self) -> ZooKeeperServer:
        if self.is_running:
            return self
        reason = zookeeper_missing_reason()
        if reason is not None:
            raise RuntimeError(f"cannot start ZooKeeper: {reason}")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        command = [
            str(java_executable()),
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-cp",
            f"{ZOOKEEPER_JAR}:{SLF4J_BINDING_JAR}",
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            str(self.config_path),
        ]
        # Appending keeps the log of earlier runs: a restart failure is easier to read with its history.
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,  # a Ctrl-C meant for pytest must not reach the server first
            )
        self._wait_until_ready()
        return self


    def four_letter_word(self, command: str, *, timeout_s: float = 2.0) -> str:
        with socket.create_connection((HOST, self.port), timeout=timeout_s) as sock:
            sock.sendall(command.encode("ascii"))
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "replace")

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return "(no log written)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


    def _write_config(self) -> None:
        settings = {
            "tickTime": self.tick_ms,
            "dataDir": self.data_dir,
            "clientPort": self.port,
            "clientPortAddress": HOST,
            "maxClientCnxns": 0,  # tests and the demo's drivers open many sessions from one address
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,envi",
            "forceSync": "no",  # no fsync per write: speed, not durability across power loss
        }
        self.config_path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))

    def _wait_until_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with code {self._process.returncode} during start-up "
                    f"(port {self.port}); log {self.log_path}:\n{self.log_tail()}"
                )
            try:
                # `imok` only says the process is up; `srvr` reports a Mode once sessions are served.
                if self.four_letter_word("ruok", timeout_s=0.5) == "imok" and "Mode: " in (
                    self.four_letter_word("srvr", timeout_s=0.5)
                ):
                    return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop(kill=True)
        raise RuntimeError(
            f"ZooKeeper did not answer `ruok` on {self.connect_string} within {self.start_timeout_s:.0f} s; "
            f"log {self.log_path}:\n{self.log_tail()}"
        )
