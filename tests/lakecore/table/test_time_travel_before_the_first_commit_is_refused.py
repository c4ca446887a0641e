"""Reading a table as of a point before its first commit is refused (as delta-rs and pyiceberg do), not
answered with an empty table that looks like lost rows: from Python and from `weir table read
--as-of`, with an error that names the earliest time that can be read, also when the first commits
are archived and when a clean has moved the earliest readable point later. Reading as of that time
works."""

from __future__ import annotations

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from lakecore import Table
from lakecore.cli.main import app
from lakecore.errors import BeforeFirstCommit, InstantNotFound
from lakecore.services import ArchivalPolicy, CleanPolicy
from lakecore.table import AfterCommitOptions, WriterOptions

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64())])
LONG_AGO = "2020-01-01T00:00:00"


def table(uri: str, writes: int) -> Table:
    Table.create(uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1)
    t = Table.open(uri, options=WriterOptions(after_commit=AfterCommitOptions(archival=None)))
    for i in range(writes):
        t.upsert(pa.table({"id": [i], "ts": [i]}))
    return t


def test_a_table_without_a_commit_refuses_every_point(tmp_path):
    t = table(str(tmp_path / "t"), 0)
    with pytest.raises(BeforeFirstCommit, match="has no commit yet") as caught:
        t.read(as_of=LONG_AGO)
    assert caught.value.earliest is None and "read it without as_of" in str(caught.value)
    assert t.read().num_rows == 0, "the latest snapshot of an empty table is empty"


def test_a_point_before_the_first_commit_names_the_earliest_readable_time(tmp_path):
    t = table(str(tmp_path / "t"), 3)
    first = t.timeline().completed[0]
    with pytest.raises(BeforeFirstCommit) as caught:
        t.read(as_of=LONG_AGO)
    message = str(caught.value)
    assert isinstance(caught.value, InstantNotFound) and not caught.value.retryable
    assert caught.value.earliest == first.completion_time
    assert f"first commit (instant {first.requested_time}) completed at {first.completion_time}" in message
    assert t.read(as_of=caught.value.earliest).to_pylist() == [{"id": 0, "ts": 0}]
    # a point between the first commit's request and its completion: nothing had completed yet
    with pytest.raises(BeforeFirstCommit):
        t.read(as_of=str(int(first.completion_time) - 1))


def test_the_cli_refuses_with_one_line(tmp_path):
    t = table(str(tmp_path / "t"), 2)
    first = t.timeline().completed[0]
    result = CliRunner().invoke(app, ["table", "read", t.uri, "--as-of", LONG_AGO])
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert line.startswith("error: ") and f"Read as of {first.completion_time} or later" in line


def test_archived_first_commits_still_name_the_first_commit(tmp_path):
    t = table(str(tmp_path / "t"), 12)
    first = t.timeline().completed[0]
    t.maintenance.archive(ArchivalPolicy(min_instants=3, max_instants=5, fanout=3))
    assert t.timeline().archived.count and t.timeline().completed[0] != first
    with pytest.raises(BeforeFirstCommit) as caught:
        t.read(as_of=LONG_AGO)
    assert caught.value.earliest == first.completion_time and first.requested_time in str(caught.value)
    assert t.read(as_of=caught.value.earliest).to_pylist() == [{"id": 0, "ts": 0}]


def test_a_clean_moves_the_earliest_readable_time_later(tmp_path):
    t = table(str(tmp_path / "t"), 1)
    for ts in range(1, 6):  # the same key again and again: older file versions become garbage
        t.upsert(pa.table({"id": [0], "ts": [ts]}))
    t.maintenance.compact()
    t.upsert(pa.table({"id": [0], "ts": [9]}))
    assert t.maintenance.clean(CleanPolicy("keep_latest_commits", 1), dry_run=False).instant is not None
    with pytest.raises(BeforeFirstCommit) as caught:
        t.read(as_of=LONG_AGO)
    earliest = caught.value.earliest
    assert earliest is not None and earliest > t.timeline().completed[0].completion_time
    assert f"a clean keeps time travel from {earliest}" in str(caught.value)
    t.read(as_of=earliest)  # readable: its files were kept


def test_zeros_are_the_point_before_every_instant(tmp_path):
    """"000" (where Hudi's incremental reads start) failed as an "unexpected ValueError", and so did 17
    digits that are no time: zeros are before every instant (an incremental read from them returns
    every row; a read as of them is refused as before the first commit), other digits are told."""
    t = table(str(tmp_path / "t"), 2)
    assert sorted(t.read_changes("000").column("id").to_pylist()) == [0, 1]
    assert t.read_changes("0" * 17).num_rows == 2
    with pytest.raises(BeforeFirstCommit, match="before every instant"):
        t.read(as_of="000")
    with pytest.raises(InstantNotFound, match="is 17 digits but no time"):
        t.read(as_of="20261399000000000")
    result = CliRunner().invoke(app, ["table", "read", str(tmp_path / "t"), "--as-of", "00000000000000000"])
    assert result.exit_code == 1 and "unexpected" not in result.output, result.output
