"""An invalid spec, or a LakeWriter whose LakeTable does not exist, becomes Ready=False with reason
InvalidSpec and a Warning Event — never a crash loop and never a driver pod; a paused resource
(weir.dev/paused: "true") is left alone with ReconciliationPaused=True."""

from __future__ import annotations

from datetime import UTC, datetime

from lakeoperator.builders.driver_pod import PodSettings
from lakeoperator.launch.local import LocalLauncher
from lakeoperator.reconcile import reconcile_table, reconcile_writer
from tests.lakeoperator.bodies import lake_table, lake_writer

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def condition(status: dict, kind: str) -> dict:
    return next(c for c in status["conditions"] if c["type"] == kind)


def test_a_writer_of_a_missing_table_is_invalid_and_starts_nothing(tmp_path):
    launcher = LocalLauncher(tmp_path / "state")
    out = reconcile_writer(lake_writer(), None, launcher, NOW, PodSettings())
    ready = condition(out.status, "Ready")
    assert ready["status"] == "False" and ready["reason"] == "InvalidSpec" and "LakeTable" in ready["message"]
    assert out.events and out.events[0][:2] == ("Warning", "InvalidSpec") and out.done
    assert launcher.pods() == []


def test_a_missing_table_is_answered_with_the_likely_one_and_a_bad_one_by_its_field(tmp_path):
    launcher = LocalLauncher(tmp_path / "state")
    named = lake_writer()["spec"]["tableRef"]["name"]
    near = reconcile_writer(lake_writer(), None, launcher, NOW, PodSettings(),
                            other_tables=(f"{named}x", "zzz"))
    assert f"no LakeTable {named!r} in namespace lake (did you mean '{named}x'?); create it" in \
        condition(near.status, "Ready")["message"]
    for others in (("a", "b"), (named,)):   # nothing like it; itself: created since it was looked for
        far = reconcile_writer(lake_writer(), None, launcher, NOW, PodSettings(), other_tables=others)
        said = condition(far.status, "Ready")["message"]
        assert f"no LakeTable {named!r} in namespace lake; create it" in said
    table = lake_table()
    table["spec"]["buckets"] = 0
    bad = reconcile_writer(lake_writer(), table, launcher, NOW, PodSettings())
    assert condition(bad.status, "Ready")["message"] == f"tableRef.name: LakeTable {named!r} has an " \
        "invalid spec (spec.buckets: see the LakeTable's status); fix the LakeTable"
    assert launcher.pods() == []


def test_a_writer_of_a_missing_source_table_is_invalid_and_starts_nothing(tmp_path):
    launcher = LocalLauncher(tmp_path / "state")
    body = lake_writer(source={"table": {"name": "raw-orders"}})
    out = reconcile_writer(body, lake_table(), launcher, NOW, PodSettings())
    ready = condition(out.status, "Ready")
    assert ready["reason"] == "InvalidSpec" and ready["message"].startswith("source.table: ")
    assert "'raw-orders'" in ready["message"] and out.done and launcher.pods() == []
    located = reconcile_writer(body, lake_table(), launcher, NOW, PodSettings(), source_location="lake/raw")
    assert located.status["phase"] == "Submitted"


def test_an_invalid_table_spec_is_reported(tmp_path):
    body = lake_table()
    body["spec"]["buckets"] = 0
    out = reconcile_table(body, NOW)
    assert condition(out.status, "Ready")["reason"] == "InvalidSpec" and "buckets" in out.status["lastError"]


def test_a_table_lakecore_would_refuse_is_an_invalid_spec_and_nothing_is_created(tmp_path):
    """The spec is translated into lakecore's TableConfig before storage is touched: a record key of
    type float64 (no stable hash) is refused there, as an invalid spec, never retried as a storage error."""
    body = lake_table(location=str(tmp_path / "orders"),
                      schema=[{"name": "id", "type": "float64", "nullable": False},
                              {"name": "day", "type": "string"}])
    out = reconcile_table(body, NOW)
    ready = condition(out.status, "Ready")
    assert ready["reason"] == "InvalidSpec" and "record_key column 'id'" in ready["message"], ready
    assert out.done and out.events[0][:2] == ("Warning", "InvalidSpec")
    assert not (tmp_path / "orders").exists()


def test_a_paused_writer_is_left_alone(tmp_path):
    launcher = LocalLauncher(tmp_path / "state")
    body = lake_writer()
    body["metadata"]["annotations"] = {"weir.dev/paused": "true"}
    out = reconcile_writer(body, lake_table(), launcher, NOW, PodSettings())
    assert condition(out.status, "ReconciliationPaused")["status"] == "True"
    assert launcher.pods() == [] and out.done


def test_a_writer_waits_for_its_table_to_be_ready(tmp_path):
    launcher = LocalLauncher(tmp_path / "state")
    for status in ({}, {"phase": "Pending"}, {"phase": "Failed", "lastError": "ConfigMismatch"}):
        table = {**lake_table(), "status": status}
        out = reconcile_writer(lake_writer(), table, launcher, NOW, PodSettings())
        progressing = condition(out.status, "Progressing")
        assert (out.status["phase"], progressing["reason"]) == ("Pending", "TableNotReady"), out.status
        assert not out.status.get("submissionId") and launcher.pods() == [] and out.requeue_after == 10.0
    ready = reconcile_writer(lake_writer(), lake_table(), launcher, NOW, PodSettings())
    assert ready.status["phase"] == "Submitted" and ready.status["submissionId"]


def test_a_column_group_the_table_lacks_is_invalid_before_any_driver_starts(tmp_path):
    """It was found by the job, ten seconds after its driver started, with no likely name."""
    launcher = LocalLauncher(tmp_path / "state")
    grouped = lake_table(
        schema=[{"name": "id", "type": "int64", "nullable": False}, {"name": "price", "type": "int64"},
                {"name": "price_ts", "type": "int64"}, {"name": "stock", "type": "int64"},
                {"name": "stock_ts", "type": "int64"}],
        partitionFields=[],
        columnGroups=[{"name": "pricing", "orderingField": "price_ts", "columns": ["price"]},
                      {"name": "stock", "orderingField": "stock_ts", "columns": ["stock"]}])
    out = reconcile_writer(lake_writer(columnGroup="prices"), grouped, launcher, NOW, PodSettings())
    ready = condition(out.status, "Ready")
    assert ready["reason"] == "InvalidSpec" and ready["message"] == (
        "spec.columnGroup: 'prices' is not one of the table's column groups (pricing, stock) (did you mean "
        "'pricing'?); fix it"), ready
    plain = reconcile_writer(lake_writer(columnGroup="prices"), lake_table(), launcher, NOW, PodSettings())
    assert condition(plain.status, "Ready")["message"] == ("spec.columnGroup: 'prices': the table has no "
                                                          "column groups; remove columnGroup")
    assert launcher.pods() == []
