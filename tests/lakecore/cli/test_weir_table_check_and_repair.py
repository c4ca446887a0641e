"""Every kind of damaged metadata gives an error that names a command, and that command (run here,
parsed from the error) makes the table readable and correct again:
(a) a corrupted newest history manifest, (b) a lost table.json, (c) a truncated newest completed
instant, (d) a garbled older instant (writers refuse the table until it is repaired): both instants
are rebuilt from their data files, so no row is lost. `check` and `repair` exit 0 (nothing wrong),
2 (what `repair --run` fixes) or 3 (what needs a human), a dry run and a run alike."""

import json
import os
import re
import shlex

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from lakecore import Table
from lakecore.cli.main import app
from lakecore.services import ArchivalPolicy
from lakecore.table import AfterCommitOptions, WriterOptions
from lakecore.timeline.history_store import HistoryStore, clear_history_cache, manifest_path
from lakecore.timeline.store import clear_cache

runner = CliRunner()
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64())])
SMALL = ArchivalPolicy(min_instants=3, max_instants=5, fanout=3)


def weir(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def forget_caches() -> None:
    """Files were changed behind lakecore's back (as a disk fault would)."""
    clear_cache()
    clear_history_cache()


def run_named_command(error: str) -> str:
    """Run the `weir ...` command an error names (the one that acts, when it names a dry run first);
    returns its output (it must succeed)."""
    commands = re.findall(r"`(weir [^`]+)`", error)
    assert commands, f"the error names no command: {error}"
    acting = [c for c in commands if "--run" in c]
    args = shlex.split((acting or commands)[0])[1:]
    code, out = weir(*args)
    assert code == 0, out
    return out


def table_with_rows(uri: str, n: int, *, archive: bool = False, **kw) -> Table:
    t = Table.create(uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2, **kw)
    t = Table.open(uri, options=WriterOptions(after_commit=AfterCommitOptions(archival=None)))
    for i in range(n):
        t.upsert(pa.table({"id": [i], "ts": [1]}))
        if archive and i % 6 == 5:
            t.maintenance.archive(SMALL)
    return t


def ids(uri: str) -> list[int]:
    code, out = weir("table", "read", uri, "--format", "json")
    assert code == 0, out
    return sorted(json.loads(line)["id"] for line in out.splitlines())


def test_a_corrupted_history_manifest_falls_back_without_losing_archived_instants(tmp_path):
    uri = str(tmp_path / "t")
    t = table_with_rows(uri, 35, archive=True)
    pointers = [n for n in os.listdir(os.path.join(uri, ".weir", "timeline")) if n.startswith("history-")]
    assert len(pointers) >= 3, "archival keeps older versions to fall back to"
    newest = HistoryStore(t.storage).current_version()
    path = os.path.join(uri, manifest_path(newest))
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) // 2)
    forget_caches()

    code, out = weir("table", "read", uri)
    assert code == 1 and "manifest" in out
    code, check = weir("table", "check", uri, "--json")
    assert code == 2 and [p["kind"] for p in json.loads(check)["problems"]] == ["history_corrupt"]
    code, plan = weir("table", "repair", uri)  # dry run: nothing changes
    assert code == 2 and "fall back" in plan and weir("table", "read", uri)[0] == 1
    run_named_command(out)
    assert ids(uri) == list(range(35))
    assert weir("table", "check", uri)[0] == 0
    assert os.listdir(os.path.join(uri, ".weir", "quarantine"))
    # archival goes on from the older version and nothing is lost
    for _ in range(3):
        code, out = weir("table", "archive", uri, "--min-instants", "3", "--max-instants", "5",
                         "--fanout", "3")
        assert code == 0, out
        forget_caches()
        assert ids(uri) == list(range(35))


