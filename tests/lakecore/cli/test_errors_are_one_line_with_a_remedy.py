"""The real `weir` process, given bad input files, a table missing a data file or a directory it may
not read, prints exactly one line on stderr that ends with what to do and exits 1: no traceback
unless --debug, and a JSON object with --json."""

import json
import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pytest

from lakecore import Table

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64())])


def weir(*args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    cmd = [*prefix, sys.executable, "-c", "from lakecore.cli.main import main; main()", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def one_line_error(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in done.stderr
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def table(tmp_path) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1)
    t.upsert(pa.table({"id": [1, 2], "ts": [1, 1]}))
    return t


@pytest.mark.parametrize(("name", "content", "fragments"), [
    ("empty.csv", "", ("is empty",)),
    ("binary.csv", "\x00\x01\x02", ("cannot be read as CSV",)),
    ("bad-value.csv", "id,ts\n2,x\n", ("cannot be read as CSV", "check that it is a CSV file")),
    ("bad.json", '{"id": 1, "ts": 1}\n{"id": 2, "ts"\n',
     ("cannot be read as JSON lines", "one JSON object per line")),
    ("text.parquet", "this is not parquet\n", ("cannot be read as Parquet", "name it after its real format")),
    ("missing.parquet", None, ("does not exist", "check the path")),
])
def test_bad_input_files(table, tmp_path, name, content, fragments):
    src = tmp_path / name
    if content is not None:
        src.write_text(content)
    one_line_error(weir("table", "upsert", table.uri, "-i", str(src)), str(src), *fragments)
    assert len(Table.open(table.uri).timeline().instants) == 1, "nothing was written"


def test_schema_from_a_file_that_is_not_parquet(tmp_path):
    src = tmp_path / "schema.parquet"
    src.write_text("id,ts\n")
    one_line_error(weir("table", "create", str(tmp_path / "t"), "--schema-from", str(src),
                        "--record-key", "id"), "cannot be read as Parquet")


def test_a_missing_data_file_names_weir_table_check(table):
    stat = table.commit_metadata(table.timeline().completed[0]).write_stats[0]
    os.remove(os.path.join(table.uri, stat.path))
    one_line_error(weir("table", "read", table.uri), stat.file_name, f"weir table check {table.uri}")


def test_a_damaged_data_file_names_weir_table_check(table):
    stat = table.commit_metadata(table.timeline().completed[0]).write_stats[0]
    with open(os.path.join(table.uri, stat.path), "wb") as fh:
        fh.write(b"garbage")
    one_line_error(weir("table", "read", table.uri), "restore it from a backup")


def test_permission_denied(table):
    if os.geteuid() == 0:
        # root reads anything (CAP_DAC_OVERRIDE): run weir without that capability to get a real EACCES
        if shutil.which("setpriv") is None:
            pytest.skip("running as root and setpriv is missing: root cannot be denied a read otherwise")
        prefix: tuple[str, ...] = ("setpriv", "--bounding-set", "-dac_override,-dac_read_search")
    else:
        prefix = ()
    weir_dir = os.path.join(table.uri, ".weir")
    os.chmod(weir_dir, 0)
    try:
        line = one_line_error(weir("table", "read", table.uri, prefix=prefix), "permission denied")
        assert "give this user access" in line
    finally:
        os.chmod(weir_dir, 0o755)


def test_debug_prints_the_traceback_and_json_errors_are_json(table, tmp_path):
    src = tmp_path / "empty.csv"
    src.write_text("")
    debug = weir("--debug", "table", "upsert", table.uri, "-i", str(src))
    assert debug.returncode == 1 and "Traceback" in debug.stderr
    assert "is empty" in debug.stderr.splitlines()[-1]
    as_json = weir("table", "upsert", table.uri, "-i", str(src), "--json")
    assert as_json.returncode == 1 and as_json.stdout == ""
    [line] = as_json.stderr.splitlines()
    error = json.loads(line)["error"]
    assert error["type"] == "InvalidInput" and "is empty" in error["message"] and error["retryable"] is False
