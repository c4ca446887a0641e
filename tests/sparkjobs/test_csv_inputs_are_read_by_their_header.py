"""A writer's CSV input is read by its header with the table's types (no spec.source.options needed):
columns in any order, a value that does not fit its column told as BadInput (nothing written), a
misspelt column named with the likely one, a format Spark has no source for (`jsonl`) as BadInput with
the likely one (the job exits BadInput, not retried); a streaming writer refuses a header in another
order than its schema instead of shifting the columns, and a value that does not fit instead of writing
a null.
The jobs run in this process on the session's Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import ColumnGroup, Table
from lakecore.errors import InvalidInput, MissingColumn, SchemaMismatch
from sparkjobs import batch_write, stream_write
from sparkjobs.contract import EXIT_BAD_INPUT, BatchWriteArgs, StreamWriteArgs

pytestmark = pytest.mark.spark
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.int64())])


def table(where: Path, **kw: object) -> Table:
    return Table.create(str(where), schema=SCHEMA, record_key="id", ordering_field="ts", buckets=1,
                        **kw)  # type: ignore[arg-type]


def csv(where: Path, text: str) -> str:
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text(text)
    return str(where)


def rows(t: Table) -> list[dict[str, object]]:
    return sorted(Table.open(t.uri).read().select(SCHEMA.names).to_pylist(), key=lambda r: r["id"])


def test_a_csv_is_read_by_its_header_with_the_tables_types(spark, tmp_path):
    t = table(tmp_path / "t")
    source = csv(tmp_path / "in" / "a.csv", "ts,id,name\n10,2,bo\n11,1,ada\n")
    out = batch_write.run(BatchWriteArgs(table=t.uri, source=source, source_format="csv"))
    assert out["records"] == 2
    assert rows(t) == [{"id": 1, "name": "ada", "ts": 11}, {"id": 2, "name": "bo", "ts": 10}]


def test_a_second_file_with_its_columns_in_another_order_is_refused_not_shifted(spark, tmp_path):
    t = table(tmp_path / "t")
    csv(tmp_path / "in" / "a.csv", "id,name,ts\n1,ada,10\n")
    csv(tmp_path / "in" / "b.csv", "ts,id,name\n11,2,bo\n")
    with pytest.raises(InvalidInput, match=r"has the header 'ts, id, name', but this writer reads the "
                                           r"columns 'id, name, ts' in that order"):
        batch_write.run(BatchWriteArgs(table=t.uri, source=str(tmp_path / "in"), source_format="csv"))
    assert rows(t) == []


def test_a_value_that_does_not_fit_is_bad_input_and_nothing_is_written(spark, tmp_path):
    t = table(tmp_path / "t")
    source = csv(tmp_path / "in" / "a.csv", "id,name,ts\n1,ada,10\n2,bo,yesterday\n")
    with pytest.raises(InvalidInput) as told:
        batch_write.run(BatchWriteArgs(table=t.uri, source=source, source_format="csv"))
    message = str(told.value)
    assert 'For input string: "yesterday"' in message and "[2,bo,null]" in message, message
    assert source in message and message.endswith("fix the input")
    # the write had begun when the value was met: it was rolled back
    assert [i.action for i in Table.open(t.uri).timeline().completed] == ["rollback"] and rows(t) == []


def test_a_misspelt_column_is_named_with_the_likely_one(spark, tmp_path):
    t = table(tmp_path / "t")
    source = csv(tmp_path / "in" / "a.csv", "id,nmae,ts\n1,ada,10\n")
    with pytest.raises(SchemaMismatch, match=r"\['nmae'\] are not in the table schema .* \(did you mean "
                                             r"'name'\?\)"):
        batch_write.run(BatchWriteArgs(table=t.uri, source=source, source_format="csv"))
    wide = Table.create(str(tmp_path / "wide"), record_key="id", buckets=1,
                        schema=pa.schema([*SCHEMA, ("city", pa.string()), ("ts2", pa.int64())]),
                        column_groups=[ColumnGroup("names", ("name",), "ts"),
                                       ColumnGroup("places", ("city",), "ts2")])
    with pytest.raises(MissingColumn, match=r"lacks name \(did you mean 'nmae'\?\); the input has id, nmae"):
        batch_write.run(BatchWriteArgs(table=wide.uri, source=source, source_format="csv",
                                       column_group="names"))


def test_a_stream_reads_a_csv_header_in_its_schemas_order_and_refuses_another(spark, tmp_path):
    t = table(tmp_path / "t", concurrency_mode="non_blocking")
    incoming = tmp_path / "in"
    csv(incoming / "a.csv", "id,name,ts\n1,ada,10\n2,bo,11\n")

    def stream(writer: str, source: Path = incoming) -> dict[str, object]:
        return stream_write.run(StreamWriteArgs(table=t.uri, source=str(source), source_format="csv",
                                                writer_id=writer, checkpoint=str(tmp_path / writer),
                                                available_now=True))
    stream("w1")
    assert rows(t) == [{"id": 1, "name": "ada", "ts": 10}, {"id": 2, "name": "bo", "ts": 11}]
    csv(incoming / "b.csv", "ts,id,name\n12,3,cy\n")
    with pytest.raises(InvalidInput, match=r"b.csv has the header 'ts, id, name', but this writer reads the "
                                           r"columns 'id, name, ts' in that order"):
        stream("w1")
    assert len(rows(t)) == 2, "the shifted file wrote nothing"
    csv(tmp_path / "in2" / "c.csv", "id,name,ts\n4,dee,yesterday\n")
    with pytest.raises(InvalidInput, match=r'For input string: "yesterday"\); the row, that value read as '
                                           r"null: \[4,dee,null\]"):
        stream("w2", tmp_path / "in2")
    assert len(rows(t)) == 2, "nor did the one with a value that does not fit"


def test_a_format_spark_has_no_source_for_is_bad_input_with_the_likely_one(spark, tmp_path, capsys):
    t = table(tmp_path / "t", concurrency_mode="non_blocking")
    source = csv(tmp_path / "in" / "a.json", '{"id": 1, "name": "ada", "ts": 10}\n')
    argv = BatchWriteArgs(table=t.uri, source=source, source_format="jsonl").to_argv()
    assert batch_write.main(argv) == EXIT_BAD_INPUT   # not retried as a failure: the spec is wrong
    said = capsys.readouterr().out
    assert "spec.source.format 'jsonl' is not a format Spark can read here (did you mean 'json'?)" in said
    assert "fix spec.source.format" in said
    with pytest.raises(InvalidInput, match=r"'jsonl' is not a format Spark can read here \(did you mean "
                                           r"'json'\?\)"):
        stream_write.run(StreamWriteArgs(table=t.uri, source=str(tmp_path / "in"), source_format="jsonl",
                                         writer_id="w", checkpoint=str(tmp_path / "w"), available_now=True))
    assert rows(t) == [] and list(Table.open(t.uri).timeline().completed) == []


def test_a_stream_refuses_a_json_field_the_table_lacks_instead_of_dropping_it(spark, tmp_path):
    """Spark reads JSON lines with the table's schema and drops a field it does not name: a misspelt
    `nmae` was written as a null name. The batch writer refused it; the stream now does too."""
    t = table(tmp_path / "t", concurrency_mode="non_blocking")
    incoming = tmp_path / "in"
    csv(incoming / "a.json", '{"id": 1, "name": "ada", "ts": 10}\n')

    def stream() -> dict[str, object]:
        return stream_write.run(StreamWriteArgs(table=t.uri, source=str(incoming), source_format="json",
                                                writer_id="w", checkpoint=str(tmp_path / "w"),
                                                available_now=True))
    stream()
    assert rows(t) == [{"id": 1, "name": "ada", "ts": 10}]
    csv(incoming / "b.json", '{"id": 2, "nmae": "bo", "ts": 11}\n{"id": 3, "name": "cy", "ts": 12}\n')
    with pytest.raises(SchemaMismatch, match=r"input fields \['nmae'\] of .*b.json are not in the table "
                                             r"schema \['id', 'name', 'ts'\] \(did you mean 'name'\?\); a "
                                             r"streaming writer would drop them"):
        stream()
    assert rows(t) == [{"id": 1, "name": "ada", "ts": 10}], "nothing of it was written"


def test_a_second_file_with_fewer_columns_is_bad_input_naming_it(spark, tmp_path):
    """Files of one source with different headers (a column the second lacks): the job failed with
    Spark's FAILED_READ_FILE stack trace and was retried, six attempts over six minutes; the cause
    ("Number of column in CSV header is not equal...") was only in the driver's log."""
    t = table(tmp_path / "t")
    csv(tmp_path / "in" / "a.csv", "id,name,ts\n1,ada,10\n")
    second = csv(tmp_path / "in" / "b.csv", "id,ts\n2,11\n")
    with pytest.raises(InvalidInput) as told:
        batch_write.run(BatchWriteArgs(table=t.uri, source=str(tmp_path / "in"), source_format="csv"))
    message = str(told.value)
    assert f"{second} has 2 columns in its header, but this writer reads 3: give every file of the source " \
           "the same header" in message, message
    assert rows(t) == []


