"""Routing groups rows by file group and keeps their order inside each group (a later row of a key
is newer), whichever sort it uses for the codes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lakecore.write.routing import _group_order


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5), max_size=60), st.sampled_from([1, 1 << 13, 1 << 20]))
def test_group_order_is_the_stable_argsort(codes: list[int], scale: int) -> None:
    array = np.array(codes, dtype=np.int64) * scale  # small codes and codes past uint16
    assert _group_order(array).tolist() == np.argsort(array, kind="stable").tolist()
