"""Layout: data file names, file groups and slices, and the file-system view built from the timeline."""

from lakecore.layout.file_names import (
    DataFileName,
    base_file_name,
    bucket_file_id,
    log_file_name,
    parse_data_file_name,
    parse_partition_path,
    partition_path,
    write_token,
)
from lakecore.layout.view import FileSlice, FileSystemView, LogFile, build_view, completed_files, slice_logs

__all__ = ["DataFileName", "FileSlice", "FileSystemView", "LogFile", "base_file_name", "bucket_file_id",
           "build_view", "completed_files", "log_file_name", "parse_data_file_name", "parse_partition_path",
           "partition_path", "slice_logs", "write_token"]
