"""`bench/small_slices_bench.py --quick` builds a small table of many file groups and reports its read,
the same read slice by slice and the pyarrow floor over the same files: the smoke check that keeps the
benchmark working. Thresholds are the benchmark's business, not this test's (no timed assertions)."""

from __future__ import annotations

from pathlib import Path

from tests.bench.quick import run_quick


def test_the_quick_small_slices_benchmark_reports_its_ratios(tmp_path: Path) -> None:
    out, stderr = run_quick("small_slices_bench.py", tmp_path)
    assert out["rows"] == 21_000 and out["slices"] == 20 and out["data_files"] == 40
    assert 1 <= out["units"] < out["slices"]   # small slices of a partition read together
    assert out["lakecore_s"] > 0 and out["slice_by_slice_s"] > 0 and out["floor_s"] > 0
    assert out["lakecore_vs_floor"] > 0 and out["lakecore_vs_slice_by_slice"] > 0
    assert "slice by slice" in stderr
