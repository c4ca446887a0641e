"""`weir table cluster`: a dry run prints the plan and changes nothing; a run records a replacecommit
that `weir table timeline` lists; bad sort columns fail with a one-line error and change nothing."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from lakecore.cli.main import app

runner = CliRunner()


def weir(*args):
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def _table(tmp_path, table_type="merge_on_read"):
    uri = str(tmp_path / "t")
    assert weir("table", "create", uri, "--schema", "id:int64,ts:int64,name:string", "--record-key", "id",
                "--ordering-field", "ts", "--buckets", "2", "--type", table_type)[0] == 0
    for i, names in enumerate((["b", "a", "d"], ["c", "e", "f"])):
        src = tmp_path / f"in{i}.parquet"
        pq.write_table(pa.table({"id": [3 * i, 3 * i + 1, 3 * i + 2], "ts": [1, 1, 1], "name": names}), src)
        assert weir("table", "upsert", uri, "--input", str(src))[0] == 0
    return uri


def _files(tmp_path):
    return sorted(p.name for p in (tmp_path / "t").rglob("*") if p.is_file())


def test_dry_run_prints_the_plan_and_changes_nothing(tmp_path):
    uri = _table(tmp_path)
    before = _files(tmp_path)
    code, out = weir("table", "cluster", uri, "--sort-columns", "name", "--dry-run")
    assert code == 0, out
    assert "would cluster 2 file groups, sorted by name" in out and "00000000" in out
    code, out = weir("table", "cluster", uri, "--strategy", "all", "--max-groups", "1", "--dry-run", "--json")
    plan = json.loads(out)
    assert code == 0 and plan["dry_run"] is True and len(plan["operations"]) == 1
    assert plan["strategy"]["kind"] == "all" and plan["operations"][0]["files"] == 2
    assert _files(tmp_path) == before


def test_cluster_runs_and_the_timeline_lists_the_replacecommit(tmp_path):
    uri = _table(tmp_path, "copy_on_write")
    code, before = weir("table", "read", uri, "--format", "json")
    code, out = weir("table", "cluster", uri, "--sort-columns", "name,id", "--strategy", "all", "--json")
    assert code == 0, out
    done = json.loads(out)
    assert done["file_groups"] == 2 and done["sort_columns"] == ["name", "id"]
    code, out = weir("table", "timeline", uri, "--json")
    last = json.loads(out)[-1]
    assert last["instant"] == done["clustering"] and last["action"] == "replacecommit"
    assert last["state"] == "completed" and last["operation"] == "clustering" and last["file_groups"] == 2
    code, human = weir("table", "timeline", uri)   # (the human view truncates to the terminal width)
    assert code == 0 and "3 instants" in human and "clusteri" in human
    key = lambda r: r["id"]  # noqa: E731
    after = weir("table", "read", uri, "--format", "json")[1]
    assert sorted(map(json.loads, after.splitlines()), key=key) == \
        sorted(map(json.loads, before.splitlines()), key=key)
    code, out = weir("table", "cluster", uri, "--small-file-bytes", "1")
    assert code == 0 and "nothing to cluster" in out


def test_an_unknown_sort_column_is_a_one_line_error_and_changes_nothing(tmp_path):
    uri = _table(tmp_path)
    before = _files(tmp_path)
    code, out = weir("table", "cluster", uri, "--sort-columns", "nmae")
    assert code == 1
    assert "sort column 'nmae' is not a column of table" in out and "id, ts, name" in out
    code, out = weir("table", "cluster", uri, "--strategy", "biggest")
    assert code == 1 and "unknown clustering strategy 'biggest'" in out
    assert _files(tmp_path) == before
