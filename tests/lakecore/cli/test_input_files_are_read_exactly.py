"""What `weir table upsert FILE` reads is what the file says, and what a LakeWriter's Spark reads from the
same file: an empty CSV field is null in every column (a key "" was stored as a key, and a string ""
where Spark reads null), a quoted "" stays an empty string, and "NA" is a string's value, not a null. A
JSON number a decimal column cannot hold exactly is refused, naming it (1.999 was stored as 2.00); one it
holds exactly is taken, as a number, as text or as a whole number."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest

from lakecore.cli.io import read_input
from lakecore.errors import InvalidInput

SCHEMA = pa.schema([("k", pa.string()), ("n", pa.int64()), ("s", pa.string()), ("d", pa.decimal128(10, 2))])


def test_an_empty_csv_field_is_null_as_spark_reads_it(tmp_path) -> None:
    path = tmp_path / "in.csv"
    path.write_text('k,n,s,d\n,1,,1.50\na,,"",\nb,2,NA,0.10\n')
    read = read_input(str(path), SCHEMA)
    assert read.to_pylist() == [
        {"k": None, "n": 1, "s": None, "d": Decimal("1.50")},
        {"k": "a", "n": None, "s": "", "d": None},
        {"k": "b", "n": 2, "s": "NA", "d": Decimal("0.10")}]


def test_a_json_number_a_decimal_cannot_hold_exactly_is_refused(tmp_path) -> None:
    path = tmp_path / "in.json"
    path.write_text('{"k": "a", "d": 1.25}\n{"k": "b", "d": 1.999}\n')
    with pytest.raises(InvalidInput) as told:
        read_input(str(path), SCHEMA)
    assert "column 'd': 1.999 (line 2) does not fit the table's decimal128(10,2) exactly (it would be " \
           "stored as Decimal('2.00'))" in str(told.value)
    path.write_text('{"k": "a", "d": 1.25, "n": 3.0}\n{"k": "b", "d": 0.1, "n": 4}\n')
    read = read_input(str(path), SCHEMA)
    assert read.column("d").to_pylist() == [Decimal("1.25"), Decimal("0.10")]
    assert read.column("n").to_pylist() == [3, 4]


def test_every_exact_decimal_is_taken_from_json_numbers_text_and_whole_numbers(tmp_path) -> None:
    """Prices a float reads back inexactly through Arrow's decimal cast (19.99 came back as
    19.990000000000002) were refused as not fitting; text like "6.6" was refused as stored "6.60";
    a file of whole amounts was refused as int64. Every 2-digit price from 0.00 to 99.99 is taken."""
    cents = range(0, 10000)
    path = tmp_path / "in.json"
    path.write_text("".join(f'{{"k": "{c}", "d": {c // 100}.{c % 100:02d}}}\n' for c in cents))
    assert read_input(str(path), SCHEMA).column("d").to_pylist() == [Decimal(c) / 100 for c in cents]
    path.write_text('{"k": "a", "d": "6.6"}\n{"k": "b", "d": "19.99"}\n')
    assert read_input(str(path), SCHEMA).column("d").to_pylist() == [Decimal("6.60"), Decimal("19.99")]
    path.write_text('{"k": "a", "d": 1}\n{"k": "b", "d": -99999999}\n')
    assert read_input(str(path), SCHEMA).column("d").to_pylist() == [Decimal("1.00"), Decimal("-99999999.00")]
    path.write_text('{"k": "a", "d": 1}\n{"k": "b", "d": 123456789012}\n')
    too_large = r"column 'd': 123456789012 \(line 2\) is too large for the table's decimal128\(10,2\) " \
        r"\(at most 8 digits before the point\)"
    with pytest.raises(InvalidInput, match=too_large):
        read_input(str(path), SCHEMA)
    path.write_text('{"k": "a", "d": "6.666"}\n')   # text with a digit the column drops: still refused
    with pytest.raises(InvalidInput, match=r"'6.666' \(line 1\) is no decimal128\(10,2\) value"):
        read_input(str(path), SCHEMA)


def test_a_csv_separated_by_semicolons_or_tabs_is_read_by_its_header(tmp_path) -> None:
    """A spreadsheet's export with ; (or a tab-separated file) read as one column `id;n;s;d`, refused as a
    column the table lacks."""
    for sep in (";", "\t", "|"):
        path = tmp_path / "in.csv"
        path.write_text(sep.join(["k", "n", "s", "d"]) + "\n" + sep.join(["a", "1", "x, y", "0.50"]) + "\n")
        expected = [{"k": "a", "n": 1, "s": "x, y", "d": Decimal("0.50")}]
        assert read_input(str(path), SCHEMA).to_pylist() == expected
        path.write_text(sep.join(["k", "n", "s", "d"]) + "\n" + sep.join(["a", "x", "", ""]) + "\n")
        with pytest.raises(InvalidInput, match="column 'n'"):
            read_input(str(path), SCHEMA)


def test_a_header_in_other_case_is_told_the_tables_names() -> None:
    from lakecore.config import did_you_mean

    assert did_you_mean(["ID", "Name"], ["id", "name"]) == " (did you mean 'id', 'name'?)"


def test_a_file_of_no_rows_writes_nothing(tmp_path) -> None:
    """A CSV of its header only made an empty deltacommit (a blank row in the timeline)."""
    from typer.testing import CliRunner

    from lakecore import Table
    from lakecore.cli.main import app

    uri = str(tmp_path / "t")
    Table.create(uri, schema=SCHEMA, record_key="k")
    (tmp_path / "in.csv").write_text("k,n,s,d\n")
    done = CliRunner().invoke(app, ["table", "upsert", uri, str(tmp_path / "in.csv")])
    assert done.exit_code == 0 and "has no rows; nothing written (no instant)" in done.output, done.output
    assert not Table.open(uri).timeline().instants


def test_a_json_string_of_another_type_is_named_with_its_line(tmp_path) -> None:
    """"amount": "abc" was told as "column 'amount' has type string but the table stores double; cast
    it", naming neither the file nor the value; a date 03/01/2026 the same way."""
    path = tmp_path / "in.json"
    path.write_text('{"k": "a", "d": "1.50"}\n{"k": "b", "d": "lots"}\n{"k": "c", "d": "2"}\n')
    with pytest.raises(InvalidInput, match=r"input file '.*in.json', column 'd': 'lots' \(line 2\) is no "
                                           r"decimal128\(10,2\) value; fix the value"):
        read_input(str(path), SCHEMA)
    dated = pa.schema([("k", pa.string()), ("day", pa.date32())])
    path.write_text('{"k": "a", "day": "2026-03-01"}\n{"k": "b", "day": "03/01/2026"}\n')
    told = r"'03/01/2026' \(line 2\) is no date32 value \(dates as 2026-03-01\)"
    with pytest.raises(InvalidInput, match=told):
        read_input(str(path), dated)


