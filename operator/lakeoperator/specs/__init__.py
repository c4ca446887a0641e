"""Raw custom-resource bodies -> frozen typed specs, with the API's defaults applied; one module per kind
(table.py, writer.py, service.py) and what they share (common.py: SpecError, ObjectRef, the Spark section).

Owns: the field names and defaults of LakeTable, LakeWriter and TableService (the API contract; the CRDs
in crds/ declare the same), the cross-field rules the CRDs state in CEL (checked again here, because the
local runner reads manifests that no API server validated), `SpecError` and `ObjectRef`. The package's
names are its public surface: `from lakeoperator.specs import parse_lake_writer, SpecError`.

Must not: talk to Kubernetes, import kopf, read storage, or decide anything (planners in `plan/` do).
A body is parsed once, at the handler edge; everything after works on these values.
"""

from lakeoperator.specs.common import (
    MANAGED_ANNOTATION,
    MANAGED_CONF_PREFIXES,
    PAUSED_ANNOTATION,
    DriverResources,
    ExecutorResources,
    NameRef,
    ObjectRef,
    SparkMode,
    SparkSpec,
    SpecError,
    spark_memory_mib,
)
from lakeoperator.specs.service import (
    CRON_ALIASES,
    ConcurrencyPolicy,
    ServicePolicySpec,
    ServiceTriggerSpec,
    ServiceType,
    TableServiceSpec,
    parse_table_service,
)
from lakeoperator.specs.table import (
    DECIMAL_TYPE,
    PRIMITIVE_TYPES,
    ColumnGroupSpec,
    ColumnSpec,
    ConcurrencyMode,
    ConcurrencySpec,
    DeletionPolicy,
    EarlyDetectionSpec,
    EarlyDetectionStrategy,
    HeartbeatSpec,
    LakeTableSpec,
    LockProvider,
    SecretKeyRef,
    StorageSpec,
    TableType,
    ZookeeperCredentialsRef,
    parse_lake_table,
)
from lakeoperator.specs.writer import (
    BackoffSpec,
    DesiredState,
    LakeWriterSpec,
    OnConflict,
    Operation,
    RestartPolicySpec,
    RestartType,
    SourceSpec,
    TriggerSpec,
    WriterMode,
    parse_lake_writer,
)

__all__ = [
    "CRON_ALIASES",
    "DECIMAL_TYPE",
    "MANAGED_ANNOTATION",
    "MANAGED_CONF_PREFIXES",
    "PAUSED_ANNOTATION",
    "PRIMITIVE_TYPES",
    "BackoffSpec",
    "ColumnGroupSpec",
    "ColumnSpec",
    "ConcurrencyMode",
    "ConcurrencyPolicy",
    "ConcurrencySpec",
    "DeletionPolicy",
    "DesiredState",
    "DriverResources",
    "EarlyDetectionSpec",
    "EarlyDetectionStrategy",
    "ExecutorResources",
    "HeartbeatSpec",
    "LakeTableSpec",
    "LakeWriterSpec",
    "LockProvider",
    "NameRef",
    "ObjectRef",
    "OnConflict",
    "Operation",
    "RestartPolicySpec",
    "RestartType",
    "SecretKeyRef",
    "ServicePolicySpec",
    "ServiceTriggerSpec",
    "ServiceType",
    "SourceSpec",
    "SparkMode",
    "SparkSpec",
    "SpecError",
    "StorageSpec",
    "TableServiceSpec",
    "TableType",
    "TriggerSpec",
    "WriterMode",
    "ZookeeperCredentialsRef",
    "parse_lake_table",
    "parse_lake_writer",
    "parse_table_service",
    "spark_memory_mib",
]
