"""A published Iceberg table registered in a catalog: pyiceberg's SQL catalog (SQLite), Apache
Iceberg's REST catalog server, and AWS Glue (moto's). The first publish registers it, each later one
moves the catalog's table to the new metadata; pyiceberg (and Spark, through the REST catalog)
reading through the catalog gets exactly `Table.read()`. A catalog that cannot be reached is one
clear error, with the published files intact and readable by path, and the next publish registers
them. A Delta target and a name held by another table are refused."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pyarrow as pa
import pytest
from pyiceberg.catalog import load_catalog

from lakecore import Table
from lakecore.errors import CatalogError, NotPublishable
from lakecore.publish import CatalogRef
from lakecore.publish.catalog_updates import Shows, decide
from tests.lakecore.publish import readers as published
from tests.support.readers import Readers, RestCatalogServer
from tests.support.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from tests.support.zookeeper import HOST, free_port

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("ts", pa.int64()), ("name", pa.string())])


def rows(ids: list[int], ts: int, tag: str) -> pa.Table:
    return pa.table({"id": ids, "dt": [f"d{i % 2}" for i in ids], "ts": [ts] * len(ids),
                     "name": [f"{tag}{i}" for i in ids]}, schema=SCHEMA)


def table(tmp_path) -> Table:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", partition_fields=["dt"],
                     ordering_field="ts", buckets=2)
    t.bulk_insert(rows(list(range(20)), 10, "a"))
    return t


def through(ref: CatalogRef) -> pa.Table:
    catalog = load_catalog(ref.name, **dict(ref.properties))
    return published.normalized(catalog.load_table(ref.table).scan().to_arrow())


def sql_catalog(tmp_path, name: str = "local") -> CatalogRef:
    return CatalogRef("lake.events", {"type": "sql", "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
                                      "warehouse": (tmp_path / "warehouse").as_uri()}, name)


def change(t: Table) -> None:
    t.add_columns([pa.field("extra", pa.int32())])  # a new schema the catalog's table takes too
    t.upsert(rows([1, 2, 30], 20, "b"))
    t.delete(pa.table({"id": pa.array([3, 4], pa.int64()), "dt": ["d1", "d0"]}))


def check_follows(t: Table, ref: CatalogRef) -> str:
    """Publishes twice through `ref`; what the catalog's table reads after the second."""
    first = t.publish("iceberg", catalog=ref)
    assert f"{ref.table} registered -> {first.location}" in first.catalog
    published.assert_same(through(ref), published.expected(t.read(), "iceberg"), ["id"], reader="catalog")
    change(t)
    second = t.publish("iceberg", catalog=ref)
    assert not second.full and second.location != first.location
    assert f"{ref.table} moved -> " in second.catalog
    published.assert_same(through(ref), published.expected(t.read(), "iceberg"), ["id"],
                          reader="catalog after")
    again = t.publish("iceberg", catalog=ref)
    assert again.up_to_date and "up to date" in again.catalog
    return second.catalog.rsplit(" -> ", 1)[1]


def test_the_sql_catalog_follows_every_publish(tmp_path):
    t = table(tmp_path)
    assert check_follows(t, sql_catalog(tmp_path)) == t.publish("iceberg").location  # our file, swapped


@pytest.mark.readers
@pytest.mark.slow
def test_the_rest_catalog_follows_every_publish(tmp_path, rest_catalog: RestCatalogServer, readers: Readers):
    t = table(tmp_path)
    ref = CatalogRef("weir_catalog_follows.events", {"type": "rest", "uri": rest_catalog.uri}, "rest")
    shown = check_follows(t, ref)
    assert shown.startswith(f"{t.uri}/metadata/")  # the catalog's own copy of our metadata, beside it
    spark = readers.spark_iceberg(rest_catalog.spark_table(ref.table))
    published.assert_same(published.normalized(spark), published.expected(t.read(), "iceberg"), ["id"],
                          reader="spark through the REST catalog")


@pytest.mark.s3
def test_the_glue_catalog_follows_every_publish(tmp_path, s3_server: S3Server):
    t = table(tmp_path)
    ref = CatalogRef("weir_glue_follows.events", {
        "type": "glue", "glue.endpoint": s3_server.endpoint_url, "glue.region": REGION,
        "glue.access-key-id": ACCESS_KEY, "glue.secret-access-key": SECRET_KEY}, "glue")
    shown = check_follows(t, ref)
    assert shown.startswith(f"{t.uri}/metadata/")  # Glue's parameters name the catalog's own copy


def test_an_unreachable_catalog_is_one_error_and_the_files_stay(tmp_path):
    t = table(tmp_path)
    ref = CatalogRef("lake.events", {"type": "rest", "uri": f"http://{HOST}:{free_port()}"}, "gone")
    with pytest.raises(CatalogError) as error:
        t.publish("iceberg", catalog=ref)
    message = str(error.value)
    assert "could not register lake.events" in message and "the published files are intact" in message
    assert "publish again" in message and "\n" not in message
    published.assert_same(published.iceberg(t.uri), published.expected(t.read(), "iceberg"), ["id"],
                          reader="by path")
    good = sql_catalog(tmp_path)
    result = t.publish("iceberg", catalog=good)  # nothing new to publish: it registers what is there
    assert result.up_to_date and "registered" in result.catalog
    published.assert_same(through(good), published.expected(t.read(), "iceberg"), ["id"], reader="catalog")


def test_an_entry_whose_metadata_was_deleted_names_the_remedy(tmp_path):
    t = table(tmp_path)
    ref = sql_catalog(tmp_path)
    t.publish("iceberg", catalog=ref)
    change(t)
    t.publish("iceberg", catalog=ref)  # the catalog reads v2.metadata.json
    shutil.rmtree(tmp_path / "t" / "metadata")  # the next publish rebuilds it: v1, under a new table uuid
    with pytest.raises(CatalogError) as error:
        t.publish("iceberg", catalog=ref)
    assert "names metadata that cannot be read" in str(error.value)
    assert "catalog.drop_table('lake.events'); no file is deleted) and publish again" in str(error.value)
    load_catalog(ref.name, **dict(ref.properties)).drop_table(ref.table)
    assert "registered" in t.publish("iceberg", catalog=ref).catalog
    published.assert_same(through(ref), published.expected(t.read(), "iceberg"), ["id"], reader="catalog")


def test_a_catalog_for_delta_or_a_name_held_by_another_table_is_refused(tmp_path):
    t = table(tmp_path)
    ref = sql_catalog(tmp_path)
    with pytest.raises(NotPublishable, match="a catalog registers Iceberg tables"):
        t.publish("delta", catalog=ref)
    assert not (tmp_path / "t" / "_delta_log").exists()
    other = Table.create(str(tmp_path / "other"), schema=SCHEMA, record_key="id")
    other.insert(rows([1], 1, "x"))
    other.publish("iceberg", catalog=ref)
    with pytest.raises(CatalogError, match="is another table"):
        t.publish("iceberg", catalog=ref)
    assert through(ref).num_rows == 1  # still the other table


def test_the_catalog_only_moves_forward():
    shows = Shows("/lake/t", "u1", 7, 3)
    assert decide(shows, replace(shows, snapshot=8, sequence=4)) == "move"
    assert decide(replace(shows, snapshot=9, sequence=5), replace(shows, snapshot=8, sequence=4)) == "newer"
    assert decide(shows, shows) == "same"
    assert decide(shows, replace(shows, uuid="u2", snapshot=1, sequence=1)) == "rebuilt"
    assert decide(replace(shows, location="/lake/u"), shows) == "foreign"
