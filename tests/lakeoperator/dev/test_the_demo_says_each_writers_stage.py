"""The demo words a running writer's stage from its status and its write's markers: its driver
submitted, starting, a write begun, the file groups written so far; between two writes of a stream, the
last one committed, or — stopped from outside — ended without a commit. A writer that runs no driver
has no stage."""

from __future__ import annotations

from lakeoperator.dev.demo_progress import short, writer_stage

W = "20261126081519486"


def test_each_stage_of_a_running_writer() -> None:
    assert writer_stage({"phase": "Submitted"}, None) == "driver submitted"
    starting = writer_stage({"phase": "Running"}, None)
    assert starting == "Spark driver starting (JVM, Spark session, reading its input)"
    assert short(starting or "") == "Spark driver starting"
    current = {"phase": "Running", "currentInstant": W}
    assert writer_stage(current, 0) == f"write {W} begun: reading and routing its input"
    assert writer_stage(current, 1) == f"writing {W}: 1 file group so far"
    assert writer_stage(current, 3) == f"writing {W}: 3 file groups so far"
    assert writer_stage({"phase": "Running"}, None, (W, True)) == \
        f"committed {W}; its driver looks for more input or ends"
    assert writer_stage({"phase": "Running"}, None, (W, False)) == \
        f"write {W} ended without a commit; its driver stops"


def test_a_writer_without_a_driver_has_no_stage() -> None:
    for phase in ("Pending", "BackingOff", "Succeeded", "Failed", "Suspended"):
        assert writer_stage({"phase": phase, "currentInstant": W}, 2) is None
