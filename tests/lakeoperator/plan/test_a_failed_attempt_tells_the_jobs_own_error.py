"""An attempt that ended says why in the job's own words: the error of the job's outcome line, which is
its driver's termination message (sparkjobs.entry), goes into the plan's message, so into the writer's
conditions and its Event, for the operator and `weir run` alike. The message here is the real one a job
writes for a null record key; a message that is not an outcome line (the log tail a kubelet falls back
to) adds nothing, and a very long error is cut."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.errors import InvalidInput
from lakecore.write import conform
from lakeoperator.plan.writer import WriterPhase, observe_pod, plan_writer
from lakeoperator.status import writer_status
from sparkjobs.contract import EXIT_BAD_INPUT, EXIT_FAILED
from sparkjobs.entry import TERMINATION_LOG_ENV, run_job
from tests.lakeoperator.plan.writer_cases import NOW, REF, SID, ago, ended, writer


def termination_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """What a writer job leaves as its termination message when its input has null record keys."""
    table = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64()), ("v", pa.string())]),
                         record_key="id", buckets=1)
    data = pa.table({"id": pa.array([1, None, None], pa.int64()), "v": ["a", "b", "c"]})
    log = tmp_path / "termination-log"
    monkeypatch.setenv(TERMINATION_LOG_ENV, str(log))

    def write(_: object) -> dict[str, Any]:
        conform(data, table.config, "upsert")   # raises NullKey, as the writer job's conform does
        return {}

    code = run_job(lambda: None, write, done="committed", bad_input=(InvalidInput,), conflict=())
    assert code == EXIT_BAD_INPUT
    return log.read_text()


def pod(exit_code: int, message: str | None) -> dict[str, Any]:
    terminated: dict[str, Any] = {"exitCode": exit_code, "reason": "Error", "startedAt": ago(30).isoformat()}
    if message is not None:
        terminated["message"] = message
    return {"metadata": {"labels": {"weir.dev/submission-id": SID}, "creationTimestamp": ago(40).isoformat()},
            "status": {"phase": "Failed", "containerStatuses": [{"name": "driver", "state": {
                "terminated": terminated}}]}}


def planned(exit_code: int, message: str | None) -> tuple[Any, dict[str, Any]]:
    observed = ended(exit_code)
    plan = plan_writer(REF, writer(), replace(observed, driver=observe_pod(pod(exit_code, message))), NOW)
    return plan, writer_status(REF, plan, {"submissionId": SID}, NOW)


def test_bad_input_says_the_column_and_the_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan, status = planned(EXIT_BAD_INPUT, termination_message(tmp_path, monkeypatch))
    cause = "NullKey: 2 row(s) have a null record key 'id'; every row needs one: drop or fill them"
    assert plan.phase == WriterPhase.FAILED and plan.reason == "BadInput"
    assert plan.message == f"the driver ended with exit code 2 (Error): {cause}; the input or the table's " \
                           "configuration is wrong and retrying does not help: fix it, then change " \
                           "spec.restartNonce (with `weir run`: or start it again)"
    conditions = {c["type"]: c for c in status["conditions"]}
    assert conditions["Ready"]["message"] == plan.message and conditions["Stalled"]["message"] == plan.message


def test_a_failure_to_be_retried_says_the_jobs_error_too() -> None:
    line = '{"outcome": "failed", "error": "AnalysisException: [PATH_NOT_FOUND] Path does not exist: /in"}'
    plan, _ = planned(EXIT_FAILED, line)
    assert plan.phase == WriterPhase.BACKING_OFF
    assert plan.message.startswith("the driver ended with exit code 1 (Error): AnalysisException: "
                                   "[PATH_NOT_FOUND] Path does not exist: /in; restarting at ")


@pytest.mark.parametrize("message", [None, "", "Traceback (most recent call last):\n  ...\nMemoryError",
                                     '["not", "an", "outcome"]', '{"outcome": "failed"}'])
def test_a_message_without_the_jobs_error_adds_nothing(message: str | None) -> None:
    plan, _ = planned(EXIT_BAD_INPUT, message)
    assert plan.message.startswith("the driver ended with exit code 2 (Error); the input")


def test_a_long_error_is_cut_and_kept_on_one_line() -> None:
    line = json.dumps({"outcome": "bad_input", "error": "SchemaMismatch:\n" + "x" * 5000})
    plan, _ = planned(EXIT_BAD_INPUT, line)
    error = plan.message.split(": ", 1)[1].split("; the input")[0]
    assert len(error) == 1000 and error.endswith("…") and "\n" not in plan.message
