"""Publishing: Iceberg and Delta metadata written beside a Weir table, over its Parquet files as they
are, so every engine that reads either format reads the table.

`plan.py` decides what a snapshot shows (files, and rows each must hide, from lakecore's own merged
read). Sits above the services layer and below the table facade.
"""

from lakecore.publish.plan import PublishPlan, PublishView

__all__ = ["PublishPlan", "PublishView"]
