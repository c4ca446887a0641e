"""The write path splits across processes as the Spark writers run it: the driver opens the instant,
worker processes write one file group each from a pickled context, the driver commits."""

import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor

import pyarrow as pa

from lakecore import Table
from lakecore.concurrency import begin_write, commit_write
from lakecore.write import conform, route, write_file_group
from tests.lakecore.table.conftest import SCHEMA, as_dict, rows


def task(payload: bytes):
    ctx, group = pickle.loads(payload)
    return write_file_group(ctx, group)


def test_tasks_in_other_processes_write_file_groups_the_driver_commits(table_uri):
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts", buckets=4)
    t.upsert(rows(list(range(20)), 1))
    data = conform(rows(list(range(10, 40)), 2, names=[f"x{i}" for i in range(10, 40)]), t.config, "upsert")
    txn = begin_write(t.storage, t.config, t.lock, "upsert")
    groups = route(data.rows, t.config)
    assert len(groups) == 4
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=spawn) as pool:
        payloads = [pickle.dumps((txn.context(f"{i}-0-0"), g)) for i, g in enumerate(groups)]
        stats = [s for written in pool.map(task, payloads) for s in written]
    assert not t.read().column("name").to_pylist().count("x15")  # invisible until the driver commits
    commit_write(txn, stats, lock=t.lock)
    got = as_dict(t.read())
    assert len(got) == 40 and got[15]["name"] == "x15" and got[5]["name"] == "n5"


def test_read_optimized_query_sees_base_files_only(table_uri):
    t = Table.create(table_uri, schema=SCHEMA, record_key="id", ordering_field="ts")
    t.bulk_insert(rows([1, 2], 1))
    t.upsert(rows([2, 3], 2, names=["new2", "new3"]))
    ro = as_dict(t.read(query="read_optimized"))
    assert sorted(ro) == [1, 2] and ro[2]["name"] == "n2"
    assert as_dict(t.read())[2]["name"] == "new2"
    assert isinstance(t.read(query="read_optimized"), pa.Table)
