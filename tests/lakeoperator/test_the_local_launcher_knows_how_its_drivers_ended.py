"""`weir run`'s launcher tells how each driver ended, also when it did not see it end: a driver an earlier
`weir run` started (that run killed with kill -9, its driver going on in a session of its own) is known
by the outcome it wrote as its termination message — a write that completed is done, not run again;
only a driver that wrote none is lost. A driver the launcher stops because its run ends is `Stopped`,
not an error, and a closed launcher starts nothing more. Real processes, no Spark."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from lakeoperator.launch.local import LocalLauncher
from lakeoperator.plan.writer import STOPPED_BY_RUNNER, observe_pod

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
