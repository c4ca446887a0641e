"""Weir resources for the operator tests on the real API server: a small wide table and its writers,
with absolute paths under the test's directory, and the inputs they read."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

WEIR = "weir.dev/v1alpha1"


def table(work: Path, name: str = "orders", **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "location": str(work / "lake" / name),
        "schema": [{"name": "id", "type": "int64", "nullable": False}, {"name": "amount", "type": "int64"},
                   {"name": "ts", "type": "int64"}],
        "recordKey": ["id"], "orderingField": "ts", "buckets": 1,
    }
    base.update(spec)
    return {"apiVersion": WEIR, "kind": "LakeTable", "metadata": {"name": name}, "spec": base}


def batch_writer(work: Path, name: str = "orders-load", table_name: str = "orders", *, source: str = "orders",
                 **spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "tableRef": {"name": table_name}, "mode": "batch",
        "source": {"format": "parquet", "path": str(work / "input" / source)},
        "spark": {"mode": "local", "localCores": 1, "driver": {"memory": "512m"}},
        "restartPolicy": {"backoff": {"initialSeconds": 1, "maxSeconds": 2}},
    }
    base.update(spec)
    return {"apiVersion": WEIR, "kind": "LakeWriter", "metadata": {"name": name}, "spec": base}


def write_input(work: Path, source: str = "orders", ids: Sequence[int] = range(10),
                ts: int = 1) -> list[dict[str, Any]]:
    folder = work / "input" / source
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"id": i, "amount": i * 10, "ts": ts} for i in ids]
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema([("id", pa.int64()), ("amount", pa.int64()),
                                                                 ("ts", pa.int64())])),
                   folder / f"part-{ts}.parquet")
    return rows


def streaming_writer(work: Path, name: str = "orders-stream", table_name: str = "orders", *,
                     source: str = "stream", **spec: Any) -> dict[str, Any]:
    """A streaming writer reading JSON files as they arrive (every 2 s): it runs until stopped."""
    base: dict[str, Any] = {
        "tableRef": {"name": table_name}, "mode": "streaming",
        "source": {"format": "json", "path": str(work / "input" / source)},
        "trigger": {"intervalSeconds": 2},
        "spark": {"mode": "local", "localCores": 1, "driver": {"memory": "512m"}},
        "restartPolicy": {"backoff": {"initialSeconds": 1, "maxSeconds": 2}},
    }
    base.update(spec)
    return {"apiVersion": WEIR, "kind": "LakeWriter", "metadata": {"name": name}, "spec": base}


def write_json_input(work: Path, source: str, ids: range, ts: int) -> list[dict[str, Any]]:
    import json

    folder = work / "input" / source
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"id": i, "amount": i * 10 + ts, "ts": ts} for i in ids]
    tmp = folder / f".part-{ts}.json.tmp"
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tmp.rename(folder / f"part-{ts}.json")   # whole files only: the stream must not see half of one
    return rows


def held_writer(cluster: Any, name: str, source: str, **spec: Any) -> tuple[dict[str, Any], Path]:
    """A writer whose tasks hold (files and markers written) while <pause>/hold exists."""
    pause = cluster.work / f"pause-{name}"
    pause.mkdir()
    (pause / "hold").touch()
    body = batch_writer(cluster.work, name, source=source, **spec)
    body["spec"]["spark"]["conf"] = {"spark.executorEnv.WEIR_TEST_PAUSE_DIR": str(pause)}
    return body, pause


def reached(pause: Path) -> list[str]:
    return [p.name.removeprefix("reached-") for p in pause.glob("reached-*")]
