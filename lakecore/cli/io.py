"""File formats the CLI reads and writes (Parquet, CSV, JSON lines), chosen by flag or extension."""

from __future__ import annotations

import base64
import csv
import datetime
import json
import math
import os
import re
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.json as pjson
import pyarrow.parquet as pq

from lakecore.config import type_name
from lakecore.errors import InvalidInput
from lakecore.write.conform import first_changed, first_out_of_range

Format = Literal["parquet", "csv", "json"]


def guess_format(path: str) -> Format:
    suffix = Path(path).suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix == ".csv":
        return "csv"
    if suffix in (".json", ".jsonl", ".ndjson"):
        return "json"
    raise InvalidInput(f"cannot tell the format of {path!r}; use a .parquet, .csv or .json(l) file")


_LABELS = {"parquet": "Parquet", "csv": "CSV", "json": "JSON lines"}


def read_input(path: str, schema: pa.Schema | None = None) -> pa.Table:
    """The rows of an input file; anything wrong with the file is InvalidInput naming it."""
    fmt = guess_format(path)
    _check_readable(path)
    try:
        if fmt == "parquet":
            return pq.read_table(path)
        if fmt == "csv":
            return _read_csv(path, schema)
        table = pjson.read_json(path)
        texts = _inferred_times_of_text(table, schema)
        if texts:   # read again with those columns as the text they are ("2026-11-22" stays as written)
            table = pjson.read_json(path, parse_options=pjson.ParseOptions(
                explicit_schema=pa.schema([(n, pa.string()) for n in texts])))
    except PermissionError:
        raise InvalidInput(f"cannot read input file {path!r}: permission denied; make it readable by "
                           "this user") from None
    except (pa.ArrowException, OSError) as exc:
        raise _not_valid(path, fmt, exc) from exc
    return _typed(table, schema, path) if schema is not None else table


def _inferred_times_of_text(table: pa.Table, schema: pa.Schema | None) -> list[str]:
    """The columns the table holds as text that pyarrow's JSON reader took for times or dates (it infers
    them from the text's shape, and casting back gives other text: "2026-11-22" became "2026-11-22
    00:00:00", a key or partition value changed)."""
    if schema is None:
        return []
    text = (pa.types.is_string, pa.types.is_large_string)
    return [f.name for f in table.schema if f.name in schema.names
            and any(t(schema.field(f.name).type) for t in text)
            and (pa.types.is_timestamp(f.type) or pa.types.is_date(f.type) or pa.types.is_time(f.type))]


def _read_csv(path: str, schema: pa.Schema | None) -> pa.Table:
    """A CSV file read as the table's types. A timestamp without a zone offset is read as UTC, as in a
    JSON file (and in a Spark job whose session time zone is UTC): pyarrow refuses it for a column with a
    time zone, so such a file is read again with those columns naive and then given UTC. A column that
    mixes values with and without an offset is refused, naming it."""
    types = {f.name: f.type for f in schema} if schema is not None else None
    parse = pcsv.ParseOptions(delimiter=_delimiter(path))
    try:
        return pcsv.read_csv(path, parse_options=parse, convert_options=_csv_options(types))
    except pa.ArrowInvalid as exc:
        if types is None or "expected a zone offset" not in str(exc):
            raise
    zoned = {n: t for n, t in types.items() if pa.types.is_timestamp(t) and t.tz is not None}
    naive = {**types, **{n: pa.timestamp(t.unit) for n, t in zoned.items()}}
    try:
        table = pcsv.read_csv(path, parse_options=parse, convert_options=_csv_options(naive))
    except pa.ArrowInvalid as exc:
        if "expected no zone offset" not in str(exc):
            raise
        where = _csv_column_named(path, " ".join(str(exc).split())[:300])
        raise InvalidInput(f"input file {path!r} mixes timestamps with and without a zone offset ({where}); "
                           "give every value of the column an offset (such as 'Z' or '+02:00') or none "
                           "(read as UTC)") from None
    for name, kind in zoned.items():
        if name in table.column_names:
            i = table.column_names.index(name)
            table = table.set_column(i, name, table.column(i).cast(kind))   # the naive values, as UTC
    return table


