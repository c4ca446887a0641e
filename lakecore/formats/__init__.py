"""Formats: how base and log files are encoded (Parquet for both; log files add an op column)."""

from lakecore.formats.parquet import DictionaryChoice, read_file, read_files, read_schema, write_file

__all__ = ["DictionaryChoice", "read_file", "read_files", "read_schema", "write_file"]
