"""`offsets.past_lost`: a writer told to skip what Kafka lost goes on at the oldest offset a partition
holds when its recorded offset is below it (retention deleted messages unread) or past its end (the
topic was created again), and says what was lost; other partitions keep their offsets."""

from __future__ import annotations

from sparkjobs.kafka.offsets import describe_lost, past_lost


def test_offsets_move_past_what_retention_or_a_new_topic_lost() -> None:
    recorded = {"a": {0: 5, 1: 9, 2: 4}, "gone": {0: 3}}
    held = {"a": {0: (8, 20), 1: (0, 12), 2: (0, 2)}}
    moved, lost = past_lost(recorded, held)
    assert moved == {"a": {0: 8, 1: 9, 2: 0}, "gone": {0: 3}}
    assert lost == {"a": {0: {"from": 5, "resumed_at": 8, "reason": "retention"},
                          2: {"from": 4, "resumed_at": 0, "reason": "recreated"}}}
    assert describe_lost(lost) == ("a-0 offsets 5..7 (deleted by retention before they were read); a-2 from "
                                   "offset 4 on (the topic was created again; read from its offset 0)")
    assert recorded["a"][0] == 5   # the caller's offsets are not changed


def test_nothing_lost_changes_nothing() -> None:
    assert past_lost({"a": {0: 8}}, {"a": {0: (8, 8)}}) == ({"a": {0: 8}}, {})
    assert past_lost(None, {"a": {0: (0, 1)}}) == (None, {})
