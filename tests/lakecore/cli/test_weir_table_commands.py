import json
import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

from lakecore.cli.main import app

runner = CliRunner()


def weir(*args):
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def event_table(uri: str) -> None:
    """An empty event-time table (id key, ts ordering) with one bucket."""
    assert weir("table", "create", uri, "--schema", "id:int64,ts:int64", "--record-key", "id",
                "--ordering-field", "ts", "--buckets", "1")[0] == 0


def upsert_json(tmp_path, uri: str, name: object, lines: str) -> None:
    """Upsert JSON lines through the CLI (from a file named after `name`)."""
    src = tmp_path / f"{name}.json"
    src.write_text(lines)
    assert weir("table", "upsert", uri, "-i", str(src))[0] == 0


def test_create_upsert_read_timeline_describe(tmp_path):
    uri = str(tmp_path / "t")
    code, out = weir("table", "create", uri, "--schema", "id:int64,ts:int64,name:string",
                     "--record-key", "id", "--ordering-field", "ts", "--buckets", "2")
    assert code == 0, out
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [1, 2], "ts": [1, 1], "name": ["a", "b"]}), src)
    code, out = weir("table", "upsert", uri, "--input", str(src), "--json")
    assert code == 0, out
    assert json.loads(out)["records"] == 2
    csv = tmp_path / "more.csv"
    csv.write_text("id,ts,name\n2,5,B\n3,5,c\n")
    assert weir("table", "upsert", uri, "-i", str(csv))[0] == 0

    code, out = weir("table", "read", uri, "--format", "json")
    assert code == 0
    rows = {r["id"]: r["name"] for r in map(json.loads, out.splitlines())}
    assert rows == {1: "a", 2: "B", 3: "c"}
    code, out = weir("table", "read", uri)  # human view
    assert code == 0 and "3 rows" in out

    code, out = weir("table", "timeline", uri, "--json")
    instants = json.loads(out)
    assert [i["state"] for i in instants] == ["completed", "completed"]
    first = instants[0]["instant"]
    code, out = weir("table", "read", uri, "--as-of", first, "--format", "csv")
    assert code == 0 and out.splitlines()[0] == '"id","ts","name"' and len(out.splitlines()) == 3
    dest = tmp_path / "out.parquet"
    assert weir("table", "read", uri, "--format", "parquet", "--output", str(dest))[0] == 0
    assert pq.read_table(dest).num_rows == 3

    code, out = weir("table", "describe", uri, "--json")
    info = json.loads(out)
    assert info["instants"]["completed"] == 2 and info["config"]["record_key"] == ["id"]
    code, out = weir("table", "describe", uri)
    assert code == 0 and "event_time" in out


def test_errors_are_one_line_with_a_remedy_and_exit_1(tmp_path):
    code, out = weir("table", "read", str(tmp_path / "missing"))
    assert code == 1 and "no table at" in out and "weir table create" in out
    uri = str(tmp_path / "t")
    assert weir("table", "create", uri, "--schema", "id:int64", "--record-key", "id")[0] == 0
    bad = tmp_path / "bad.json"
    bad.write_text('{"nope": 1}\n')
    code, out = weir("table", "upsert", uri, "--input", str(bad))
    assert code == 1 and "not in the table schema" in out
    code, out = weir("table", "create", uri, "--schema", "id:int64", "--record-key", "id")
    assert code == 1 and "already exists" in out
    code, out = weir("table", "create", str(tmp_path / "u"), "--schema", "id:uuid", "--record-key", "id")
    assert code == 1 and "unknown type" in out
    for entry in ("id int64", ":int64"):   # read as a type '' once, or a column without a name
        code, out = weir("table", "create", str(tmp_path / "u"), "--schema", entry, "--record-key", "id")
        assert code == 1 and f"--schema entry {entry!r} is not NAME:TYPE" in out, out
    code, out = weir("table", "create", str(tmp_path / "u"), "--schema", "id: int64, ts :int64",
                     "--record-key", "id")
    assert code == 0, out   # spaces around the colon are no mistake


def test_partial_update_table_from_the_cli(tmp_path):
    uri = str(tmp_path / "w")
    code, out = weir("table", "create", uri, "--schema", "id:int64,a:int64,ta:int64,b:string,tb:int64",
                     "--record-key", "id", "--group", "ga:ta:a", "--group", "gb:tb:b")
    assert code == 0, out
    (tmp_path / "a.json").write_text('{"id": 1, "a": 5, "ta": 2}\n')
    (tmp_path / "b.json").write_text('{"id": 1, "b": "x", "tb": 1}\n')
    assert weir("table", "upsert", uri, "-i", str(tmp_path / "a.json"))[0] == 0
    assert weir("table", "upsert", uri, "-i", str(tmp_path / "b.json"))[0] == 0
    code, out = weir("table", "read", uri, "--format", "json")
    assert json.loads(out) == {"id": 1, "a": 5, "ta": 2, "b": "x", "tb": 1}


