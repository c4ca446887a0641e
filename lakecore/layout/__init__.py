"""Layout: data file names, file groups and slices, and the file-system view built from the timeline."""

from lakecore.layout.file_names import (
    FOREIGN_DIRS,
    DataFileName,
    base_file_name,
    bucket_file_id,
    is_table_path,
    log_file_name,
    parse_data_file_name,
    parse_partition_path,
    partition_path,
    write_token,
)
from lakecore.layout.view import FileSlice, FileSystemView, LogFile, build_view, completed_files, slice_logs

__all__ = ["FOREIGN_DIRS", "DataFileName", "FileSlice", "FileSystemView", "LogFile", "base_file_name",
           "bucket_file_id", "build_view", "completed_files", "is_table_path", "log_file_name",
           "parse_data_file_name", "parse_partition_path", "partition_path", "slice_logs", "write_token"]
