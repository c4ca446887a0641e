"""The operator's metrics: each instance has its own registry, names and labels are stable (the
dashboard queries them), and the exposition is what Prometheus parses."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from lakeoperator.metrics import OperatorMetrics


def samples(m: OperatorMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(m.exposition().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_counters_histograms_and_phase_gauges():
    m = OperatorMetrics()
    m.record_submission("LakeWriter", "data", "events")
    m.record_submission("LakeWriter", "data", "events")
    m.record_restart("LakeWriter", "data", "events", "conflict")
    m.record_reconcile("LakeWriter", "ok", 0.02)
    m.set_phases("LakeWriter", {"Running": 3}, known=("Running", "Failed"))
    got = samples(m)
    assert got[("weir_submissions_total", (("kind", "LakeWriter"), ("namespace", "data"),
                                           ("table", "events")))] == 2
    assert got[("weir_restarts_total", (("cause", "conflict"), ("kind", "LakeWriter"), ("namespace", "data"),
                                        ("table", "events")))] == 1
    assert got[("weir_reconcile_duration_seconds_count", (("kind", "LakeWriter"), ("outcome", "ok")))] == 1
    assert got[("weir_resources", (("kind", "LakeWriter"), ("phase", "Running")))] == 3
    assert got[("weir_resources", (("kind", "LakeWriter"), ("phase", "Failed")))] == 0


def test_two_operators_do_not_share_counters():
    a, b = OperatorMetrics(), OperatorMetrics()
    a.record_submission("TableService", "ns", "t")
    assert ("weir_submissions_total", (("kind", "TableService"), ("namespace", "ns"), ("table", "t"))) \
        not in samples(b)


def test_a_phase_that_emptied_reads_zero_not_stale():
    m = OperatorMetrics()
    m.set_phases("LakeTable", {"Ready": 2, "Pending": 1})
    m.set_phases("LakeTable", {"Ready": 3}, known=("Ready", "Pending"))
    assert samples(m)[("weir_resources", (("kind", "LakeTable"), ("phase", "Pending")))] == 0