def _delimiter(path: str) -> str:
    """The file's field separator: a comma, unless its header holds none and one of ; (what spreadsheets
    in many locales export), tab or | separates its names."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            header = fh.readline()
    except OSError:
        return ","
    if "," in header:
        return ","
    found = [d for d in (";", "\t", "|") if d in header]
    return found[0] if len(found) == 1 else ","


def _csv_options(types: dict[str, pa.DataType] | None) -> pcsv.ConvertOptions:
    """An empty field is null, in every column (a string column too), and nothing else is: as a
    LakeWriter's Spark reads CSV (its nullValue ""), so one file gives the same rows either way. (pyarrow
    by default keeps an empty string, a key "" included, and reads "NA" or "NULL" as null in a number
    column but not in a string column.)"""
    return pcsv.ConvertOptions(column_types=types, null_values=[""], strings_can_be_null=True,
                               quoted_strings_can_be_null=False)


def read_schema_file(path: str) -> pa.Schema:
    """The schema of a Parquet file (`weir table create --schema-from`)."""
    _check_readable(path)
    try:
        return pq.read_schema(path)
    except PermissionError:
        raise InvalidInput(f"cannot read {path!r}: permission denied; make it readable by this "
                           "user") from None
    except (pa.ArrowException, OSError) as exc:
        raise _not_valid(path, "parquet", exc) from exc


def _check_readable(path: str) -> None:
    p = Path(path)
    if not p.exists():
        raise InvalidInput(f"input file {path!r} does not exist; check the path")
    if p.is_dir():
        raise InvalidInput(f"input file {path!r} is a directory; give one Parquet, CSV or JSON-lines file")
    if p.stat().st_size == 0:
        raise InvalidInput(f"input file {path!r} is empty; give a file with a header/schema and rows")


_CSV_COLUMN = re.compile(r"In CSV column #(\d+): (?:Row #(\d+): )?")


def _csv_column_named(path: str, detail: str) -> str:
    """pyarrow's `In CSV column #2: Row #3: ...` with the column's name from the header (its count
    starts at 0) and the row as a line of the file."""
    found = _CSV_COLUMN.search(detail)
    if found is None:
        return detail
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as fh:
            header = next(csv.reader(fh, delimiter=_delimiter(path)), [])
    except OSError:
        return detail
    index = int(found.group(1))
    name = f"column {header[index]!r}" if index < len(header) else f"column {index + 1}"
    row = f", line {int(found.group(2))}" if found.group(2) else ""   # the header is line 1, row #1 too
    return detail[:found.start()] + f"{name}{row}: " + detail[found.end():]


_JSON_MIXED = re.compile(r"Column\(/(?P<column>[^)]+)\) changed from (?P<was>\w+) to (?P<now>\w+)")


def _not_valid(path: str, fmt: Format, exc: BaseException) -> InvalidInput:
    label = _LABELS[fmt]
    detail = " ".join(str(exc).split())[:300]
    if fmt == "csv":
        detail = _csv_column_named(path, detail)
    mixed = _JSON_MIXED.search(detail) if fmt == "json" else None
    if mixed is not None:   # pyarrow's "in row N" counts within a block of the file, not its lines
        return InvalidInput(f"input file {path!r}: column {mixed['column']!r} holds a {mixed['now']} where "
                            f"its earlier values are a {mixed['was']}; give each column one JSON type (a "
                            "number quoted on some lines only is a string there)")
    one_per_line = " with one JSON object per line" if fmt == "json" else ""
    return InvalidInput(f"input file {path!r} cannot be read as {label} ({detail}); check that it is a "
                        f"{label} file{one_per_line} whose values fit the table's column types, or name "
                        "it after its real format (.parquet, .csv, .json)")


def _typed(table: pa.Table, schema: pa.Schema, path: str) -> pa.Table:
    """JSON infers types (int64, double, string, timestamp); cast the columns the file has to the
    table's types where that is lossless, and leave the rest for the table's own checks. A value the
    cast would change (1.999 into a decimal(10,2): 2.00) is refused, naming it: never stored rounded."""
    for i, name in enumerate(table.column_names):
        if name not in schema.names or table.column(i).type == schema.field(name).type:
            continue
        given, kind = table.column(i), schema.field(name).type
        try:
            cast = _whole_to_decimal(given, kind) if pa.types.is_integer(given.type) and \
                pa.types.is_decimal(kind) else given.cast(kind)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            if pa.types.is_integer(given.type) and pa.types.is_decimal(kind):
                _refuse_too_large(path, name, given, kind)
            elif given.null_count < len(given) and (pa.types.is_string(given.type) or (
                    _number(given.type) and (pa.types.is_integer(kind) or pa.types.is_decimal(kind)))):
                _refuse_value(path, name, given, kind)   # text of another type, 7.5 or 5e9 into an int32
            continue
        if pa.types.is_floating(given.type) and pa.types.is_floating(kind):
            # rounded to the nearest float32, as Spark reads it: refused only beyond its range
            if (row := first_out_of_range(given, cast)) is not None:
                raise InvalidInput(f"input file {path!r}, column {name!r}: {given[row].as_py()!r} (line "
                                   f"{row + 1}) is beyond the range of the table's {type_name(kind)}; fix "
                                   "the value, or give the column a wider type")
            table = table.set_column(i, name, cast)
            continue
        try:
            row = first_changed(given, cast)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            continue   # no way back to compare (e.g. an integer into a string): nothing can be lost
        if row is not None:
            raise InvalidInput(f"input file {path!r}, column {name!r}: {given[row].as_py()!r} (line "
                               f"{row + 1}) does not fit the table's {type_name(kind)} exactly (it would be "
                               f"stored as {cast[row].as_py()!r}); write the value as the column holds it")
        table = table.set_column(i, name, cast)
    return table


def _whole_to_decimal(given: pa.ChunkedArray, kind: pa.DataType) -> pa.ChunkedArray:
    """Whole numbers (a JSON column of amounts like 12) into a decimal column: Arrow casts an int64 only
    into a decimal of precision 19 + scale or more, so through the widest decimal of the column's scale,
    then checked into the column's precision (a value too large for it fails the cast)."""
    wide = pa.decimal256(76, kind.scale) if isinstance(kind, pa.Decimal256Type) else \
        pa.decimal128(38, kind.scale)
    return given.cast(wide).cast(kind)


