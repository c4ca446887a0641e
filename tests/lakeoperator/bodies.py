"""Minimal custom-resource bodies for the operator's unit tests (plain dicts, as the API returns them)."""

from __future__ import annotations

import copy
from typing import Any


def meta(name: str = "orders", generation: int = 1, **annotations: str) -> dict[str, Any]:
    return {"name": name, "namespace": "lake", "uid": f"uid-{name}", "generation": generation,
            "annotations": dict(annotations)}


def lake_table(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "location": "s3://lake/orders",
        "schema": [{"name": "id", "type": "int64", "nullable": False}, {"name": "ts", "type": "timestamp_us"},
                   {"name": "amount", "type": "decimal128(12,2)"}, {"name": "day", "type": "string"}],
        "recordKey": ["id"], "partitionFields": ["day"],
    }
    base.update(spec)
    return {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeTable", "metadata": meta(), "spec": base,
            "status": {"phase": "Ready"}}


def lake_writer(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"tableRef": {"name": "orders"}, "mode": "streaming",
                            "source": {"path": "s3://in/orders/"}}
    base.update(spec)
    return {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeWriter", "metadata": meta("orders-ingest"),
            "spec": base}


def table_service(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"tableRef": {"name": "orders"}, "type": "compaction", "schedule": "0 */6 * * *"}
    base.update(spec)
    return {"apiVersion": "weir.dev/v1alpha1", "kind": "TableService", "metadata": meta("orders-compact"),
            "spec": base}


def without(body: dict[str, Any], *path: str) -> dict[str, Any]:
    out = copy.deepcopy(body)
    node = out["spec"]
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return out
