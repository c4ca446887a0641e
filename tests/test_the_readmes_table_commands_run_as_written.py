"""The `weir table` commands of the README's "The first five minutes", part 3, run as written from the
repository root, with the input files the repository ships (examples/people/): create, two upserts,
the timeline, a read as of the first write's instant (taken from `timeline --json`) that shows the
table before the second write, and a read with `--where`. Only `/tmp/people` is the test's own
directory and `.venv/bin/` this interpreter. The block publishes the table as Iceberg and Delta; the
next block's DuckDB queries read it, through DuckDB's own command line as the README runs it
(`.tools/bin/duckdb`, `make readers`).
(The part's `weir run` block needs Spark: tests/lakeoperator/test_weir_run_runs_the_local_examples.py
runs it.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from lakecore import Table
from tests.support.fixtures import require
from tests.support.readme import DUCKDB_CLI, ROOT, code_blocks, run_block, shims

pytestmark = pytest.mark.slow   # six weir processes


def blocks() -> list[str]:
    return code_blocks(ROOT / "README.md", "**3. Your own tables, locally.**", "**4. On a cluster.**")


def test_the_readmes_table_commands_run_as_written(tmp_path: Path) -> None:
    table_block = next(b for b in blocks() if "weir table create" in b)
    assert "/tmp/people" in table_block and "--as-of" in table_block and "weir table publish" in table_block
    ran = run_block(table_block, cwd=ROOT, bin_dir=shims(tmp_path / "bin"),
                    replace={"/tmp/people": str(tmp_path / "people")})
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    reads = ran.stdout.split("people: ")   # each read's table starts so: as of the first write, then --where
    as_of, where = reads[-2], reads[-1][:reads[-1].index("iceberg:")]
    assert as_of.startswith("3 rows") and "Grace" in as_of
    assert "Grace Hopper" not in as_of and "Edsger" not in as_of
    assert where.startswith("3 rows") and "Grace Hopper" in where and "Edsger" in where and "Ada" not in where
    table = Table.open(str(tmp_path / "people"))
    assert sorted(r["name"] for r in table.read().to_pylist()) == ["Ada", "Alan", "Edsger", "Grace Hopper"]
    assert len(table.timeline().completed) == 2
    assert (tmp_path / "people" / "metadata" / "version-hint.text").exists()
    assert (tmp_path / "people" / "_delta_log").is_dir()


@pytest.mark.readers
def test_the_readmes_duckdb_queries_read_the_published_table(tmp_path: Path) -> None:
    require("DuckDB's command line", None if DUCKDB_CLI.exists() else f"no {DUCKDB_CLI}: run `make readers`")
    table_block = next(b for b in blocks() if "weir table create" in b)
    duckdb_block = next(b for b in blocks() if "duckdb -c" in b)
    assert duckdb_block.count(".tools/bin/duckdb -c ") == 2, duckdb_block
    ran = run_block(table_block + duckdb_block, cwd=ROOT, bin_dir=shims(tmp_path / "bin"),
                    replace={"/tmp/people": str(tmp_path / "people")})
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    queried = ran.stdout[ran.stdout.rindex("readers open:"):]      # after the publishes: DuckDB's tables
    iceberg, delta = queried.split("┌")[1:]
    for name in ("Ada", "Alan", "Edsger", "Grace Hopper"):
        assert name in iceberg
    assert "Grace Hopper" in delta and "Edsger" in delta and "Ada" not in delta
