"""A TableService whose spec holds again (its table was created) no longer carries the error of before
in `status.lastError` (it said "no LakeTable ... create it" beside Ready True)."""

from __future__ import annotations

from datetime import UTC, datetime

from lakeoperator.builders.driver_pod import PodSettings
from lakeoperator.launch.local import LocalLauncher
from lakeoperator.reconcile import reconcile_service
from tests.lakeoperator.bodies import lake_table, table_service

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def test_a_service_whose_table_appeared_drops_the_error_of_before(tmp_path) -> None:
    launcher = LocalLauncher(tmp_path / "state")
    waiting = reconcile_service(table_service(), None, launcher, NOW, PodSettings())
    assert "no LakeTable 'orders'" in waiting.status["lastError"]
    body = table_service()
    body["status"] = waiting.status
    now = reconcile_service(body, lake_table(), launcher, NOW, PodSettings())
    ready = next(c for c in now.status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True", now.status
    assert now.status.get("lastError") is None
