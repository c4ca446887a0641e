"""A write that carries a column group partly is refused naming each missing column once (the group's
ordering field is one of its columns: it was named twice)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from lakecore import ColumnGroup, Table
from lakecore.errors import MissingColumn


def test_a_partly_carried_group_names_each_missing_column_once(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("a", pa.int64()), ("ta", pa.int64()), ("b", pa.int64()),
                        ("tb", pa.int64())])
    t = Table.create(str(tmp_path / "t"), schema=schema, record_key="id", buckets=1,
                     column_groups=[ColumnGroup("ga", ("a", "ta"), "ta"),
                                    ColumnGroup("gb", ("b", "tb"), "tb")])
    with pytest.raises(MissingColumn, match=r"group 'gb' partly: it lacks \['tb'\]; a write updates"):
        t.upsert(pa.table({"id": [1], "b": [1]}))
    assert t.timeline().instants == ()
