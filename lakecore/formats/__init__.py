"""Formats: how base and log files are encoded (Parquet for both; log files add an op column)."""

from lakecore.formats.parquet import (
    ROW_GROUP_ROWS,
    EncodingChoice,
    Encodings,
    Footer,
    RowGroupFilter,
    RowSource,
    map_files,
    read_file,
    read_files,
    read_footer,
    read_footer_stats,
    read_schema,
    write_data_file,
    write_file,
)
from lakecore.formats.stats import FileStats, file_stats

__all__ = [
    "ROW_GROUP_ROWS",
    "EncodingChoice",
    "Encodings",
    "FileStats",
    "Footer",
    "RowGroupFilter",
    "RowSource",
    "file_stats",
    "map_files",
    "read_file",
    "read_files",
    "read_footer",
    "read_footer_stats",
    "read_schema",
    "write_data_file",
    "write_file",
]
