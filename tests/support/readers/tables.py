"""Comparing what readers return: `normalized` evens out the Arrow encodings engines choose for the same
logical type (string vs large_string vs string_view, binary likewise, dictionary-encoded columns) and
row order, and drops schema metadata (Parquet field ids); logical types stay as they are, so a reader
that returns int32 for a long or a different timestamp unit still differs.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.types as pat

_PLAIN = {"string_view": pa.string(), "large_string": pa.string(),
          "binary_view": pa.binary(), "large_binary": pa.binary()}


def plain_type(data_type: pa.DataType) -> pa.DataType:
    if pat.is_dictionary(data_type):
        return plain_type(data_type.value_type)
    if pat.is_large_list(data_type) or pat.is_list_view(data_type) or pat.is_large_list_view(data_type):
        return pa.list_(plain_type(data_type.value_type))
    if pat.is_list(data_type):
        return pa.list_(plain_type(data_type.value_type))
    if pat.is_struct(data_type):
        return pa.struct([pa.field(f.name, plain_type(f.type)) for f in data_type])
    return _PLAIN.get(str(data_type), data_type)


def normalized(table: pa.Table) -> pa.Table:
    """`table` with plain string/binary/list encodings, every field nullable, no metadata, rows sorted by
    every non-nested column."""
    schema = pa.schema([pa.field(f.name, plain_type(f.type)) for f in table.schema])
    plain = table.replace_schema_metadata(None).cast(schema) if table.num_columns else table
    keys = [(f.name, "ascending") for f in schema if not pat.is_nested(f.type)]
    return plain.sort_by(keys) if keys and plain.num_rows else plain
