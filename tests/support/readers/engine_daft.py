"""daft 0.7 reading Iceberg through pyiceberg's StaticTable, run by serve.py in the daft venv."""

from __future__ import annotations

import daft
import pyarrow as pa
import pyiceberg
from pyiceberg.table import StaticTable


def start() -> dict[str, str]:
    return {"daft": daft.__version__, "pyiceberg": pyiceberg.__version__, "pyarrow": pa.__version__}


def stop() -> None:
    pass


def iceberg(metadata: str, snapshot: int | None = None) -> pa.Table:
    table = StaticTable.from_metadata(metadata)
    frame = daft.read_iceberg(table) if snapshot is None else daft.read_iceberg(table, snapshot_id=snapshot)
    return frame.to_arrow()
