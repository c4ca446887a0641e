"""The readers of published tables that run in the project's own environment (pyiceberg, deltalake's
DataFusion QueryBuilder, polars), and the comparison with what lakecore reads.

Readers differ in how they represent a logical type (string, large_string, string_view); `normalized`
folds those representations together and nothing else, so a wrong logical type (int8 where the type
map says int32) still fails the comparison.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from lakecore.publish.types import read_back_type

_SAME = {pa.large_string(): pa.string(), pa.string_view(): pa.string(), pa.large_binary(): pa.binary(),
         pa.binary_view(): pa.binary()}


def _logical(t: pa.DataType) -> pa.DataType:
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return pa.list_(t.value_field.with_type(_logical(t.value_type)))
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_logical(t.field(i).type)) for i in range(t.num_fields)])
    return _SAME.get(t, t)


def normalized(table: pa.Table) -> pa.Table:
    schema = pa.schema([pa.field(f.name, _logical(f.type), nullable=True) for f in table.schema])
    return table.cast(schema)


def expected(read: pa.Table, target: str) -> pa.Table:
    """What the target's readers must return for lakecore's `read`: the type map applied."""
    schema = pa.schema([pa.field(f.name, read_back_type(f.type, target), nullable=True) for f in read.schema])
    return normalized(read.cast(schema))


def iceberg_metadata(base: str) -> str:
    version = (Path(base) / "metadata" / "version-hint.text").read_text().strip()
    return str(Path(base) / "metadata" / f"v{version}.metadata.json")


def iceberg(base: str, *, snapshot_id: int | None = None) -> pa.Table:
    from pyiceberg.table import StaticTable

    table = StaticTable.from_metadata(iceberg_metadata(base))
    return normalized(table.scan(snapshot_id=snapshot_id).to_arrow())


def delta(base: str, *, version: int | None = None) -> pa.Table:
    from deltalake import DeltaTable, QueryBuilder

    dt = DeltaTable(base, version=version)
    return normalized(pa.table(QueryBuilder().register("t", dt).execute("select * from t").read_all()))


def polars(base: str, *, version: int | None = None) -> pa.Table:
    import polars as pl

    return normalized(pl.read_delta(base, version=version).to_arrow())


READERS = {"iceberg": iceberg, "delta": delta, "polars": polars}
TARGET_OF = {"iceberg": "iceberg", "delta": "delta", "polars": "delta"}


def assert_same(got: pa.Table, want: pa.Table, key: list[str], *, reader: str) -> None:
    """Row for row, types included (after `normalized`), ignoring row order."""
    assert got.schema.names == want.schema.names, \
        f"{reader}: columns {got.schema.names} != {want.schema.names}"
    assert got.schema == want.schema, f"{reader}: types differ:\n{got.schema}\n!=\n{want.schema}"
    order = [(k, "ascending") for k in key]
    g, w = got.sort_by(order), want.sort_by(order)
    if not g.equals(w):
        gk = set(zip(*[g.column(k).to_pylist() for k in key], strict=True))
        wk = set(zip(*[w.column(k).to_pylist() for k in key], strict=True))
        raise AssertionError(f"{reader}: {g.num_rows} rows, expected {w.num_rows}; only in reader: "
                             f"{sorted(gk - wk)[:5]}, missing: {sorted(wk - gk)[:5]}; first differing rows: "
                             f"{_first_difference(g, w)}")


def assert_before_or_after(got: pa.Table, before: pa.Table | None, after: pa.Table, key: list[str], *,
                           reader: str) -> None:
    """`got` is `before` (None: nothing was shown) or else `after`: a step killed midway showed one."""
    if before is not None:
        try:
            assert_same(got, before, key, reader="")
            return
        except AssertionError:
            pass
    assert_same(got, after, key, reader=reader)


def _first_difference(g: pa.Table, w: pa.Table) -> str:
    if g.num_rows != w.num_rows:
        return "(row counts differ)"
    for name in g.column_names:
        same = pc.equal(g.column(name), w.column(name))
        bad = pc.invert(pc.fill_null(same, False))
        both_null = pc.and_(pc.is_null(g.column(name)), pc.is_null(w.column(name)))
        bad = pc.and_(bad, pc.invert(both_null))
        if pc.any(bad).as_py():
            i = pc.index(bad, True).as_py()
            return f"column {name!r} row {i}: {g.column(name)[i]} != {w.column(name)[i]}"
    return "(none found)"
