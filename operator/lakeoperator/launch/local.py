"""The local launcher: a driver pod's container run as a process on this machine (the embedded default).

It runs what the pod says — command and args (with Kubernetes' `$(VAR)` expansion), env (literal
values; `status.podIP` is 127.0.0.1; `secretKeyRef` read from `<secrets_dir>/<secret>/<key>`) — and
reports it back as a Pod body: Pending, Running, then Succeeded or Failed with the container's exit
code. Pods are kept in `<state_dir>/pods/<namespace>/<name>.json` and their output in
`<state_dir>/logs/<namespace>/<name>.log`, so `weir get` and a restarted runner see them; a process
that ended while no runner watched it reads as Failed with reason DriverLost (its exit code is gone).

`substitute` rewrites the command's program names for this machine (the pod names `spark-submit` and
the jobs' files inside the image; here they are the venv's and the checkout's). Must not decide
anything: the reconcile core asks, it runs.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lakeoperator.plan.writer import STOPPED_BY_RUNNER
from sparkjobs.contract import (
    EXIT_BAD_INPUT,
    EXIT_BUSY,
    EXIT_CONFLICT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
)

_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
GRACE_S = 10.0


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' dependent-variable expansion: `$(NAME)` becomes its value when NAME is defined,
    `$$(NAME)` stays literal `$(NAME)`, anything else is left as written."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$(", i):
            out.append("$(")
            i += 3
            continue
        m = _VAR.match(text, i)
        if m and m.group(1) in env:
            out.append(env[m.group(1)])
            i = m.end()
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


class LocalLauncher:
    """Driver pods as local processes (see the module docstring)."""

    def __init__(self, state_dir: str | Path, *, secrets_dir: str | Path | None = None,
                 substitute: Mapping[str, str] | None = None, base_env: Mapping[str, str] | None = None,
                 cwd: str | Path | None = None) -> None:
        self.state = Path(state_dir)
        self.secrets = Path(secrets_dir) if secrets_dir else None
        self.substitute = dict(substitute or {})
        self.base_env = dict(os.environ if base_env is None else base_env)
        self.cwd = str(cwd) if cwd else None
        self._procs: dict[tuple[str, str], subprocess.Popen[bytes]] = {}
        self._stopped: set[tuple[str, str]] = set()   # the pods close() stopped
        self._adopted: set[tuple[str, str]] = set()   # running pods an earlier runner started
        self.closed = False
        self._hurry = False   # hurry(): close() kills at once
        self.killed = 0   # the drivers close() had to kill (SIGKILL): the grace period ran out, or hurry()

    # -- the protocol ------------------------------------------------------------------------

    def create_pod(self, pod: dict[str, Any]) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        if self._path(ns, name).exists() or self.closed:   # closed: its runner is ending, starts nothing
            return
        body = json.loads(json.dumps(pod))
        body["metadata"]["creationTimestamp"] = _now()
        body["status"] = {"phase": "Pending"}
        self._save(body)
        container = body["spec"]["containers"][0]
        try:
            env = self._env(container.get("env") or [])
            argv = [expand(a, env) for a in [*container.get("command", []), *container.get("args", [])]]
            argv = [self.substitute.get(a, a) for a in argv]
            argv = [_substitute_prefix(a, self.substitute) for a in argv]
        except (KeyError, OSError) as exc:  # a missing Secret: as the kubelet says it, the pod waits
            body["status"] = {"phase": "Pending", "containerStatuses": [{"name": container["name"], "state": {
                "waiting": {"reason": "CreateContainerConfigError", "message": str(exc)}}}]}
            self._save(body)
            return
        log_path = self.state / "logs" / ns / f"{name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        message = self._message_path(ns, name)  # the container's termination message (sparkjobs.entry)
        message.unlink(missing_ok=True)
        env["WEIR_TERMINATION_LOG"] = str(message)   # read from there; names the pod (_driver_pid)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(argv, env=env, cwd=self.cwd, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self._procs[(ns, name)] = proc
        body["status"] = {"phase": "Running", "podIP": "127.0.0.1", "startTime": _now(),
                          "containerStatuses": [{"name": container["name"], "ready": True,
                                                 "state": {"running": {"startedAt": _now()}}}]}
        body["metadata"]["annotations"] = {**(body["metadata"].get("annotations") or {}),
                                           "weir.dev/local-pid": str(proc.pid)}
        self._save(body)

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        path = self._path(namespace, name)
        if not path.exists():
            return None
        body = json.loads(path.read_text())
        if body.get("status", {}).get("phase") == "Running":
            self._refresh(body)
        return body

    def delete_pod(self, namespace: str, name: str) -> None:
        proc = self._procs.pop((namespace, name), None)
        body = self.get_pod(namespace, name)
        pid = proc.pid if proc else self._driver_pid(namespace, name, body)
        if pid is not None and (proc is None or proc.poll() is None):
            _stop([(pid, proc)])
        self._path(namespace, name).unlink(missing_ok=True)

    # -- helpers -------------------------------------------------------------------------------

    def pods(self) -> list[dict[str, Any]]:
        """Every pod this state dir holds, refreshed."""
        out = []
        for path in sorted((self.state / "pods").glob("*/*.json")):
            body = self.get_pod(path.parent.name, path.stem)
            if body is not None:
                out.append(body)
        return out

    def close(self) -> None:
        """Stop every process this launcher started (a runner that exits takes its drivers along), and
        every driver an earlier (killed) run left running that it follows: all are sent SIGTERM at once
        and given one grace period together, so stopping N drivers takes one grace period, not N. A
        driver stopped here ends with the terminated reason STOPPED_BY_RUNNER, not as an error: the
        writer's planner starts it again with the next run, counting no failure. Creates no pod after.
        `hurry()` (a second Ctrl-C) cuts the grace period short: what is left is killed at once."""
        self.closed = True
        stopping: list[tuple[int, subprocess.Popen[bytes] | None]] = []
        for key, proc in list(self._procs.items()):
            if proc.poll() is None:
                self._stopped.add(key)
                stopping.append((proc.pid, proc))
        adopted = sorted(self._adopted - set(self._procs))   # an earlier (killed) run's, still going
        for ns, name in adopted:
            pid = self._driver_pid(ns, name, self.get_pod(ns, name))
            if pid is not None:
                self._stopped.add((ns, name))
                stopping.append((pid, None))
        self.killed = _stop(stopping, hurried=lambda: self._hurry)
        for ns, name in [*self._procs, *adopted]:
            self.get_pod(ns, name)

    def hurry(self) -> None:
        """Kill the drivers `close()` is stopping now, without the rest of their grace period. Safe to
        call from a signal handler (it only sets a flag `close()` reads)."""
        self._hurry = True

    def _refresh(self, body: dict[str, Any]) -> None:
        ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
        proc = self._procs.get((ns, name))
        if proc is not None:
            code = proc.poll()
            if code is None:
                return
            reason = "Completed" if code == 0 else "Error"
            if code < 0:  # killed by a signal: a container runtime reports 128 + the signal
                code, reason = 128 - code, "Error"
            if code != 0 and (ns, name) in self._stopped:
                reason = STOPPED_BY_RUNNER
        elif self._driver_pid(ns, name, body) is not None:   # an earlier (killed) run's: adopted
            self._adopted.add((ns, name))
            return
        elif (ns, name) in self._stopped:   # adopted, then stopped by close()
            code, reason = 128 + signal.SIGTERM, STOPPED_BY_RUNNER
        else:   # started by an earlier runner (killed, say) and gone since: its outcome says how it ended
            code = exit_code_of(self._message_path(ns, name))
            reason = "DriverLost" if code is None else "Completed" if code == 0 else "Error"
        name_ = body["spec"]["containers"][0]["name"]
        terminated: dict[str, Any] = {"reason": reason, "finishedAt": _now()}
        started = _running_since(body)
        if started:  # a kubelet's terminated state keeps when the container started
            terminated["startedAt"] = started
        if code is not None:
            terminated["exitCode"] = code
        try:  # what a kubelet keeps of it: 4096 bytes
            message = self._message_path(ns, name).read_bytes()[:4096].decode("utf-8", "replace")
        except OSError:
            message = ""
        if message:
            terminated["message"] = message
        body["status"] = {**body["status"], "phase": "Succeeded" if code == 0 else "Failed",
                          **({"reason": reason} if code is None else {}),
                          "containerStatuses": [{"name": name_, "ready": False,
                                                 "state": {"terminated": terminated}}]}
        self._save(body)

    def _driver_pid(self, namespace: str, name: str, body: Mapping[str, Any] | None) -> int | None:
        """The pid a pod's body records, if that process is alive and is this pod's driver: its
        environment names this pod's termination message file (so a pid the system reused since, after
        a reboot, is never taken for it, nor stopped). Where the environment cannot be read, alive is
        taken as it."""
        pid = _pid_of(body)
        if pid is None or not _alive(pid):
            return None
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return pid
        mine = f"WEIR_TERMINATION_LOG={self._message_path(namespace, name)}".encode()
        return pid if mine in environ else None

    def _message_path(self, namespace: str, name: str) -> Path:
        return self.state / "logs" / namespace / f"{name}.termination-log"

    def _env(self, specs: list[dict[str, Any]]) -> dict[str, str]:
        env = dict(self.base_env)
        for e in specs:
            if "value" in e:
                env[e["name"]] = expand(str(e["value"]), env)
                continue
            source = e.get("valueFrom") or {}
            if "fieldRef" in source:
                env[e["name"]] = "127.0.0.1" if source["fieldRef"].get("fieldPath") == "status.podIP" else ""
            elif "secretKeyRef" in source:
                ref = source["secretKeyRef"]
                if self.secrets is None:
                    raise KeyError(f"secret {ref['name']!r} needed and no secrets directory is configured; "
                                   "run with --secrets-dir DIR holding DIR/<secret>/<key> files")
                env[e["name"]] = (self.secrets / ref["name"] / ref["key"]).read_text()
        return env

    def _path(self, namespace: str, name: str) -> Path:
        return self.state / "pods" / namespace / f"{name}.json"

    def _save(self, body: dict[str, Any]) -> None:
        path = self._path(body["metadata"]["namespace"], body["metadata"]["name"])
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(body, indent=2))
        tmp.replace(path)


def _substitute_prefix(arg: str, substitute: Mapping[str, str]) -> str:
    """Paths inside the image (e.g. /opt/weir/sparkjobs/x.py) mapped to this machine's."""
    for old, new in substitute.items():
        if old.endswith("/") and arg.startswith(old):
            return new + arg[len(old):]
    return arg