def test_b_a_lost_table_json_is_recreated_from_the_timeline_and_create_refuses_the_path(tmp_path):
    uri = str(tmp_path / "t")
    t = table_with_rows(uri, 4, partition_fields=(), tombstone_retention_hours=2.0)
    original = t.config.to_json()
    os.remove(os.path.join(uri, ".weir", "table.json"))

    code, out = weir("table", "create", uri, "--schema", "id:int64,ts:int64", "--record-key", "id",
                     "--buckets", "7")
    assert code == 1 and "repair" in out
    assert not os.path.exists(os.path.join(uri, ".weir", "table.json"))
    code, out = weir("table", "read", uri)
    assert code == 1
    run_named_command(out)
    assert Table.open(uri).config.to_json() == original
    src = tmp_path / "again.json"
    src.write_text("".join(json.dumps({"id": i, "ts": 2}) + "\n" for i in range(4)))
    assert weir("table", "upsert", uri, "-i", str(src))[0] == 0
    assert ids(uri) == [0, 1, 2, 3]  # upserts still land on the same buckets: no duplicate keys


def test_c_a_truncated_newest_instant_is_rebuilt_from_its_data_files(tmp_path):
    uri = str(tmp_path / "t")
    t = table_with_rows(uri, 5)
    newest = t.timeline().completed[-1]
    path = os.path.join(uri, ".weir", "timeline", newest.file_name)
    with open(path, "r+b") as fh:
        fh.truncate(10)
    forget_caches()

    code, out = weir("table", "read", uri)
    assert code == 1 and newest.file_name in out and "weir table repair" in out
    code, check = weir("table", "check", uri)
    assert code == 2 and newest.file_name in check and "rebuild it from its 1 data file" in check
    run_named_command(out)
    assert ids(uri) == [0, 1, 2, 3, 4]  # the damaged write's rows are still read: nothing lost
    quarantined = os.listdir(os.path.join(uri, ".weir", "quarantine"))
    assert [n for n in quarantined if n.endswith(newest.file_name)], "the damaged bytes are kept"
    assert weir("table", "check", uri)[0] == 0


def test_d_writers_refuse_a_garbled_older_instant_until_repair_rebuilds_it(tmp_path):
    uri = str(tmp_path / "t")
    t = table_with_rows(uri, 6)
    older = t.timeline().completed[2]  # wrote id 2
    path = os.path.join(uri, ".weir", "timeline", older.file_name)
    with open(path, "wb") as fh:
        fh.write(b'{"operation": "upsert", "write_stats": [{"garbled')
    forget_caches()
    before = len(t.timeline().instants)

    src = tmp_path / "more.json"
    src.write_text('{"id": 10, "ts": 1}\n')
    code, out = weir("table", "upsert", uri, "-i", str(src))
    assert code == 1 and older.file_name in out and "weir table repair" in out
    forget_caches()
    assert len(t.timeline().instants) == before, "nothing was committed on top of the damage"
    run_named_command(out)
    assert ids(uri) == [0, 1, 2, 3, 4, 5]
    assert weir("table", "upsert", uri, "-i", str(src))[0] == 0
    assert ids(uri) == [0, 1, 2, 3, 4, 5, 10]


def test_a_garbled_table_json_is_quarantined_and_recreated(tmp_path):
    uri = str(tmp_path / "t")
    t = table_with_rows(uri, 2)
    original = t.config.to_json()
    with open(os.path.join(uri, ".weir", "table.json"), "wb") as fh:
        fh.write(b'{"format_version": 1, "na')
    code, out = weir("table", "read", uri)
    assert code == 1
    run_named_command(out)
    assert Table.open(uri).config.to_json() == original
    assert ids(uri) == [0, 1]


def test_a_recreated_table_json_warns_of_the_settings_changed_since_the_newest_write(tmp_path):
    """A codec set after the newest write is not on the timeline: table.json comes back with the one
    that write recorded, and the repair says so (it said nothing, with a null warning)."""
    uri = str(tmp_path / "t")
    t = table_with_rows(uri, 2)
    t.set_compression("gzip")
    with open(os.path.join(uri, ".weir", "table.json"), "wb") as fh:
        fh.write(b'{"format_version": 1, "na')
    code, out = weir("table", "repair", uri, "--run", "--json")
    assert code == 0, out
    (action,) = [a for a in json.loads(out)["actions"] if a["kind"] == "recreate_config"]
    assert "settings changed since the newest write that recorded them are not on the timeline" in \
        action["warning"] and "codec zstd" in action["warning"], action
    assert Table.open(uri).config.compression == "zstd"


