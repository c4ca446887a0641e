"""`weir table check` verifies every data file the latest snapshot reads (its size, its Parquet footer
and row count; `--deep` every page) and names each damaged one with the instant that wrote it and the
remedy that loses least; `weir table read` names the file, with an error that is not retryable.
Remedies: a backup first; rolling back a compaction whose merged files still exist (it loses nothing,
and following it here makes the table read as before); for a write, a rollback only as the last
resort, saying what it drops; none for an instant later ones built on."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from lakecore import Table
from lakecore.cli.main import app
from lakecore.timeline.store import clear_cache

runner = CliRunner()
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("name", pa.string())])


def weir(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def rows(ids: range, ts: int) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "ts": pa.array([ts] * len(ids), pa.int64()),
                     "name": pa.array([f"row {i} at {ts}" for i in ids])})


def table(uri: str, writes: int = 3) -> Table:
    Table.create(uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)
    t = Table.open(uri)
    for n in range(writes):
        t.upsert(rows(range(n * 100, n * 100 + 100), n))
    return t


def newest_log(t: Table):
    newest = t.timeline().completed[-1]
    return newest, t.commit_metadata(newest).write_stats[0]


def problems(uri: str, *extra: str) -> tuple[int, list[dict]]:
    code, out = weir("table", "check", uri, "--json", *extra)
    return code, json.loads(out[: out.rindex("}") + 1])["problems"]


def test_a_truncated_log_file_is_named_with_its_instant_and_reads_fail_not_retryable(tmp_path):
    uri = str(tmp_path / "t")
    t = table(uri)
    instant, stat = newest_log(t)
    path = Path(uri, stat.path)
    path.write_bytes(path.read_bytes()[: stat.bytes // 2])

    code, found = problems(uri)
    assert code == 3
    [p] = found
    assert p["kind"] == "data_file_damaged" and p["path"] == stat.path
    assert p["instant"] == instant.requested_time
    assert "truncated" in p["detail"] and instant.requested_time in p["detail"]
    assert p["remedy"].startswith("restore it from a backup")
    assert f"weir table rollback {uri} {instant.requested_time} --yes" in p["remedy"]
    assert "undoing all of" in p["remedy"] and "100 rows in 2 files" in p["remedy"], "what a rollback costs"
    assert "keys it updated read their earlier values again" in p["remedy"]

    code, out = weir("table", "read", uri, "--json")
    error = json.loads(out.strip().splitlines()[-1])["error"]
    assert code == 1 and error["type"] == "DamagedFile" and error["retryable"] is False
    assert stat.path in error["message"] and instant.requested_time in error["message"]
    assert weir("table", "repair", uri, "--run")[0] == 3, "nothing a repair can do: a human must"


def test_a_garbled_footer_of_the_same_size_is_found(tmp_path):
    uri = str(tmp_path / "t")
    t = table(uri)
    _, stat = newest_log(t)
    path = Path(uri, stat.path)
    data = path.read_bytes()
    path.write_bytes(data[:-40] + b"\xff" * 32 + data[-8:])  # the footer's bytes, same size

    code, found = problems(uri)
    assert code == 3 and [p["path"] for p in found] == [stat.path]
    assert "footer does not read" in found[0]["detail"]
    code, out = weir("table", "read", uri)
    assert code == 1 and stat.path in out and "Retrying does not help: restore it from a backup" in out


def test_garbled_pages_are_found_by_deep_only(tmp_path):
    uri = str(tmp_path / "t")
    t = table(uri)
    _, stat = newest_log(t)
    path = Path(uri, stat.path)
    data = bytearray(path.read_bytes())
    data[4:200] = b"\x17" * 196  # the first column chunk's pages; the footer stays intact
    path.write_bytes(bytes(data))

    assert weir("table", "check", uri)[0] == 0, "by default check reads footers only"
    code, found = problems(uri, "--deep")
    assert code == 3 and [p["path"] for p in found] == [stat.path]
    assert "pages do not decode" in found[0]["detail"]


def test_a_row_count_that_contradicts_the_write_stats_is_found(tmp_path):
    uri = str(tmp_path / "t")
    t = table(uri)
    instant, stat = newest_log(t)
    path = Path(uri, ".weir", "timeline", instant.file_name)
    body = json.loads(path.read_bytes())
    body["write_stats"][0]["records"] += 5
    path.write_text(json.dumps(body))
    clear_cache()

    code, found = problems(uri)
    assert code == 3 and found[0]["path"] == stat.path
    assert f"holds {stat.records} rows where its instant recorded {stat.records + 5}" in found[0]["detail"]


@pytest.mark.parametrize("later_write", [False, True])
def test_a_damaged_compaction_base_is_rolled_back_losing_nothing(tmp_path, later_write):
    """With a later write too: its log files join the slice the compaction merged once it is gone (it
    was refused: the remedy was a backup or losing the later write's rows)."""
    uri = str(tmp_path / "t")
    t = table(uri)
    compaction = t.maintenance.compact().instant
    base = t.commit_metadata(compaction).write_stats[0]
    if later_write:
        t.upsert(rows(range(0, 10), 9))  # logs on top of the compacted base
    before = t.read().sort_by("id")
    path = Path(uri, base.path)
    path.write_bytes(path.read_bytes()[:100])

    code, found = problems(uri)
    assert code == 3 and [p["path"] for p in found] == [base.path]
    remedy = found[0]["remedy"]
    assert "the files it merged still exist, so nothing is lost" in remedy
    [command] = [c for c in re.findall(r"`(weir [^`]+)`", remedy) if "rollback" in c]
    code, out = weir(*shlex.split(command)[1:])
    assert code == 0, out
    clear_cache()
    assert Table.open(uri).read().sort_by("id").equals(before)
    assert weir("table", "check", uri)[0] == 0


def test_an_instant_a_pending_service_needs_is_not_offered_for_rollback(tmp_path):
    from lakecore.services import schedule_compaction

    uri = str(tmp_path / "t")
    t = table(uri)
    compaction = t.maintenance.compact().instant
    base = t.commit_metadata(compaction).write_stats[0]
    t.upsert(rows(range(0, 10), 9))
    pending = schedule_compaction(t.storage, t.config, t.lock)  # it may merge the compacted base
    assert pending is not None
    path = Path(uri, base.path)
    path.write_bytes(path.read_bytes()[:100])

    code, found = problems(uri)
    assert code == 3 and [p["path"] for p in found] == [base.path]
    remedy = found[0]["remedy"]
    assert remedy.startswith("restore it from a backup")
    assert f"compaction {compaction.requested_time} cannot be rolled back alone" in remedy
    assert pending.instant_time in remedy and "weir table rollback" not in remedy
