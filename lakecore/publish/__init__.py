"""Publishing: Iceberg and Delta metadata written beside a Weir table, over its Parquet files as they
are, so every engine that reads either format reads the table.

`plan.py` decides what a snapshot shows (files, and rows each must hide, from lakecore's own merged
read), `types.py` maps column types, `iceberg*.py` and `delta*.py` write each format, `publisher.py`
runs one publish (incremental or full, pinned for clean, crash-safe), `catalog.py` registers it
in an Iceberg catalog. Sits above the services layer
(it reads clean's records and pins files for it) and below the table facade.
"""

from lakecore.publish.catalog import CatalogRef
from lakecore.publish.plan import PublishPlan, PublishView
from lakecore.publish.publisher import TARGETS, PublishResult, Target, publish, published_since
from lakecore.publish.snapshots import PublishedSnapshot

__all__ = ["TARGETS", "CatalogRef", "PublishPlan", "PublishResult", "PublishView", "PublishedSnapshot",
           "Target", "publish", "published_since"]
