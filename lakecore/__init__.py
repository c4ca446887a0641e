"""lakecore: Weir's lake table format — timeline, file groups, copy-on-write and merge-on-read,
payload merging with ordering fields and column groups, snapshot / time-travel / incremental reads.

No Spark, no Kubernetes, no kopf here; those layers build on this API.
"""

from lakecore.config import ColumnGroup, TableConfig
from lakecore.errors import (
    CorruptMetadata,
    InvalidInput,
    InvalidTableConfig,
    LakecoreError,
    MissingColumn,
    NullKey,
    SchemaMismatch,
    TableAlreadyExists,
    TableNotFound,
    UnsupportedType,
)
from lakecore.table import Table, WriteJob, WriteResult, WriterOptions
from lakecore.timeline import Instant, State, Timeline

__all__ = ["ColumnGroup", "CorruptMetadata", "Instant", "InvalidInput", "InvalidTableConfig",
           "LakecoreError", "MissingColumn", "NullKey", "SchemaMismatch", "State", "Table",
           "TableAlreadyExists", "TableConfig", "TableNotFound", "Timeline", "UnsupportedType",
           "WriteJob", "WriteResult", "WriterOptions"]
