"""Numbers into narrower number columns: a float into a float32 column is rounded to the nearest float32,
as Spark and SQL casts store it (0.1 was refused as "would be stored as 0.10000000149011612", so a float32
column took almost no CSV or JSON value), and one beyond float32's range is refused rather than stored as
infinity. A JSON number an integer column cannot hold (5000000000 or 7.5 into int32) is refused naming
the file, the line and the value (it was told without either, with "cast it to int32", or "has type
double"). Refused inputs change nothing."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lakecore import Table
from lakecore.cli.io import read_input
from lakecore.errors import InvalidInput, SchemaMismatch

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("score", pa.int32()), ("w", pa.float32())])


@pytest.mark.parametrize("suffix, text", [(".json", '{"id": 1, "w": 0.1}\n{"id": 2, "w": -2.5e-3}\n'),
                                          (".csv", "id,w\n1,0.1\n2,-2.5e-3\n")])
def test_a_float_file_value_is_stored_as_the_nearest_float32(tmp_path, suffix, text) -> None:
    path = tmp_path / f"in{suffix}"
    path.write_text(text)
    read = read_input(str(path), SCHEMA)
    assert read.schema.field("w").type == pa.float32()
    assert read.column("w").to_pylist() == [float(np.float32(0.1)), float(np.float32(-2.5e-3))]


def test_a_float_beyond_float32_is_refused_naming_its_line(tmp_path) -> None:
    path = tmp_path / "in.json"
    path.write_text('{"id": 1, "w": 0.5}\n{"id": 2, "w": 1e300}\n{"id": 3, "w": -1e39}\n')
    with pytest.raises(InvalidInput, match=r"input file '.*in.json', column 'w': 1e\+300 \(line 2\) is "
                                           r"beyond the range of the table's float32"):
        read_input(str(path), SCHEMA)


@pytest.mark.parametrize("value, shown", [("5000000000", "5000000000.0"), ("7.5", "7.5"),
                                          ("-2147483649", "-2147483649.0")])
def test_a_json_number_an_int32_cannot_hold_is_refused_naming_its_line(tmp_path, value, shown) -> None:
    path = tmp_path / "in.json"
    path.write_text(f'{{"id": 1, "score": 7}}\n{{"id": 2, "score": 3.0}}\n{{"id": 3, "score": {value}}}\n')
    with pytest.raises(InvalidInput, match=rf"input file '.*in.json', column 'score': {shown} "
                                           r"\(line 3\) does not fit the table's int32; fix the value"):
        read_input(str(path), SCHEMA)


def test_the_api_rounds_into_float32_and_refuses_an_overflow(tmp_path) -> None:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id")
    t.upsert(pa.table({"id": [1, 2, 3], "w": [0.1, float("nan"), float("-inf")]}))
    got = {r["id"]: r["w"] for r in t.read().to_pylist()}
    assert got[1] == float(np.float32(0.1)) and np.isnan(got[2]) and got[3] == float("-inf")
    before = len(t.timeline().completed)
    with pytest.raises(SchemaMismatch, match=r"column 'w': 1e\+300 is beyond the range of float"):
        t.upsert(pa.table({"id": [4, 5], "w": [1.0, 1e300]}))
    assert len(Table.open(t.uri).timeline().completed) == before
    assert sorted(r["id"] for r in Table.open(t.uri).read().to_pylist()) == [1, 2, 3]


def test_a_whole_json_number_too_large_for_int32_is_refused_naming_its_line(tmp_path) -> None:
    path = tmp_path / "in.json"
    path.write_text('{"id": 1, "score": 7}\n{"id": 2, "score": 5000000000}\n')
    with pytest.raises(InvalidInput, match=r"column 'score': 5000000000 \(line 2\) does not fit the table's "
                                           r"int32"):
        read_input(str(path), SCHEMA)
