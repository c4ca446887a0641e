"""`weir table timeline` and `weir table read`, piped at 80 columns, print every instant time whole (the
values `rollback` and `--as-of` take), label every column and cut nothing; on a narrow console the
optional columns go. A delete's figure is named for what it is: the keys it deletes (a key the table
does not hold deletes nothing), not "records", in the write's own output, the timeline, its JSON and the
HTML picture."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from lakecore import Table
from lakecore.cli.timeline_html import write_timeline_html


def weir(*args: str, cwd: Path, columns: int = 80) -> str:
    env = {**os.environ, "COLUMNS": str(columns)}
    done = subprocess.run([sys.executable, "-c", "from lakecore.cli.main import main; main()", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_delete_names_its_keys_and_the_timeline_keeps_instants_whole(tmp_path: Path) -> None:
    weir("table", "create", "t", "--schema", "id:int64,name:string,ts:int64", "--record-key", "id",
         "--ordering-field", "ts", "--buckets", "2", cwd=tmp_path)
    (tmp_path / "people.csv").write_text("id,name,ts\n1,ada,1\n2,grace,1\n3,edsger,1\n")
    (tmp_path / "gone.csv").write_text("id,name,ts\n1,,2\n7,,2\n8,,2\n")   # one key the table holds
    assert "3 rows written in" in weir("table", "upsert", "t", "-i", "people.csv", cwd=tmp_path)
    said = weir("table", "delete", "t", "-i", "gone.csv", cwd=tmp_path)
    assert said.startswith("delete: 3 delete keys in ") and "records" not in said, said
    table = Table.open(str(tmp_path / "t"))
    assert sorted(table.read().column("id").to_pylist()) == [2, 3]
    upsert, delete = (i.requested_time for i in table.timeline().completed)

    listed = json.loads(weir("table", "timeline", "t", "--json", cwd=tmp_path))
    assert [(r["operation"], r["rows_written"], r["delete_keys"]) for r in listed] == \
        [("upsert", 3, 0), ("delete", 0, 3)]

    narrow = weir("table", "timeline", "t", cwd=tmp_path)
    assert "…" not in narrow and max(len(line.rstrip()) for line in narrow.splitlines()) <= 80, narrow
    for label in ("INSTANT", "STATE", "COMPLETED", "OPERATION", "ROWS", "WRITTEN", "DELETE", "KEYS"):
        assert label in narrow, narrow
    rows = {line.split()[0]: line.split() for line in narrow.splitlines() if line[:1].isdigit()}
    completed = table.timeline().completed[0].completion_time
    assert rows[upsert][1:] == ["completed", completed, "upsert", "3", "0"], rows
    assert rows[delete][-3:] == ["delete", "0", "3"], rows
    assert "a key whose row the table does not hold" in " ".join(narrow.split()), narrow

    wide = weir("table", "timeline", "t", cwd=tmp_path, columns=200)
    assert "ACTION" in wide and "FILE GROUPS" in wide
    assert [line.split()[1] for line in wide.splitlines() if line.startswith(delete)] == ["deltacommit"]

    page = write_timeline_html(table, tmp_path / "timeline.html").read_text()
    assert "3 delete keys" in page and "3 rows written" in page and "records" not in page

    read = weir("table", "read", "t", "--with-meta", cwd=tmp_path)
    assert "…" not in read and upsert in read, read


def test_cli_writes_name_their_writer_and_a_savepoints_deletion_is_told_apart(tmp_path: Path) -> None:
    """A write of `weir table` named no writer: the picture drew its writes on a lane "(unnamed writer)".
    A savepoint's deletion listed as OPERATION `savepoint`, like the savepoint it let go."""
    from lakecore.cli.timeline_spans import read_facts
    from lakecore.timeline.metadata import writer_of

    weir("table", "create", "t", "--schema", "id:int64,name:string", "--record-key", "id", cwd=tmp_path)
    (tmp_path / "people.csv").write_text("id,name\n1,ada\n2,grace\n")
    weir("table", "upsert", "t", "people.csv", cwd=tmp_path)
    weir("table", "delete", "t", "-i", "people.csv", cwd=tmp_path)
    table = Table.open(str(tmp_path / "t"))
    upsert, delete = table.timeline().completed
    assert [writer_of(table.commit_metadata(i).extra) for i in (upsert, delete)] == ["weir CLI"] * 2
    assert {s.lane for s in read_facts(table).spans} == {"weir CLI"}
    weir("table", "savepoint", "t", upsert.requested_time, cwd=tmp_path)
    weir("table", "savepoint", "t", "--delete", upsert.requested_time, cwd=tmp_path)
    listed = json.loads(weir("table", "timeline", "t", "--json", cwd=tmp_path))
    made, deleted = listed[2:]
    assert (made["operation"], made["savepointed"]) == ("savepoint", upsert.requested_time)
    assert (deleted["operation"], deleted["deleted_savepoint"]) == ("delete_savepoint", made["instant"])
    assert " delete_savepoint" in weir("table", "timeline", "t", cwd=tmp_path, columns=120)


def test_the_timelines_json_shows_what_each_writer_recorded_with_its_commit(tmp_path: Path) -> None:
    """A Kafka writer's skipped messages (`weir.kafka.skipped`, `weir.kafka.first_bad`) were in its
    commits only, which no command showed: `--json` now lists each commit's extra values."""
    import pyarrow as pa

    t = Table.create(str(tmp_path / "t"), schema=pa.schema([pa.field("id", pa.int64(), nullable=False),
                                                            ("ts", pa.int64())]),
                     record_key="id", ordering_field="ts")
    t.write(pa.table({"id": [1], "ts": [1]}), "upsert",
            extra={"weir.kafka.skipped": "2", "weir.kafka.first_bad": "orders/0@5: not a JSON object"})
    listed = json.loads(weir("table", "timeline", "t", "--json", cwd=tmp_path))
    assert listed[-1]["extra"]["weir.kafka.skipped"] == "2", listed
    assert listed[-1]["extra"]["weir.kafka.first_bad"] == "orders/0@5: not a JSON object", listed