def test_json_numbers_go_into_a_decimal_column_exactly(spark, tmp_path):
    """A batch writer of JSON lines into a decimal column failed "column 'd' has type double ... cast it",
    which a LakeWriter's user cannot do: each number is written where the decimal holds it exactly, and
    one it would round is BadInput (SchemaMismatch, an InvalidInput), nothing written."""
    from decimal import Decimal

    t = Table.create(str(tmp_path / "t"), schema=pa.schema([("id", pa.int64()), ("d", pa.decimal128(10, 2))]),
                     record_key="id", buckets=1)
    source = csv(tmp_path / "in" / "a.json", '{"id": 1, "d": 1.25}\n{"id": 2, "d": 7}\n')
    batch_write.run(BatchWriteArgs(table=t.uri, source=source, source_format="json"))
    assert sorted(Table.open(t.uri).read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "d": Decimal("1.25")}, {"id": 2, "d": Decimal("7.00")}]
    source = csv(tmp_path / "in2" / "a.json", '{"id": 3, "d": 1.999}\n')
    with pytest.raises(SchemaMismatch, match=r"1.999 does not fit decimal128\(10, 2\) exactly"):
        batch_write.run(BatchWriteArgs(table=t.uri, source=source, source_format="json"))
    assert Table.open(t.uri).read().num_rows == 2
