"""Write: input checks, routing to file groups, markers, and the task that writes one file group."""

from lakecore.write.conform import (
    OPERATIONS,
    OVERWRITES,
    ArrowStream,
    Conformed,
    Operation,
    WriteInput,
    as_table,
    check_operation,
    conform,
    evolved_schema,
)
from lakecore.write.file_writer import WriteContext, combine_and_route, empty_group, write_file_group
from lakecore.write.markers import (
    DirectMarkers,
    IOType,
    Marker,
    MarkerWriter,
    create_marker,
    delete_markers,
    delete_unreported,
    list_markers,
    prune_marker_dirs,
)
from lakecore.write.routing import FileGroupRows, file_group_codes, route
from lakecore.write.syncs import BackgroundSyncs

__all__ = [
    "OPERATIONS",
    "OVERWRITES",
    "ArrowStream",
    "BackgroundSyncs",
    "Conformed",
    "DirectMarkers",
    "FileGroupRows",
    "IOType",
    "Marker",
    "MarkerWriter",
    "Operation",
    "WriteContext",
    "WriteInput",
    "as_table",
    "check_operation",
    "combine_and_route",
    "conform",
    "create_marker",
    "delete_markers",
    "delete_unreported",
    "empty_group",
    "evolved_schema",
    "file_group_codes",
    "list_markers",
    "prune_marker_dirs",
    "route",
    "write_file_group",
]
