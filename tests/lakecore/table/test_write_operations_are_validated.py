"""A write names one of lakecore's operations; any other name raises UnknownOperation before an
instant exists (the timeline and the files are unchanged), from the API, the split write API and the
CLI alike. (The Spark jobs' argument contract: tests/sparkjobs/test_overwrite_on_spark.py.)"""

import os

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from lakecore import Table
from lakecore.cli.main import app
from lakecore.concurrency import begin_write
from lakecore.errors import InvalidInput, UnknownOperation
from lakecore.table import WriteJob
from lakecore.write import OPERATIONS
from tests.lakecore.table.conftest import SCHEMA, rows

BAD = ["overwrite", "append", "bogus", "", "UPSERT", None]


@pytest.fixture
def table(table_uri):
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts")
    t.upsert(rows([1, 2], 1))
    return t


def everything(t):
    return sorted(os.path.relpath(os.path.join(d, f), t.uri) for d, _, fs in os.walk(t.uri) for f in fs)


@pytest.mark.parametrize("name", BAD)
def test_table_write_refuses_an_unknown_operation_before_any_instant(table, name):
    before = everything(table)
    with pytest.raises(UnknownOperation) as err:
        table.write(rows([3], 1), name)
    assert isinstance(err.value, InvalidInput)  # a bad-input error: retrying does not help
    assert repr(name) in str(err.value) and "insert_overwrite" in str(err.value)
    assert everything(table) == before
    assert len(table.timeline()) == 1


@pytest.mark.parametrize("name", ["overwrite", "bogus"])
def test_the_split_write_api_refuses_it_too(table, name):
    before = everything(table)
    with pytest.raises(UnknownOperation):
        begin_write(table.storage, table.config, table.lock, name)  # type: ignore[arg-type]
    with pytest.raises(UnknownOperation):
        WriteJob.start(table.storage, table.config, table.lock, name)  # type: ignore[arg-type]
    assert everything(table) == before


def test_insert_overwrite_without_its_partitions_is_refused_before_any_instant(table):
    before = everything(table)
    with pytest.raises(InvalidInput, match="partitions"):
        begin_write(table.storage, table.config, table.lock, "insert_overwrite")
    assert everything(table) == before


def test_every_listed_operation_is_accepted(table):
    assert set(OPERATIONS) == {"upsert", "insert", "bulk_insert", "delete", "insert_overwrite",
                               "insert_overwrite_table"}
    for op in OPERATIONS:
        table.write(rows([10], 2), op)  # type: ignore[arg-type]
    assert [table.commit_metadata(i).operation for i in table.timeline().completed][1:] == list(OPERATIONS)


def test_the_cli_refuses_an_unknown_operation_before_any_instant(table, tmp_path):
    src = tmp_path / "in.parquet"
    pq.write_table(rows([3], 1), src)
    before = everything(table)
    result = CliRunner().invoke(app, ["table", "write", table.uri, "-i", str(src), "--operation", "append"])
    assert result.exit_code == 1
    assert "unknown write operation 'append'" in result.output
    assert everything(table) == before
    result = CliRunner().invoke(app, ["table", "write", table.uri, "-i", str(src), "--operation",
                                      "insert_overwrite", "--json"])
    assert result.exit_code == 0, result.output
    assert [i.action for i in table.timeline().completed] == ["deltacommit", "replacecommit"]
