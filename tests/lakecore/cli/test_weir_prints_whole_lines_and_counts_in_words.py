"""`weir`'s messages piped into a file or a pod's log (no terminal, 80 columns) stay one line each, however
long (rich wrapped them at 80: a write's completion time came on a line of its own, and `grep` for the
instant found half a message), its counts read as words (`1 row written in 1 file group`), and a path
or a column name is printed as it is, not read as rich markup (`t[red]x` printed as `tx`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def weir(*args: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run([sys.executable, "-c", "from lakecore.cli.main import main; main()", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_write_says_what_it_wrote_on_one_line_in_words(tmp_path: Path) -> None:
    uri = str(tmp_path / ("a-table-whose-path-is-long-enough-to-pass-eighty-columns-" + "x" * 40))
    weir("table", "create", uri, "--schema", "id:int64,ts:int64,name:string", "--record-key", "id",
         "--ordering-field", "ts", "--buckets", "2", cwd=tmp_path)
    (tmp_path / "one.csv").write_text("id,ts,name\n1,1,ada\n")
    (tmp_path / "three.csv").write_text("id,ts,name\n1,2,ada\n2,1,grace\n3,1,edsger\n")

    said = weir("table", "upsert", uri, "-i", "one.csv", cwd=tmp_path)
    assert said.count("\n") == 1 and said.startswith("upsert: 1 row written in 1 file group, instant "), said
    instant, completed = said.split("instant ")[1].split(" completed at ")
    assert len(instant) == 17 and len(completed.strip()) == 17, said

    said = weir("table", "upsert", uri, "-i", "three.csv", cwd=tmp_path)
    assert said.count("\n") == 1 and said.startswith("upsert: 3 rows written in 2 file groups, "), said

    said = weir("table", "delete", uri, "-i", "one.csv", cwd=tmp_path)
    assert said.startswith("delete: 1 delete key in 1 file group, "), said

    described = weir("table", "describe", uri, cwd=tmp_path)
    data = next(line for line in described.splitlines() if line.strip().startswith("data"))
    assert " in 2 file groups, " in data and "1 partition," in data, described


def test_a_path_and_a_column_name_with_brackets_print_whole(tmp_path: Path) -> None:
    uri = str(tmp_path / "t[red]x")
    said = weir("table", "create", uri, "--schema", "id:int64,ts:int64,v[bold]:string", "--record-key", "id",
                "--ordering-field", "ts", cwd=tmp_path)
    assert f" at {uri} (" in said, said
    described = weir("table", "describe", uri, cwd=tmp_path)
    assert described.splitlines()[0].endswith(f" at {uri}"), described
    assert any(line.split() == ["v[bold]", "string"] for line in described.splitlines()), described


def test_a_piped_table_keeps_each_row_on_one_line(tmp_path: Path) -> None:
    """No terminal and no COLUMNS (a file, a log, `grep`): a table has its natural width, as kubectl's;
    at 80 columns rich folded `Ada Lovelace` and `ada@example.com` onto second lines."""
    uri = str(tmp_path / "people")
    weir("table", "create", uri, "--schema", "id:int64,ts:int64,name:string,email:string,city:string,"
         "note:string", "--record-key", "id", "--ordering-field", "ts", cwd=tmp_path)
    (tmp_path / "people.csv").write_text(
        "id,ts,name,email,city,note\n"
        "1,1,Ada Lovelace,ada.lovelace@example.com,London,wrote the first program for an engine\n"
        "2,1,Edsger Dijkstra,edsger.dijkstra@example.com,Nuenen,shortest paths and semaphores\n")
    weir("table", "upsert", uri, "-i", "people.csv", cwd=tmp_path)
    lines = weir("table", "read", uri, cwd=tmp_path).splitlines()
    rows = sorted(line for line in lines if line.startswith(("1 ", "2 ")))   # in file-group order
    assert len(rows) == 2 and len(lines) == 4, lines   # title, header, two rows
    assert "Ada Lovelace" in rows[0] and "ada.lovelace@example.com" in rows[0], rows
    assert rows[1].rstrip().endswith("shortest paths and semaphores"), rows
    assert max(len(line) for line in lines) > 80, lines


def test_a_read_counts_in_words_and_shows_a_null_as_null(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    weir("table", "create", uri, "--schema", "id:int64,name:string", "--record-key", "id", cwd=tmp_path)
    (tmp_path / "in.json").write_text('{"id": 1, "name": null}\n{"id": 2, "name": ""}\n')
    weir("table", "upsert", uri, "-i", "in.json", cwd=tmp_path)
    shown = weir("table", "read", uri, "--limit", "1", cwd=tmp_path)
    assert shown.splitlines()[0].strip() == "t: 2 rows", shown
    assert "... 1 more row (--limit N shows more" in shown, shown
    rows = weir("table", "read", uri, "--where", "id = 1", cwd=tmp_path)
    assert rows.splitlines()[0].strip() == "t: 1 row", rows
    assert [line.split() for line in rows.splitlines() if line.strip().startswith("1 ")] == [["1", "null"]]
    assert weir("table", "read", uri, "-o", "out.csv", cwd=tmp_path).strip() == "wrote 2 rows to out.csv"
    assert weir("table", "read", uri, "--where", "id = 2", "-o", "one.csv", cwd=tmp_path).strip() == \
        "wrote 1 row to one.csv"
    timeline = weir("table", "timeline", uri, cwd=tmp_path)
    assert timeline.splitlines()[0].strip() == "t: 1 instant", timeline
