import pyarrow as pa

from lakecore import Table


def test_create_write_read_reopen(storage_uri):
    uri, options = storage_uri
    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
    t = Table.create(uri, schema=schema, record_key="id", ordering_field="ts", storage_options=options)
    t.upsert(pa.table({"id": [1, 2], "ts": [1, 1], "v": ["a", "b"]}))
    t.upsert(pa.table({"id": [2, 3], "ts": [2, 2], "v": ["B", "c"]}))
    again = Table.open(uri, storage_options=options)
    got = {r["id"]: r["v"] for r in again.read().to_pylist()}
    assert got == {1: "a", 2: "B", 3: "c"}
    assert len(again.timeline().completed) == 2
