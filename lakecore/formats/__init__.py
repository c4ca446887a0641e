"""Formats: how base and log files are encoded (Parquet for both; log files add an op column)."""

from lakecore.formats.parquet import (
    DictionaryChoice,
    Footer,
    map_files,
    read_file,
    read_files,
    read_footer,
    read_schema,
    write_file,
)

__all__ = ["DictionaryChoice", "Footer", "map_files", "read_file", "read_files", "read_footer", "read_schema",
           "write_file"]
