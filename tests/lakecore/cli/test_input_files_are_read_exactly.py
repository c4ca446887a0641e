"""What `weir table upsert FILE` reads is what the file says, and what a LakeWriter's Spark reads from the
same file: an empty CSV field is null in every column (a key "" was stored as a key, and a string ""
where Spark reads null), a quoted "" stays an empty string, and "NA" is a string's value, not a null. A
JSON number a decimal column cannot hold exactly is refused, naming it (1.999 was stored as 2.00)."""

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
    assert "column 'd': 1.999 (line 2) does not fit the table's decimal128(10, 2) exactly (it would be " \
           "stored as Decimal('2.00'))" in str(told.value)
    path.write_text('{"k": "a", "d": 1.25, "n": 3.0}\n{"k": "b", "d": 0.1, "n": 4}\n')
    read = read_input(str(path), SCHEMA)
    assert read.column("d").to_pylist() == [Decimal("1.25"), Decimal("0.10")]
    assert read.column("n").to_pylist() == [3, 4]