def _refuse_too_large(path: str, name: str, given: pa.ChunkedArray, kind: pa.DataType) -> None:
    """InvalidInput naming the first whole number too large for the decimal column `kind`."""
    digits = kind.precision - kind.scale
    if digits >= 19:   # every int64 fits
        return
    try:
        whole = given.cast(pa.int64())
    except pa.ArrowInvalid:   # an unsigned value beyond int64: the general refusal names the column
        return
    bound = 10 ** digits
    over = pc.fill_null(pc.or_(pc.greater_equal(whole, bound), pc.less_equal(whole, -bound)), False)
    if pc.any(over).as_py():
        row = pc.index(over, True).as_py()
        raise InvalidInput(f"input file {path!r}, column {name!r}: {given[row].as_py()!r} (line {row + 1}) "
                           f"is too large for the table's {type_name(kind)} (at most {digits} digits before "
                           "the point)")


def _number(kind: pa.DataType) -> bool:
    return pa.types.is_integer(kind) or pa.types.is_floating(kind)


def _refuse_value(path: str, name: str, given: pa.ChunkedArray, kind: pa.DataType) -> None:
    """InvalidInput naming the first value of a JSON column that is no value of `kind` (text of another
    type, a number too large or with a fraction), its line and the form expected (found by halving the
    column: one vectorized cast per step)."""
    lo, hi = 0, len(given)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            given.slice(lo, mid - lo).cast(kind)
            lo = mid
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            hi = mid
    try:
        given.slice(lo, 1).cast(kind)
        return   # (each part casts alone: no one value to name)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        pass
    form = " (dates as 2026-03-01)" if pa.types.is_date(kind) else \
        " (times as 2026-03-01T10:00:00, with an offset or read as UTC)" if pa.types.is_timestamp(kind) \
        else ""
    if _number(given.type):
        raise InvalidInput(f"input file {path!r}, column {name!r}: {given[lo].as_py()!r} (line {lo + 1}) "
                           f"does not fit the table's {type_name(kind)}; fix the value, or give the column "
                           "a wider type")
    raise InvalidInput(f"input file {path!r}, column {name!r}: {given[lo].as_py()!r} (line {lo + 1}) is no "
                       f"{type_name(kind)} value{form}; fix the value")


def check_output(output: str | None) -> None:
    """Refuse, before anything is read, an --output whose folder does not exist or that is a folder."""
    if output is None:
        return
    target = Path(output)
    if target.is_dir():
        raise InvalidInput(f"--output {output!r} is a folder; name a file in it (e.g. {output.rstrip('/')}/"
                           "rows.parquet)")
    folder = target.parent
    if not folder.is_dir():
        raise InvalidInput(f"--output {output!r}: the folder {str(folder)!r} does not exist; create it "
                           f"(mkdir -p {folder}) or name a file in a folder that exists")


