"""What the operator's scenarios must show, checked the same way wherever they run: on the real API server
with the process kubelet (tests/lakeoperator/kube) and on a kind cluster with the images and the Helm
chart (tests/e2e). One definition of "the writer ran", "the conflict was handled" and "the data is
correct", so the kind suite cannot drift into checking less than the API server tests do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Row = Mapping[str, Any]


def expected_rows(*inputs: Sequence[Row], key: str = "id") -> list[dict[str, Any]]:
    """The table after upserting `inputs` in order (a later input's row replaces an earlier one's)."""
    merged: dict[Any, dict[str, Any]] = {}
    for rows in inputs:
        merged |= {r[key]: dict(r) for r in rows}
    return [merged[k] for k in sorted(merged)]


def check_rows(got: Sequence[Row], *inputs: Sequence[Row], key: str = "id") -> None:
    """The table holds exactly what upserting `inputs` in order gives: nothing lost, nothing extra."""
    actual = sorted((dict(r) for r in got), key=lambda r: r[key])
    want = expected_rows(*inputs, key=key)
    missing = {r[key] for r in want} - {r[key] for r in actual}
    extra = {r[key] for r in actual} - {r[key] for r in want}
    assert actual == want, f"table differs: missing keys {sorted(missing)[:10]}, extra {sorted(extra)[:10]}"


def check_ran_once(status: Mapping[str, Any]) -> None:
    """A writer that ran to its end in one attempt, never part of a conflict."""
    assert status.get("phase") == "Succeeded", status
    assert status["attempts"]["total"] == 1, status["attempts"]
    assert "lastConflict" not in status, status["lastConflict"]


def check_conflict_decided(loser: Mapping[str, Any], winner: Mapping[str, Any], *, winner_instant: str,
                           winner_writer: str, loser_name: str) -> dict[str, Any]:
    """The supervisor's decision as both writers' status records it; returns the loser's record."""
    lost, won = dict(loser["lastConflict"]), dict(winner["lastConflict"])
    assert lost["role"] == "Lost" and won["role"] == "Won", (lost, won)
    assert lost["other"] == winner_instant and lost["otherWriter"] == winner_writer, lost
    assert lost["fileGroups"], "the decision names the file groups both writes hold"
    assert lost["submission"].startswith(f"{loser_name}-1-"), "the first attempt is the one stopped"
    assert won["instant"] == winner_instant, won
    return lost


def check_restarted_after_conflict(status: Mapping[str, Any]) -> None:
    """A loser with onConflict Restart: stopped once, then ran through."""
    assert status.get("phase") == "Succeeded", status
    assert [h["cause"] for h in status["history"]] == ["conflict", "success"], status["history"]


def check_aborted_on_conflict(status: Mapping[str, Any], winner_instant: str) -> None:
    """A loser with onConflict Abort: stays Aborted, saying why."""
    assert status.get("phase") == "Aborted", status
    assert status["lastConflict"]["other"] == winner_instant, status["lastConflict"]
    assert "onConflict Abort" in str(status["conditions"]), status["conditions"]


def check_conflict_events(loser_events: Sequence[Mapping[str, Any]],
                          winner_events: Sequence[Mapping[str, Any]]) -> None:
    """`kubectl describe` of both writers tells the story."""
    assert "ConflictLost" in [e.get("reason") for e in loser_events]
    assert "ConflictWon" in [e.get("reason") for e in winner_events]
