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
from lakecore.cli.errors import describe

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
    ("bad-value.csv", "id,ts\n2,x\n", ("cannot be read as CSV (column 'ts': CSV conversion error to int64",
                                        "check that it is a CSV file")),
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


def test_an_output_folder_that_is_not_there_is_told_before_the_table_is_read(table, tmp_path):
    """Not "a file the table needs is missing ... restore it from a backup": the table is fine."""
    out = tmp_path / "nodir" / "rows.parquet"
    line = one_line_error(weir("table", "read", table.uri, "--output", str(out)),
                          f"the folder '{out.parent}' does not exist", f"mkdir -p {out.parent}")
    assert "backup" not in line and not out.parent.exists()
    one_line_error(weir("table", "read", table.uri, "--output", str(tmp_path)), "is a folder; name a file")


def test_a_read_that_fails_half_way_leaves_no_half_written_output(tmp_path):
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)
    t.upsert(pa.table({"id": list(range(100)), "ts": [1] * 100}))
    damaged = t.commit_metadata(t.timeline().completed[0]).write_stats[-1]
    with open(os.path.join(t.uri, damaged.path), "r+b") as fh:
        fh.seek(4)
        fh.write(b"garbage" * 20)
    for name in ("rows.parquet", "rows.csv", "rows.json"):
        out = tmp_path / name
        out.write_text("kept")
        one_line_error(weir("table", "read", t.uri, "--output", str(out)), "restore it from a backup")
        assert out.read_text() == "kept", "an older file of that name is left as it was"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.csv", "rows.json", "rows.parquet", "t"]


def test_a_missing_file_outside_the_table_is_not_called_the_tables(tmp_path):
    uri = str(tmp_path / "t")
    outside = describe(FileNotFoundError(2, "No such file or directory", str(tmp_path / "in" / "x.csv")), uri)
    assert outside.message == f"no such file or folder: {tmp_path / 'in' / 'x.csv'}; check the path"
    arrow = describe(FileNotFoundError("[Errno 2] Failed to open local file '/nodir/x.parquet'. Detail: "
                                       "[errno 2] No such file or directory"), uri)
    assert arrow.message == "no such file or folder: /nodir/x.parquet; check the path"
    inside = describe(FileNotFoundError(2, "No such file", f"{uri}/.weir/timeline/1.commit"), uri)
    assert inside.message.startswith("a file the table needs is missing") and "weir table check" in \
        inside.message
    s3 = describe(FileNotFoundError(2, "No such key", "bucket/lake/t/.weir/table.json"), "s3://bucket/lake/t")
    assert s3.message.startswith("a file the table needs is missing")


@pytest.mark.parametrize(("args", "fragments"), [
    (("--strategy", "logcount"), ("unknown compaction strategy 'logcount' (did you mean 'log_count'?)",
                                  "use one of all, log_count, log_size, bounded_io")),
    (("--strategy", "log_count", "--min-logs", "0"), ("min_logs must be an integer >= 1, got 0",)),
])
def test_a_bad_compaction_strategy_is_told(table, args, fragments):
    one_line_error(weir("table", "compact", table.uri, *args), *fragments)
    assert len(Table.open(table.uri).timeline().instants) == 1, "nothing was scheduled"


@pytest.mark.parametrize(("schema", "fragments"), [
    ("id:int64,id:string,ts:int64,ts:int8", ("the schema names 'id', 'ts' more than once",)),
    ("id:int,ts:Long", ("unknown type 'int' for column 'id' (did you mean int64?)",)),
    ("id:int64,x:decimal(40,2)", ("type 'decimal(40,2)' of column 'x': a decimal's precision is 1-38",)),
    ("id:int64,x:uuid", ("unknown type 'uuid' for column 'x'", "decimal128(precision,scale)",
                         "--schema-from")),
    (None, ("the table needs columns: give --schema", "or --schema-from")),
])
def test_a_bad_schema_is_told_and_creates_nothing(tmp_path, schema, fragments):
    where = tmp_path / "t"
    one_line_error(weir("table", "create", str(where), *(("--schema", schema) if schema else ()),
                        "--record-key", "id"), *fragments)
    assert not where.exists()


def test_the_laketable_crds_type_names_are_taken_as_written(tmp_path):
    """A column typed as in a LakeTable manifest creates the same column from the command line."""
    where = str(tmp_path / "t")
    schema = "id:int64,day:date32,at:timestamp_ms,seen:timestamp_us,price:decimal128(10, 2),d:date," \
             "t:timestamp"
    done = weir("table", "create", where, "--schema", schema, "--record-key", "id")
    assert done.returncode == 0, done.stderr
    assert [(f.name, f.type) for f in Table.open(where).config.schema] == [
        ("id", pa.int64()), ("day", pa.date32()), ("at", pa.timestamp("ms", "UTC")),
        ("seen", pa.timestamp("us", "UTC")), ("price", pa.decimal128(10, 2)), ("d", pa.date32()),
        ("t", pa.timestamp("us", "UTC"))]


def test_s3_without_credentials_says_which_to_set(tmp_path, monkeypatch):
    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path))              # no ~/.aws
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # nor an instance's role to wait for
    one_line_error(weir("table", "read", "s3://weir-no-such-bucket/t"), "no usable S3 credentials",
                   "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")


@pytest.mark.parametrize(("uri", "fragments"), [
    ("gs://bucket/t", ("a table cannot live on gs:// storage; use a local path, file://, s3://",)),
    ("hdfs://nn/t", ("a table cannot live on hdfs:// storage",)),
    ("s3:/bucket/t", ("names no bucket; use s3://BUCKET/PATH (did you mean s3://bucket/t?)",)),
])
def test_a_location_no_table_can_live_at_is_told(uri, fragments):
    """gs:// was "unexpected ImportError: Please install gcsfs", hdfs:// a raw libhdfs line, s3:/b/x
    "storage 'file' cannot create files atomically"."""
    one_line_error(weir("table", "create", uri, "--schema", "id:int64", "--record-key", "id"), *fragments)


def test_a_schemes_case_does_not_matter():
    done = weir("table", "create", "MEMORY://b/t", "--schema", "id:int64", "--record-key", "id")
    assert done.returncode == 0 and "at memory://b/t" in done.stdout, done.stderr