def test_a_table_whose_writes_never_recorded_their_config_cannot_be_recreated(tmp_path):
    uri = str(tmp_path / "t")
    t = table_with_rows(uri, 2)
    for inst in t.timeline().completed:  # as written before writes recorded the table config
        path = os.path.join(uri, ".weir", "timeline", inst.file_name)
        with open(path) as fh:
            body = json.load(fh)
        body.pop("table")
        with open(path, "w") as fh:
            json.dump(body, fh)
    forget_caches()
    os.remove(os.path.join(uri, ".weir", "table.json"))
    code, out = weir("table", "repair", uri)
    assert code == 3 and "cannot" in out and "backup" in out
    code, out = weir("table", "repair", uri, "--run")
    assert code == 3 and "table.json" in out
    assert not os.path.exists(os.path.join(uri, ".weir", "table.json"))


def test_check_reports_a_missing_data_file_and_repair_leaves_it_to_a_backup(tmp_path):
    uri = str(tmp_path / "t")
    t = table_with_rows(uri, 3)
    stat = t.commit_metadata(t.timeline().completed[0]).write_stats[0]
    os.remove(os.path.join(uri, stat.path))
    code, out = weir("table", "check", uri)
    assert code == 3 and stat.path in out and "backup" in out
    assert weir("table", "repair", uri)[0] == 3, "a dry run says what a run leaves"
    code, out = weir("table", "repair", uri, "--run")
    assert code == 3 and stat.path in out


@pytest.mark.parametrize("damage", ["manifest", "instant"])
def test_check_is_read_only(tmp_path, damage):
    uri = str(tmp_path / "t")
    t = table_with_rows(uri, 12, archive=True)
    target = manifest_path(HistoryStore(t.storage).current_version()) if damage == "manifest" else \
        f".weir/timeline/{t.timeline().completed[-1].file_name}"
    with open(os.path.join(uri, target), "wb") as fh:
        fh.write(b"{")
    forget_caches()
    def listing() -> list[str]:
        return sorted(os.path.relpath(os.path.join(d, f), uri) for d, _, fs in os.walk(uri) for f in fs)

    before = listing()
    assert weir("table", "check", uri)[0] == 2
    assert weir("table", "repair", uri)[0] == 2
    assert listing() == before


def test_a_damaged_compaction_plan_is_quarantined_and_the_compaction_rolled_back(tmp_path):
    from lakecore.services import schedule_compaction

    uri = str(tmp_path / "t")
    t = table_with_rows(uri, 4)
    plan = schedule_compaction(t.storage, t.config, t.lock)
    assert plan is not None
    requested = os.path.join(uri, ".weir", "timeline", f"{plan.instant_time}.compaction.requested")
    with open(requested, "wb") as fh:
        fh.write(b'{"instant_time": "')
    code, out = weir("table", "compact", uri, "--resume")
    assert code == 1 and f"weir table repair {uri} --run" in out
    code, check = weir("table", "check", uri)
    assert code == 2 and "compaction.requested" in check
    run_named_command(out)
    assert weir("table", "check", uri)[0] == 0
    assert ids(uri) == [0, 1, 2, 3]
    code, out = weir("table", "compact", uri)
    assert code == 0, out
    assert ids(uri) == [0, 1, 2, 3]


def test_the_exit_codes_are_documented_in_the_help():
    for command in ("check", "repair"):
        code, out = weir("table", command, "--help")
        text = " ".join(out.replace("│", " ").split())
        assert code == 0 and "0 nothing wrong" in text
        assert "2 problems that" in text and "3 a problem a human" in text
