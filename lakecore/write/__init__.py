"""Write: input checks, routing to file groups, markers, and the task that writes one file group."""

from lakecore.write.conform import Conformed, Operation, as_table, conform
from lakecore.write.file_writer import WriteContext, write_file_group
from lakecore.write.markers import Marker, create_marker, delete_markers, list_markers
from lakecore.write.routing import FileGroupRows, file_group_codes, route

__all__ = ["Conformed", "FileGroupRows", "Marker", "Operation", "WriteContext", "as_table", "conform",
           "create_marker", "delete_markers", "file_group_codes", "list_markers", "route",
           "write_file_group"]
