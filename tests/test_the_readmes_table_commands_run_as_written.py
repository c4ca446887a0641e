"""The `weir table` commands of the README's "The first five minutes", part 3, run as written from the
repository root, with the input files the repository ships (examples/people/): create, two upserts,
the timeline, and a read as of the first write's instant (taken from `timeline --json`) that shows the
table before the second write. Only `/tmp/people` is the test's own directory and `.venv/bin/` this
interpreter. (The part's `weir run` block needs Spark:
tests/lakeoperator/test_weir_run_runs_the_local_examples.py runs it.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from lakecore import Table
from tests.support.readme import ROOT, code_blocks, run_block, shims

pytestmark = pytest.mark.slow   # six weir processes


def test_the_readmes_table_commands_run_as_written(tmp_path: Path) -> None:
    blocks = code_blocks(ROOT / "README.md", "**3. Your own tables, locally.**", "**4. On a cluster.**")
    table_block = next(b for b in blocks if "weir table create" in b)
    assert "/tmp/people" in table_block and "--as-of" in table_block
    ran = run_block(table_block, cwd=ROOT, bin_dir=shims(tmp_path / "bin"),
                    replace={"/tmp/people": str(tmp_path / "people")})
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    last = ran.stdout[ran.stdout.rindex("people: "):]   # the read's table
    assert "people: 3 rows" in last and "Grace" in last
    assert "Grace Hopper" not in last and "Edsger" not in last
    table = Table.open(str(tmp_path / "people"))
    assert sorted(r["name"] for r in table.read().to_pylist()) == ["Ada", "Alan", "Edsger", "Grace Hopper"]
    assert len(table.timeline().completed) == 2
