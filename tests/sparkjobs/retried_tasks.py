"""Run by test_retried_task_attempts.py in a process of its own: a local Spark that retries failed
tasks (the shared test session does not), a compaction whose first operation's first attempt writes
its file and then dies, and a batch write whose tasks all die once after writing. Prints JSON."""

from __future__ import annotations

import json
import sys

import pyarrow as pa
from pyspark import TaskContext

from lakecore import Table
from lakecore.services import commit_compaction, schedule_compaction, start_compaction
from lakecore.services import compaction as compaction_service
from sparkjobs.services import _run_operations
from sparkjobs.session import local_session

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def data_files(t: Table) -> set[str]:
    return {f.path for f in t.storage.list_tree("") if not f.path.startswith(".weir")}


def main(work: str) -> None:
    spark = local_session("weir-retries", cores=2, work_dir=f"{work}/spark", task_attempts=2)
    spark.sparkContext.setLogLevel("OFF")
    t = Table.create(f"{work}/t", schema=SCHEMA, record_key="id", ordering_field="ts", buckets=2)
    for ts in range(3):
        t.upsert(pa.table({"id": list(range(40)), "ts": [ts] * 40, "v": [str(ts)] * 40}, schema=SCHEMA))
    before = sorted(t.read().to_pylist(), key=lambda r: r["id"])
    plan = schedule_compaction(t.storage, t.config, t.lock)
    run = start_compaction(t.storage, t.config, plan, t.lock)
    storage, config, instant = t.storage, run.config, plan.instant_time

    def flaky(index: int, op: object, token: str) -> object:
        stat = compaction_service.execute_operation(storage, config, instant, op, token)
        ctx = TaskContext.get()
        if index == 0 and ctx is not None and ctx.attemptNumber() == 0:
            raise RuntimeError("executor lost after writing its file")
        return stat

    stats = _run_operations(spark, plan.operations, flaky, "compact", run.attempt)
    written_before_reconcile = {f for f in data_files(t) if instant in f}
    commit_compaction(storage, t.lock, plan, run, stats, reconcile=True)
    deleted = sorted(written_before_reconcile - {f for f in data_files(t) if instant in f})
    after = sorted(Table.open(t.uri).read().to_pylist(), key=lambda r: r["id"])
    print(json.dumps({"operations": len(plan.operations), "stats": sorted(s.path for s in stats),
                      "written": sorted(written_before_reconcile), "deleted": deleted,
                      "left": sorted(f for f in data_files(t) if instant in f), "same": before == after}))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
