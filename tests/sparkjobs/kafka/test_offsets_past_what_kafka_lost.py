"""`offsets.past_lost`: a writer told to skip what Kafka lost goes on at the oldest offset a partition
holds when its recorded offset is below it (retention deleted messages unread) or past its end (the
topic was created again, or truncated when the topic kept its id), and says what was lost; other
partitions keep their offsets. A topic's id recorded with the offsets tells a recreated topic."""

from __future__ import annotations

from sparkjobs.kafka.offsets import (
    decode_ids,
    describe_lost,
    encode_ids,
    past_lost,
    past_recreated,
    recreated,
)


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


def test_a_topic_with_its_recorded_id_was_truncated_not_recreated() -> None:
    """Past the end of a partition whose topic still has the id recorded with the offsets: an unclean
    leader election truncated it after the writer read on. It is said so (it used to be called a
    recreated topic) and read again from its start: where the truncation began is not known, and new
    messages may have come after it, below the end."""
    moved, lost = past_lost({"a": {0: 10, 1: 4}}, {"a": {0: (2, 7), 1: (0, 6)}}, unchanged={"a"})
    assert moved == {"a": {0: 2, 1: 4}}
    assert lost == {"a": {0: {"from": 10, "resumed_at": 2, "reason": "truncated"}}}
    assert describe_lost(lost) == ("a-0 now ends before offset 10, which the writer had reached (the "
                                   "partition was truncated, as after an unclean leader election, its topic "
                                   "unchanged); read again from its offset 2")
    assert past_lost({"a": {0: 10}}, {"a": {0: (2, 7)}}, unchanged={"b"})[1]["a"][0]["reason"] == "recreated"


def test_a_recreated_topic_is_read_from_its_start_and_its_ids_compare() -> None:
    assert recreated({"a": "id1", "b": "id2", "c": "id3"}, {"a": "id1", "b": "id9"}) == {"b": ("id2", "id9")}
    moved, lost = past_recreated({"a": {0: 3, 1: 5}, "b": {0: 1}}, ["a"],
                                 {"a": {0: (0, 9), 1: (2, 2), 2: (0, 4)}})
    # longer or shorter than before, or a partition the old topic did not have: from its start
    assert moved == {"a": {0: 0, 1: 2, 2: 0}, "b": {0: 1}}
    assert lost == {"a": {0: {"from": 3, "resumed_at": 0, "reason": "recreated"},
                          1: {"from": 5, "resumed_at": 2, "reason": "recreated"}}}
    assert decode_ids(encode_ids({"b": "y", "a": "x"})) == {"a": "x", "b": "y"}
    assert decode_ids(None) == {} and decode_ids("not json") == {}