def test_a_json_column_of_two_types_is_named(tmp_path) -> None:
    """pyarrow said "Column(/d) changed from number to string in row 1", a row counted within a block of
    the file, not its line."""
    path = tmp_path / "in.json"
    path.write_text('{"k": "a", "d": 1.5}\n{"k": "b", "d": "2.5"}\n')
    told = r"column 'd' holds a string where its earlier values are a number; give each column one JSON type"
    with pytest.raises(InvalidInput, match=told):
        read_input(str(path), SCHEMA)


def test_json_text_that_looks_like_a_time_stays_the_text_it_is(tmp_path) -> None:
    """pyarrow's JSON reader takes "2026-11-22" for a timestamp, and the cast back into a string column
    gave "2026-11-22 00:00:00": a partition value changed (the same key landed in two partitions) and a
    delete by it deleted nothing. Read as the text it is, as Spark and the CSV reader do."""
    from lakecore import Table
    from tests.lakecore.cli.test_weir_table_commands import weir

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("dt", pa.string()), ("at", pa.string())])
    path = tmp_path / "in.json"
    path.write_text('{"id": 1, "dt": "2026-11-22", "at": "2026-11-22T10:00:00+02:00"}\n'
                    '{"id": 2, "dt": "2026-11-23", "at": "10:00:00"}\n')
    read = read_input(str(path), schema)
    assert read.column("dt").to_pylist() == ["2026-11-22", "2026-11-23"]
    assert read.column("at").to_pylist() == ["2026-11-22T10:00:00+02:00", "10:00:00"]

    uri = str(tmp_path / "t")
    Table.create(uri, schema=schema, record_key="id", partition_fields="dt")
    assert weir("table", "upsert", uri, str(path))[0] == 0
    (tmp_path / "gone.json").write_text('{"id": 1, "dt": "2026-11-22"}\n')
    assert weir("table", "delete", uri, "--input", str(tmp_path / "gone.json"))[0] == 0
    assert Table.open(uri).read().to_pylist() == [{"id": 2, "dt": "2026-11-23", "at": "10:00:00"}]
