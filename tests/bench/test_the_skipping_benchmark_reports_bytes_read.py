"""`bench/skipping_bench.py --quick` runs end to end (a clustered table on local disk, bytes counted as
Arrow reads them) and reports the filtered read's bytes against the whole read's, with its bar: the
smoke check that keeps the benchmark working. The bar is the benchmark's business (at --quick sizes
the footers weigh more than at full size); the test checks the figures and that skipping happened."""

from __future__ import annotations

from pathlib import Path

from tests.bench.quick import run_quick


def test_the_quick_skipping_benchmark_reports_bytes_read_against_a_whole_read(tmp_path: Path) -> None:
    out, _ = run_quick("skipping_bench.py", tmp_path)
    assert out["same_rows_as_whole_read_filtered"] is True
    assert 0.005 <= out["selected_share"] <= 0.015
    assert out["bar"] == 0.10 and 0 < out["bytes_ratio"] < 0.5
    assert 0 < out["filtered_read"]["bytes"] < out["whole_read"]["bytes"]
