"""A KRaft cluster id goes on the storage tool's command line after `-t`: one starting with '-' (1 in 64
random ids) was read as an option ("argument --cluster-id/-t: expected one argument") and the broker never
started. Ids are drawn until one does not."""

from __future__ import annotations

import base64

from lakeoperator.dev.kafka import new_cluster_id


def test_cluster_ids_never_start_with_a_dash_and_decode_to_16_bytes() -> None:
    ids = [new_cluster_id() for _ in range(3000)]   # the old code gave ~47 starting with '-'
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(base64.urlsafe_b64decode(i + "==")) == 16 for i in ids)
    assert len(set(ids)) == len(ids)