def test_installed_entry_point_runs(tmp_path):
    exe = shutil.which("weir", path=os.path.dirname(sys.executable))
    assert exe, "the `weir` console script is not installed in this venv"
    proc = subprocess.run([exe, "table", "create", str(tmp_path / "t"), "--schema", "id:int64",
                           "--record-key", "id", "--json"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["record_key"] == ["id"]


def test_compact_dry_run_then_compact(tmp_path):
    uri = str(tmp_path / "t")
    event_table(uri)
    for ts in (1, 2):
        upsert_json(tmp_path, uri, ts, f'{{"id": 1, "ts": {ts}}}\n{{"id": {ts + 1}, "ts": {ts}}}\n')
    code, out = weir("table", "compact", uri, "--dry-run", "--json")
    assert code == 0 and json.loads(out)["operations"][0]["logs"] == 2
    assert len(json.loads(weir("table", "timeline", uri, "--json")[1])) == 2  # dry run changed nothing
    code, out = weir("table", "compact", uri, "--json")
    assert code == 0 and json.loads(out)["file_groups"] == 1
    actions = [i["action"] for i in json.loads(weir("table", "timeline", uri, "--json")[1])]
    assert actions == ["deltacommit", "deltacommit", "compaction"]
    code, out = weir("table", "read", uri, "--format", "json")
    assert sorted(json.loads(line)["id"] for line in out.splitlines()) == [1, 2, 3]
    assert weir("table", "compact", uri)[1].strip() == "nothing to compact"


def test_clean_is_a_dry_run_unless_asked(tmp_path):
    uri = str(tmp_path / "t")
    event_table(uri)
    for ts in (1, 2):
        upsert_json(tmp_path, uri, ts, f'{{"id": 1, "ts": {ts}}}\n')
    assert weir("table", "compact", uri)[0] == 0
    keep_one = ["--policy", "keep_latest_file_versions", "--retain", "1"]
    code, out = weir("table", "clean", uri, *keep_one, "--json")
    planned = json.loads(out)["files"]
    assert code == 0 and len(planned) == 2
    assert all(os.path.exists(os.path.join(uri, f)) for f in planned)  # a dry run deletes nothing
    code, out = weir("table", "clean", uri, *keep_one, "--run", "--json")
    assert code == 0 and sorted(json.loads(out)["deleted"]) == sorted(planned)
    assert not any(os.path.exists(os.path.join(uri, f)) for f in planned)
    code, out = weir("table", "read", uri, "--format", "json")
    assert json.loads(out) == {"id": 1, "ts": 2}
    first = json.loads(weir("table", "timeline", uri, "--json")[1])[0]["instant"]
    code, out = weir("table", "read", uri, "--as-of", first)
    assert code == 1 and "retain more" in out


def test_clean_says_which_dead_writes_it_rolled_back(tmp_path):
    """`clean --run` rolls dead writes back first; it said "nothing to clean" when no file was due."""
    from lakecore import Table
    from lakecore.concurrency import begin_write
    from lakecore.concurrency.liveness.heartbeat import mark_aborted
    from lakecore.timeline import now_ms

    uri = str(tmp_path / "t")
    event_table(uri)
    upsert_json(tmp_path, uri, 1, '{"id": 1, "ts": 1}\n')
    t = Table.open(uri)
    dead = [begin_write(t.storage, t.config, t.lock, "upsert").instant.requested_time for _ in range(2)]
    mark_aborted(t.storage, dead[0], "a test", now_ms())   # its writer is gone: rolled back at once
    code, out = weir("table", "clean", uri, "--run")
    assert code == 0 and out.strip() == f"rolled back 1 dead write ({dead[0]}); no file was due for deletion"
    mark_aborted(t.storage, dead[1], "a test", now_ms())
    code, out = weir("table", "clean", uri, "--run", "--json")
    assert code == 0 and json.loads(out) == {"deleted": [], "rolled_back": [dead[1]]}
    assert weir("table", "clean", uri, "--run")[1].strip() == "nothing to clean"


def test_savepoint_restore_and_rollback_of_the_latest_write(tmp_path):
    uri = str(tmp_path / "t")
    assert weir("table", "create", uri, "--schema", "id:int64,v:string", "--record-key", "id")[0] == 0
    for n in (1, 2, 3):
        upsert_json(tmp_path, uri, n, f'{{"id": {n}, "v": "v{n}"}}\n')
    first, _, third = [i["instant"] for i in json.loads(weir("table", "timeline", uri, "--json")[1])]
    code, out = weir("table", "rollback", uri, third, "--json")  # without --yes: what it would do
    assert code == 0 and json.loads(out)["dry_run"] and json.loads(out)["state"] == "completed"
    code, out = weir("table", "rollback", uri, third, "--yes", "--json")
    assert code == 0

    def ids():
        return sorted(json.loads(line)["id"] for line in weir("table", "read", uri, "--format", "json")[1]
                      .splitlines())

    assert ids() == [1, 2]
    sp = json.loads(weir("table", "savepoint", uri, first, "--json")[1])["savepoint"]
    code, out = weir("table", "restore", uri, sp, "--json")
    assert code == 0 and json.loads(out)["dry_run"] and ids() == [1, 2]  # dry run by default
    code, out = weir("table", "restore", uri, sp)
    second = json.loads(weir("table", "timeline", uri, "--json")[1])[1]
    assert code == 0 and f"would undo 1 instant ({second['instant']} {second['action']}) and delete 1 " \
        "data file; run with --run to do it" in out, out
    assert weir("table", "restore", uri, sp, "--run")[0] == 0
    assert ids() == [1]
    code, out = weir("table", "rollback", uri, first)
    assert code == 1 and "savepoint" in out  # pinned by the savepoint
    assert f"`weir table savepoint URI --delete {sp}`" in " ".join(out.split()), out
    code, out = weir("table", "savepoint", uri, "--list")
    assert code == 0 and out == f"savepoint {sp} pins instant {first} (1 data file)\n", out
    assert json.loads(weir("table", "savepoint", uri, "--list", "--json")[1]) == [
        {"savepoint": sp, "savepointed": first, "files": 1, "comment": ""}]
    code, out = weir("table", "savepoint", uri, first, "--list")
    assert code == 1 and "give one of INSTANT (to pin it), --list or --delete SAVEPOINT, not INSTANT and " \
        "--list" in out, out
    code, out = weir("table", "savepoint", uri, "--delete", sp)
    assert code == 0 and out.startswith(f"deleted savepoint {sp} (instant "), out
    assert weir("table", "savepoint", uri, "--list")[1].startswith("no savepoints")
    code, out = weir("table", "rollback", uri, first, "--yes")
    assert code == 0 and ids() == [], out   # let go: the write it pinned can be rolled back


def test_archive_dry_run_then_archive_and_list_archived_instants(tmp_path):
    uri = str(tmp_path / "t")
    event_table(uri)
    for ts in range(1, 8):
        upsert_json(tmp_path, uri, ts, f'{{"id": {ts % 3}, "ts": {ts}}}\n')
    small = ["--min-instants", "2", "--max-instants", "4"]
    code, out = weir("table", "archive", uri, *small, "--dry-run", "--json")
    assert code == 0 and json.loads(out)["count"] == 5
    assert len(json.loads(weir("table", "timeline", uri, "--json")[1])) == 7  # the dry run changed nothing
    code, out = weir("table", "archive", uri, *small)
    assert code == 0 and "archived 5 instants" in out
    assert len(json.loads(weir("table", "timeline", uri, "--json")[1])) == 2
    everything = json.loads(weir("table", "timeline", uri, "--archived", "--json")[1])
    assert [i["records"] for i in everything] == [1] * 7 and everything[0]["state"] == "completed"
    assert "5 older ones archived" in weir("table", "timeline", uri)[1]
    code, out = weir("table", "read", uri, "--as-of", everything[1]["instant"], "--format", "json")
    assert code == 0 and sorted(json.loads(line)["ts"] for line in out.splitlines()) == [1, 2]
    code, out = weir("table", "archive", uri, "--min-instants", "3", "--max-instants", "3")
    assert code == 1 and "below max_instants" in out
    assert weir("table", "archive", uri, *small)[1].strip() == "nothing to archive"


def test_a_compaction_left_pending_is_named_then_resumed_or_rolled_back_from_the_cli(tmp_path):
    from lakecore import Table
    from lakecore.services import schedule_compaction

    uri = str(tmp_path / "t")
    event_table(uri)
    for ts in (1, 2):
        upsert_json(tmp_path, uri, ts, f'{{"id": {ts}, "ts": {ts}}}\n')
    t = Table.open(uri)
    plan = schedule_compaction(t.storage, t.config, t.lock)  # as if its process died after planning
    assert plan is not None
    code, out = weir("table", "compact", uri)
    assert code == 1 and "compact --resume" in out and f"rollback URI {plan.instant_time}" in out
    code, out = weir("table", "compact", uri, "--resume", "--json")
    assert code == 0 and json.loads(out)["compaction"] == plan.instant_time
    assert weir("table", "compact", uri, "--resume")[1].strip() == "nothing to compact"
    upsert_json(tmp_path, uri, 3, '{"id": 3, "ts": 3}\n')
    again = schedule_compaction(t.storage, t.config, t.lock)
    assert again is not None
    code, out = weir("table", "rollback", uri, again.instant_time, "--yes")
    assert code == 0 and again.instant_time not in [i["instant"] for i in
                                                    json.loads(weir("table", "timeline", uri, "--json")[1])]
    code, out = weir("table", "read", uri, "--format", "json")
    assert sorted(json.loads(line)["id"] for line in out.splitlines()) == [1, 2, 3]


def test_rollback_and_savepoint_dry_runs_change_nothing(tmp_path):
    uri = str(tmp_path / "t")
    event_table(uri)
    for ts in (1, 2):
        upsert_json(tmp_path, uri, ts, f'{{"id": {ts}, "ts": {ts}}}\n')
    before = weir("table", "timeline", uri, "--json")[1]
    first, last = (i["instant"] for i in json.loads(before))
    code, out = weir("table", "rollback", uri, last, "--dry-run", "--json")
    planned = json.loads(out)
    assert code == 0 and planned["dry_run"] and len(planned["files"]) == 1
    assert all(os.path.exists(os.path.join(uri, f)) for f in planned["files"])
    code, out = weir("table", "savepoint", uri, first, "--dry-run", "--json")
    assert code == 0 and json.loads(out)["savepointed"] == first and json.loads(out)["files"]
    assert weir("table", "timeline", uri, "--json")[1] == before  # neither dry run wrote an instant
    assert "would roll back" in weir("table", "rollback", uri, last, "--dry-run")[1]
    code, out = weir("table", "rollback", uri, last, "--yes")
    assert code == 0 and not any(os.path.exists(os.path.join(uri, f)) for f in planned["files"])


def test_a_rollback_dry_run_says_when_the_write_is_alive(tmp_path):
    """The dry run of a live writer's pending write said "rerun with --yes to do it", and --yes was then
    refused (WriterLive). It now says the write is alive and that --yes is refused until its heartbeat
    expires; with --force the plan is the plain one."""
    from lakecore import Table
    from lakecore.concurrency import begin_write
    from lakecore.write import conform, route, write_file_group

    uri = str(tmp_path / "t")
    event_table(uri)
    t = Table.open(uri)
    txn = begin_write(t.storage, t.config, t.lock, "upsert")   # a writer in flight: its heartbeat is fresh
    for g in route(conform(pa.table({"id": [1], "ts": [1]}), t.config, "upsert").rows, t.config):
        write_file_group(txn.context(), g)
    pending = txn.instant.requested_time
    code, out = weir("table", "rollback", uri, pending)
    assert code == 0, out
    assert "but it is alive (its writer's heartbeat is fresh): --yes is refused until its heartbeat " \
        "expires" in " ".join(out.split()), out
    assert json.loads(weir("table", "rollback", uri, pending, "--json")[1])["live"] == \
        "its writer's heartbeat is fresh"
    code, out = weir("table", "rollback", uri, pending, "--yes")
    assert code != 0 and "is alive" in out
    code, out = weir("table", "rollback", uri, pending, "--force")
    assert code == 0 and "rerun with --yes to do it" in out and "alive" not in out
    code, out = weir("table", "rollback", uri, pending, "--force", "--yes")
    assert code == 0, out
    rollback = json.loads(weir("table", "timeline", uri, "--json")[1])[-1]["instant"]
    assert f"rollback {rollback} undid {pending}" in weir("table", "timeline", uri)[1]   # the write undone


def test_the_input_file_is_an_argument_or_input_once(tmp_path):
    uri = str(tmp_path / "t")
    event_table(uri)
    src, other = tmp_path / "a.json", tmp_path / "b.json"
    src.write_text('{"id": 1, "ts": 1}\n')
    other.write_text('{"id": 2, "ts": 1}\n')
    assert weir("table", "upsert", uri, str(src))[0] == 0
    assert weir("table", "insert", uri, str(other), "--bulk")[0] == 0
    code, out = weir("table", "delete", uri)
    assert code == 1 and "give the file to delete: `weir table ... URI FILE` or `--input FILE`" in out, out
    code, out = weir("table", "upsert", uri, str(src), "--input", str(other))
    assert code == 1 and "two input files given" in out, out
    assert weir("table", "upsert", uri, str(src), "--input", str(src))[0] == 0   # the same file twice
    code, out = weir("table", "timeline", uri, "--json")
    assert [i["operation"] for i in json.loads(out)] == ["upsert", "bulk_insert", "upsert"]