def _running_since(body: Mapping[str, Any]) -> str | None:
    containers = (body.get("status") or {}).get("containerStatuses") or [{}]
    return ((containers[0].get("state") or {}).get("running") or {}).get("startedAt")


def _pid_of(body: Mapping[str, Any] | None) -> int | None:
    pid = ((body or {}).get("metadata", {}).get("annotations") or {}).get("weir.dev/local-pid")
    return int(pid) if pid else None


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


# how a job's outcome line (sparkjobs.entry) names the codes it exits with; any other outcome is its done
_OUTCOME_CODES = {"bad_input": EXIT_BAD_INPUT, "busy": EXIT_BUSY, "unavailable": EXIT_UNAVAILABLE,
                  "conflict": EXIT_CONFLICT, "failed": EXIT_FAILED}


def exit_code_of(message_path: Path) -> int | None:
    """The exit code of a driver this launcher did not start (an earlier `weir run`'s, left running when
    that one was killed), from the outcome line the job wrote as its termination message; None when it
    wrote none (it died before it could: lost). So a write that completed after its runner was killed is
    known as done, not run again."""
    try:
        outcome = json.loads(message_path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return None
    if not isinstance(outcome, dict) or not isinstance(outcome.get("outcome"), str):
        return None
    return _OUTCOME_CODES.get(outcome["outcome"], EXIT_OK)


def _group_alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _stop(groups: list[tuple[int, subprocess.Popen[bytes] | None]],
          hurried: Callable[[], bool] = lambda: False) -> int:
    """SIGTERM each process group (a leader's pid, its Popen when this process started it), SIGKILL
    those still there after the grace period, or as soon as `hurried()` says so; returns how many
    groups were killed. A group is done when
    every process of it is gone, not only its leader (spark-submit's JVM): the Python driver it
    started, a worker, are stopped too, never left behind."""
    going = []
    for pid, proc in groups:
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        going.append((pid, proc))
    deadline = time.monotonic() + GRACE_S
    while going and time.monotonic() < deadline and not hurried():
        for _, proc in going:
            if proc is not None:
                proc.poll()   # reaps the leader: until then it keeps its group in being
        going = [(pid, proc) for pid, proc in going if _group_alive(pid)]
        if going:
            time.sleep(0.05)
    killed = 0
    for pid, proc in going:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        killed += 1
        if proc is not None:
            proc.wait(5)
    return killed
