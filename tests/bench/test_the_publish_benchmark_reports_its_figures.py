"""`bench/publish_bench.py --quick` builds a tiny merge-on-read table, publishes it as Iceberg (a full
rebuild, then an incremental publish of an upsert) and reads the published snapshot with pyiceberg (and
DuckDB when its reader environment is built), reporting each figure against its floor and the targets:
the smoke check that keeps the benchmark working. Thresholds are the benchmark's business, not this
test's (no timed assertions)."""

from __future__ import annotations

from pathlib import Path

from tests.bench.quick import run_quick


def test_the_quick_publish_benchmark_reports_publish_costs_and_read_ratios(tmp_path: Path) -> None:
    out, stderr = run_quick("publish_bench.py", tmp_path)
    assert out["targets"] == {"incremental_s_at_10k": 0.2, "full_s_at_10k": 5.0, "read_vs_lakecore": 1.5}
    figures = out["sizes"]["16"]
    assert figures["data_files"] > 0 and figures["full_s"] > 0 and figures["full_floor_s"] > 0
    assert figures["incremental_s"] > 0 and figures["incremental_floor_s"] > 0
    assert figures["full_ratio"] > 0 and figures["incremental_ratio"] > 0
    assert all(n > 0 for n in figures["incremental_files_listed"])
    read = out["read"]
    assert read["rows"] > 0 and read["lakecore_s"] > 0 and read["pyiceberg_vs_lakecore"] > 0
    assert read["pyiceberg_1271_vs_lakecore"] > 0 and read["pyiceberg_1271_v3_vs_lakecore"] > 0
    assert "duckdb_vs_lakecore" in read or "make readers" in read["duckdb_note"]
    assert "incremental" in stderr and "read of" in stderr
