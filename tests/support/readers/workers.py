"""Reader processes in their own venvs: one long-running `serve.py ENGINE` per engine, asked over pipes.

Owns starting a reader process (its own process group; its stderr in `<workdir>/<engine>.log`), sending
it one JSON request per read, waiting for the reply with a deadline, and fetching the result: an Arrow IPC
file the process wrote in `<workdir>/results/`, read back here and deleted. A process that dies or stops
answering is stopped (by pid: SIGTERM, then SIGKILL to its group, the JVM included) and its log's end
becomes the error. The request vocabulary is the engine modules' (engine_*.py).
"""

from __future__ import annotations

import itertools
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from tests.support.readers.environments import HERE, Environment

# the child's Python must see its own venv only
_INHERITED_NOT = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "SPARK_HOME", "PYSPARK_PYTHON",
                  "PYSPARK_DRIVER_PYTHON", "PYSPARK_SUBMIT_ARGS")


class ReaderError(RuntimeError):
    """A reader refused or failed to read a table; the message is the engine's own."""


class ReaderProcessDied(RuntimeError):
    """A reader process exited or stopped answering; the message ends with its log's last lines."""


class ReaderProcess:
    """`serve.py <engine>` under `environment`'s venv, started by start(), stopped by stop()."""

    def __init__(self, engine: str, environment: Environment, workdir: Path, *,
                 env: Mapping[str, str] | None = None, start_timeout: float = 180,
                 call_timeout: float = 240) -> None:
        self.engine = engine
        self.environment = environment
        self.workdir = workdir
        self.log_path = workdir / f"{engine}.log"
        self.results = workdir / "results"
        self.extra_env = dict(env or {})
        self.start_timeout = start_timeout
        self.call_timeout = call_timeout
        self.versions: dict[str, str] = {}
        self.startup_seconds = 0.0
        self._process: subprocess.Popen[bytes] | None = None
        self._numbers = itertools.count()

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _environment(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if key not in _INHERITED_NOT}
        env["PATH"] = f"{self.environment.python.parent}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.update(self.extra_env)
        return env

    def start(self) -> ReaderProcess:
        self.results.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [str(self.environment.python), str(HERE / "serve.py"), self.engine],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, cwd=self.workdir,
                env=self._environment(), start_new_session=True)
        try:
            hello = self._reply(self.start_timeout, "start")
        except BaseException:
            self.stop()
            raise
        self.versions = hello["versions"]
        self.startup_seconds = time.monotonic() - started
        return self

    def call(self, op: str, **args: Any) -> pa.Table:
        """Asks the process to run `op(**args)`; its result, or ReaderError with the engine's message."""
        if self._process is None:
            raise RuntimeError(f"the {self.engine} reader is not started")
        out = self.results / f"{next(self._numbers):06d}.arrow"
        stdin = self._process.stdin
        assert stdin is not None
        try:
            stdin.write((json.dumps({"op": op, "args": args, "out": str(out)}) + "\n").encode())
            stdin.flush()
        except BrokenPipeError:
            self.stop()
            raise self._died("took no request") from None
        reply = self._reply(self.call_timeout, op)
        if not reply["ok"]:
            raise ReaderError(f"{self.engine} {op}: {reply['kind']}: {reply['error']}")
        try:
            with pa.memory_map(str(out)) as source:
                return pa.ipc.open_file(source).read_all()
        finally:
            out.unlink(missing_ok=True)

    def _reply(self, timeout: float, what: str) -> dict[str, Any]:
        assert self._process is not None
        stdout: IO[bytes] | None = self._process.stdout
        assert stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            if not selector.select(timeout):
                self.stop()
                raise self._died(f"did not answer {what} within {timeout:.0f} s")
        line = stdout.readline()
        if not line:
            self.stop()
            raise self._died(f"exited during {what}")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def _died(self, what: str) -> ReaderProcessDied:
        tail = self.log_path.read_bytes()[-4000:].decode(errors="replace") if self.log_path.exists() else ""
        return ReaderProcessDied(f"the {self.engine} reader {what}; the end of {self.log_path}:\n{tail}")

    def stop(self, grace: float = 30) -> None:
        """Ends the process: stdin closed (it stops its engine and exits), then SIGTERM/SIGKILL by pid."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            try:
                process.stdin.close()
            except BrokenPipeError:
                pass
        for signum in (None, signal.SIGTERM, signal.SIGKILL):
            if signum is not None:
                _signal_group(process.pid, signum)
            try:
                process.wait(grace if signum is None else 10)
                break
            except subprocess.TimeoutExpired:
                continue
        _signal_group(process.pid, signal.SIGKILL)  # whatever of its group outlived it (a JVM)
        if process.stdout is not None:
            process.stdout.close()


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)  # started in its own session: the group id is its pid
    except ProcessLookupError:
        pass
