"""The demo's "What supervision decided" lines: a writer's status.lastConflict as a sentence (file groups
listed, not a Python list; the loser's bytes rolled back, a winner none of its own; a void decision and a
writer the operator does not run said as such)."""

from __future__ import annotations

from lakeoperator.dev.demo import conflict_line

LOST = {"role": "Lost", "instant": "20261128102116006", "other": "20261128102118474",
        "otherWriter": "default/orders-ingest", "fileGroups": ["00000000", "00000001"],
        "bytesWritten": 628365, "decidedBy": "weir-operator", "at": "2026-11-28T10:21:21Z"}


def test_the_loser_names_the_file_groups_and_the_bytes_rolled_back() -> None:
    assert conflict_line(LOST) == (
        "lost the conflict of its write 20261128102116006 against write 20261128102118474 "
        "(default/orders-ingest) on file groups 00000000, 00000001; the 628,365 bytes it had written were "
        "rolled back; decided by weir-operator at 2026-11-28T10:21:21Z")


def test_the_winner_has_no_bytes_of_its_own() -> None:
    won = {**LOST, "role": "Won", "instant": LOST["other"], "other": LOST["instant"],
           "otherWriter": "default/orders-erase", "bytesWritten": 0}
    line = conflict_line(won)
    assert line.startswith("won the conflict of its write 20261128102118474 against write "
                           "20261128102116006 (default/orders-erase) on file groups 00000000, 00000001; "
                           "decided by"), line
    assert "bytes" not in line


def test_a_void_decision_and_an_unknown_writer_are_said() -> None:
    line = conflict_line({**LOST, "void": True, "otherWriter": None, "fileGroups": []})
    assert "(a writer the operator does not run) on file groups none named" in line, line
    assert "void: the loser committed before it could be aborted" in line and "rolled back" not in line
