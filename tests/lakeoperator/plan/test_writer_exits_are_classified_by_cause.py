"""An attempt's end is classified by the jobs' exit codes, and by the platform's reasons first."""

from __future__ import annotations

import pytest

from lakeoperator.plan.writer import Cause, classify_exit
from sparkjobs.contract import (
    EXIT_BAD_INPUT,
    EXIT_BUSY,
    EXIT_CONFLICT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
)

CASES = [
    (EXIT_OK, None, Cause.SUCCESS),
    (EXIT_FAILED, "Error", Cause.FAILURE),
    (EXIT_BAD_INPUT, "Error", Cause.BAD_INPUT),
    (EXIT_CONFLICT, "Error", Cause.CONFLICT),
    (EXIT_BUSY, "Error", Cause.BUSY),
    (EXIT_UNAVAILABLE, "Error", Cause.UNAVAILABLE),
    (7, "Error", Cause.FAILURE),                       # an unknown code is a plain failure
    (137, "OOMKilled", Cause.INFRASTRUCTURE),
    (1, "OOMKilled", Cause.INFRASTRUCTURE),            # the reason wins over the code
    (None, "Evicted", Cause.INFRASTRUCTURE),
    (None, "NodeLost", Cause.INFRASTRUCTURE),
    (143, "Error", Cause.INFRASTRUCTURE),              # SIGTERM: 128 + 15
    (137, None, Cause.INFRASTRUCTURE),                 # SIGKILL
    (None, None, Cause.INFRASTRUCTURE),                # no exit code at all: the pod was lost
    (0, "StartTimeout", Cause.INFRASTRUCTURE),
]


@pytest.mark.parametrize(("exit_code", "reason", "cause"), CASES)
def test_exit_is_classified(exit_code: int | None, reason: str | None, cause: Cause) -> None:
    assert classify_exit(exit_code, reason) is cause


def test_causes_are_the_api_names() -> None:
    assert [c.value for c in Cause] == ["success", "failure", "badInput", "conflict", "busy",
                                        "infrastructure", "unavailable"]