def write_output(rows: pa.Table | pa.RecordBatchReader, fmt: Format, output: str | None) -> int:
    """Write `rows` batch by batch (a reader is never held whole); returns how many were written. A file
    is written under a temporary name beside it and renamed when whole: a read that fails half-way (a
    damaged data file, a full disk) leaves no half-written file, and an older file of that name as it was."""
    reader = rows.to_reader() if isinstance(rows, pa.Table) else rows
    if fmt == "parquet" and output is None:
        raise InvalidInput("--format parquet needs --output FILE")
    check_output(output)
    if output is None:
        return _write(reader, fmt, None)
    partial = Path(output).with_name(f".{Path(output).name}.{os.getpid()}.partial")
    try:
        written = _write(reader, fmt, str(partial))
        partial.replace(output)
    finally:
        partial.unlink(missing_ok=True)
    return written


def _write(reader: pa.RecordBatchReader, fmt: Format, output: str | None) -> int:
    written = 0
    if fmt == "parquet":
        with pq.ParquetWriter(output, reader.schema) as parquet:
            for batch in reader:
                parquet.write_batch(batch)
                written += batch.num_rows
    elif fmt == "csv":
        schema = csv_schema(reader.schema)   # refuses what CSV cannot hold before a line is written
        with pcsv.CSVWriter(output if output else sys.stdout.buffer, schema) as writer:
            for batch in reader:
                writer.write_batch(_csv_batch(batch, schema))
                written += batch.num_rows
    else:
        with open(output, "w") if output else nullcontext(sys.stdout) as lines:
            for batch in reader:
                lines.write(json_lines(batch))
                written += batch.num_rows
    return written


def _binary(kind: pa.DataType) -> bool:
    return pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind)


def csv_schema(schema: pa.Schema) -> pa.Schema:
    """The schema of a CSV export of `schema`: binary columns as base64 text; InvalidInput naming the
    columns CSV cannot hold (lists, structs, maps)."""
    nested = [f"{f.name} ({type_name(f.type)})" for f in schema if pa.types.is_nested(f.type)]
    if nested:
        raise InvalidInput(f"CSV cannot hold the nested column(s) {', '.join(nested)}; export as JSON lines "
                           "or Parquet (--format json, --format parquet), or leave them out (--columns)")
    return pa.schema([f.with_type(pa.string()) if _binary(f.type) else f for f in schema])


def _csv_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    if batch.schema.equals(schema):
        return batch
    columns = [_base64(c) if _binary(c.type) else c for c in batch.columns]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _base64(values: pa.Array) -> pa.Array:
    """Binary values as base64 text (what Spark's JSON and CSV writers write), nulls kept."""
    return pa.array([None if v is None else base64.b64encode(v).decode("ascii") for v in values.to_pylist()],
                    pa.string())


def json_lines(batch: pa.RecordBatch) -> str:
    """One JSON object per row, each a line of standard JSON: binary as base64, decimals as their exact
    text, times in ISO 8601, NaN and infinities as the strings "NaN", "Infinity", "-Infinity" (as Spark
    writes them; bare NaN is not JSON, and jq refuses it)."""
    rows = batch.to_pylist()
    try:
        return "".join(json.dumps(r, default=_json_value, allow_nan=False) + "\n" for r in rows)
    except ValueError:   # a float that is not finite, somewhere in the batch: its rows take the slow path
        return "".join(json.dumps(_finite(r), default=_json_value, allow_nan=False) + "\n" for r in rows)


def _json_value(value: object) -> object:
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    return str(value)   # Decimal (its exact digits), timedelta, ...


def _finite(value: object) -> object:
    if isinstance(value, float):
        return value if math.isfinite(value) else ("NaN" if value != value else
                                                   "Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    if isinstance(value, tuple):   # a map's (key, value) pairs
        return [_finite(v) for v in value]
    return value


def head_and_count(rows: pa.RecordBatchReader, limit: int) -> tuple[pa.Table, int]:
    """The first `limit` rows and how many there are in all, holding no more than one batch besides."""
    head: list[pa.RecordBatch] = []
    kept = total = 0
    for batch in rows:
        if kept < limit:
            head.append(batch.slice(0, limit - kept))
            kept += head[-1].num_rows
        total += batch.num_rows
    return pa.Table.from_batches(head, schema=rows.schema), total
