import pyarrow as pa
import pytest

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("name", pa.string()), ("value", pa.float64())])


@pytest.fixture
def table_uri(tmp_path):
    return str(tmp_path / "t")


def rows(ids, ts, names=None, values=None):
    n = len(ids)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "ts": pa.array(ts if isinstance(ts, list) else [ts] * n, pa.int64()),
        "name": pa.array(names if names is not None else [f"n{i}" for i in ids], pa.string()),
        "value": pa.array(values if values is not None else [float(i) for i in ids], pa.float64()),
    })


def as_dict(table, key="id"):
    """{key: row dict} of a read result, so tests compare contents, not row order."""
    return {r[key]: r for r in table.to_pylist()}
