"""`weir run`'s launcher tells how each driver ended, also when it did not see it end: a driver an earlier
`weir run` started (that run killed with kill -9, its driver going on in a session of its own) is known
by the outcome it wrote as its termination message — a write that completed is done, not run again;
only a driver that wrote none is lost. A driver the launcher stops because its run ends is `Stopped`,
not an error, and a closed launcher starts nothing more; a driver an earlier run left running is
followed and stopped with the run, never a process that got its pid since. Real processes, no Spark."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from lakeoperator.launch import local
from lakeoperator.launch.local import LocalLauncher
from lakeoperator.plan.writer import STOPPED_BY_RUNNER, observe_pod
from tests.support.operator import wait_until

WRITE_OUTCOME = "import json, os, sys; open(os.environ['WEIR_TERMINATION_LOG'], 'w').write(sys.argv[1])"


def pod(name: str, script: str, *args: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "driver", "command": [sys.executable],
                                     "args": ["-c", script, *args]}]}}


@pytest.mark.parametrize(("outcome", "phase", "code", "reason"), [
    ({"outcome": "committed", "instant": "20261129010000000"}, "Succeeded", 0, "Completed"),
    ({"outcome": "bad_input", "error": "NullKey: ..."}, "Failed", 2, "Error"),
    ({"outcome": "conflict", "instant": "20261129010000000"}, "Failed", 3, "Error"),
    (None, "Failed", None, "DriverLost"),
])
def test_a_driver_an_earlier_run_started_is_known_by_its_outcome(
        tmp_path: Path, outcome: dict[str, Any] | None, phase: str, code: int | None, reason: str) -> None:
    earlier = LocalLauncher(tmp_path)
    script = WRITE_OUTCOME if outcome is not None else "pass"
    earlier.create_pod(pod("load-1", script, json.dumps(outcome)))
    earlier._procs[("default", "load-1")].wait(30)   # it ended after its runner was gone (init reaps it)
    seen = observe_pod(LocalLauncher(tmp_path).get_pod("default", "load-1") or {})   # the next run's
    assert (seen.phase, seen.exit_code, seen.reason) == (phase, code, reason)


def test_a_driver_stopped_as_the_run_ends_is_stopped_not_an_error(tmp_path: Path) -> None:
    launcher = LocalLauncher(tmp_path)
    launcher.create_pod(pod("done-1", WRITE_OUTCOME, json.dumps({"outcome": "committed"})))
    launcher._procs[("default", "done-1")].wait(30)
    launcher.create_pod(pod("stream-1", "import time; time.sleep(120)"))
    launcher.close()
    stream = observe_pod(launcher.get_pod("default", "stream-1") or {})
    assert (stream.phase, stream.exit_code, stream.reason) == ("Failed", 143, STOPPED_BY_RUNNER)
    done = observe_pod(launcher.get_pod("default", "done-1") or {})
    assert (done.phase, done.exit_code, done.reason) == ("Succeeded", 0, "Completed")
    launcher.create_pod(pod("late-1", "pass"))
    assert launcher.get_pod("default", "late-1") is None, "a closed launcher starts nothing"


def test_a_driver_an_earlier_run_left_running_is_adopted_and_stopped_with_the_run(tmp_path: Path) -> None:
    """kill -9 of `weir run` leaves its drivers running (each in a session of its own): the next run
    follows them, and stops them when it ends, as its own; a pid the system gave another process since
    is neither taken for the driver nor stopped."""
    earlier = LocalLauncher(tmp_path)
    earlier.create_pod(pod("stream-1", "import time; time.sleep(120)"))
    orphan = earlier._procs.pop(("default", "stream-1"))   # its runner is gone; the driver goes on
    reaper = threading.Thread(target=orphan.wait, daemon=True)   # as init reaps an orphan once it ends
    reaper.start()
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                                start_new_session=True)
    reused = pod("reused-1", "pass")
    earlier.create_pod(reused)
    earlier._procs.pop(("default", "reused-1")).wait(30)
    body = json.loads((tmp_path / "pods" / "default" / "reused-1.json").read_text())
    body["status"] = {"phase": "Running", "containerStatuses": [{"name": "driver", "state": {"running": {}}}]}
    body["metadata"]["annotations"]["weir.dev/local-pid"] = str(stranger.pid)   # the pid, reused since
    (tmp_path / "pods" / "default" / "reused-1.json").write_text(json.dumps(body))
    try:
        later = LocalLauncher(tmp_path)
        assert observe_pod(later.get_pod("default", "stream-1") or {}).phase == "Running"
        assert observe_pod(later.get_pod("default", "reused-1") or {}).reason == "DriverLost"
        later.close()
        stopped = observe_pod(later.get_pod("default", "stream-1") or {})
        assert (stopped.phase, stopped.exit_code, stopped.reason) == ("Failed", 143, STOPPED_BY_RUNNER)
        reaper.join(30)
        assert orphan.returncode == -signal.SIGTERM, "the orphan was stopped"
        assert stranger.poll() is None, "the process that got the pid since was left alone"
    finally:
        for p in (orphan, stranger):
            if p.poll() is None:
                p.kill()
                p.wait()


# A driver slow to stop: it notes when SIGTERM came (system-wide monotonic clock) and goes on
SLOW_TO_STOP = ("import os, signal, time, sys\n"
                "def noted(*_): open(sys.argv[1], 'w').write(repr(time.monotonic()))\n"
                "signal.signal(signal.SIGTERM, noted)\n"
                "open(sys.argv[1] + '.ready', 'w').close()\n"
                "while True: time.sleep(0.05)\n")


def test_the_drivers_are_stopped_together_within_one_grace_period(tmp_path: Path, monkeypatch) -> None:
    """Each driver is sent SIGTERM at once: stopping three drivers that are slow to end takes one grace
    period, not three (the next got its SIGTERM only after the one before it had ended or been killed)."""
    monkeypatch.setattr(local, "GRACE_S", 3.0)
    launcher = LocalLauncher(tmp_path / "state")
    names = [f"stream-{i}" for i in range(3)]
    for name in names:
        launcher.create_pod(pod(name, SLOW_TO_STOP, str(tmp_path / name)))
    wait_until(lambda: all((tmp_path / f"{name}.ready").exists() for name in names), timeout=30)
    launcher.close()
    told = [float((tmp_path / name).read_text()) for name in names]
    assert max(told) - min(told) < 1.0, f"SIGTERM reached them {max(told) - min(told):.1f} s apart"
    assert launcher.killed == 3
    for name in names:
        seen = observe_pod(launcher.get_pod("default", name) or {})
        assert (seen.phase, seen.exit_code, seen.reason) == ("Failed", 137, STOPPED_BY_RUNNER)


def test_a_hurried_stop_kills_the_drivers_at_once(tmp_path: Path, monkeypatch) -> None:
    """A second Ctrl-C while `weir run` stops its drivers hurries the stop: the drivers still going are
    killed at once, not after the rest of their grace period, and none is left running."""
    monkeypatch.setattr(local, "GRACE_S", 120.0)
    launcher = LocalLauncher(tmp_path / "state")
    for name in ("stream-0", "stream-1"):
        launcher.create_pod(pod(name, SLOW_TO_STOP, str(tmp_path / name)))
    procs = dict(launcher._procs)
    wait_until(lambda: all((tmp_path / f"{name}.ready").exists() for name in ("stream-0", "stream-1")),
               timeout=30)
    closing = threading.Thread(target=launcher.close)
    closing.start()
    wait_until(lambda: (tmp_path / "stream-0").exists() and (tmp_path / "stream-1").exists(), timeout=30)
    assert closing.is_alive(), "close() waits for the drivers' grace period"
    launcher.hurry()
    closing.join(30)
    try:
        assert not closing.is_alive(), "the hurried stop did not wait out the grace period"
        assert [p.returncode for p in procs.values()] == [-signal.SIGKILL] * 2
        assert launcher.killed == 2
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
