"""The Kafka offsets a writer's commit records, so a writer whose Spark checkpoint is gone resumes from the
table (like Hudi's checkpoint in its commit metadata). Pure: values in, values out.

`weir.kafka.offsets` in a commit's metadata is JSON {topic: {partition: next offset}}: the first offset
the writer has not written, per partition it has read (Spark's `startingOffsets` form).

`weir.kafka.topic_ids` beside them: JSON {topic: Kafka's topic id}, the ids of the topics read when the
offsets were. A topic deleted and created again under the same name has a new id, so offsets recorded in
the old one are told apart from the new topic's, whatever its length (`recreated`).

`weir.kafka.lost` (a writer with `--kafka-on-data-loss skip`, in the first commit after it went on past
messages Kafka no longer held): JSON {topic: {partition: {"from": the offset it would have read next,
"resumed_at": the offset it read on from, "reason": "retention" | "recreated" | "truncated"}}}."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

OFFSETS_KEY = "weir.kafka.offsets"
TOPIC_IDS_KEY = "weir.kafka.topic_ids"
LOST_KEY = "weir.kafka.lost"
EARLIEST, LATEST = -2, -1    # Spark's startingOffsets codes

Offsets = dict[str, dict[int, int]]    # topic -> partition -> next offset


def encode(offsets: Mapping[str, Mapping[int, int]]) -> str:
    return json.dumps({t: {str(p): o for p, o in sorted(ps.items())} for t, ps in sorted(offsets.items())},
                      separators=(",", ":"))


def decode(text: str | None) -> Offsets | None:
    """Offsets from a commit's metadata value; None when absent or not offsets."""
    if not text:
        return None
    try:
        raw = json.loads(text)
        return {str(t): {int(p): int(o) for p, o in ps.items()} for t, ps in raw.items()}
    except (ValueError, AttributeError, TypeError):
        return None


def encode_ids(ids: Mapping[str, str]) -> str:
    return json.dumps(dict(sorted(ids.items())), separators=(",", ":"))


def decode_ids(text: str | None) -> dict[str, str]:
    """Topic ids from a commit's metadata value; empty when absent (a commit of an older writer)."""
    try:
        raw = json.loads(text) if text else {}
        return {str(t): str(i) for t, i in raw.items()} if isinstance(raw, dict) else {}
    except ValueError:
        return {}


def recreated(recorded_ids: Mapping[str, str], ids: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """The topics whose id changed since the ids were recorded (deleted and created again): topic ->
    (recorded id, id now). A topic known on one side only is not judged."""
    return {t: (old, ids[t]) for t, old in recorded_ids.items() if t in ids and ids[t] != old}


def advanced(previous: Mapping[str, Mapping[int, int]] | None,
             read: Iterable[tuple[str, int, int]]) -> Offsets:
    """`previous` moved past what a batch read: (topic, partition, highest offset read) each."""
    out: Offsets = {t: dict(ps) for t, ps in (previous or {}).items()}
    for topic, partition, last in read:
        current = out.setdefault(topic, {}).get(partition)
        out[topic][partition] = max(last + 1, current if current is not None else 0)
    return out


def starting(recorded: Mapping[str, Mapping[int, int]], partitions: Mapping[str, Iterable[int]],
             default: int) -> str:
    """Spark's `startingOffsets` JSON for a query without a checkpoint: every partition there is now (Spark
    wants them all), at the recorded offset, else at `default` (EARLIEST or LATEST: a partition the writer
    never read from)."""
    out = {t: {str(p): (recorded.get(t) or {}).get(p, default) for p in sorted(ps)}
           for t, ps in sorted(partitions.items())}
    return json.dumps(out, separators=(",", ":"))


Bounds = dict[str, dict[int, tuple[int, int]]]   # topic -> partition -> (oldest offset held, next offset)
Lost = dict[str, dict[int, dict[str, object]]]


def past_lost(recorded: Mapping[str, Mapping[int, int]] | None,
              bounds: Mapping[str, Mapping[int, tuple[int, int]]],
              unchanged: Iterable[str] = ()) -> tuple[Offsets | None, Lost]:
    """The recorded offsets moved on past what Kafka no longer holds, and what was lost: a partition whose
    recorded offset is below the oldest it holds lost the messages in between (retention deleted them
    unread); one whose recorded offset is past its end was created again (every message from the
    recorded offset on, of the old topic, is gone) and is read from its start, unless its topic is one of
    `unchanged` (its id is the one recorded): then the partition was truncated (an unclean leader
    election dropped messages the writer had read). It is read from its start too: where the truncation
    began is not known, and new messages may have come after it, below the end. Partitions Kafka no
    longer has are left as recorded (Spark's subscription no longer reads them)."""
    same = set(unchanged)
    if not recorded:
        return ({} if recorded is not None else None), {}
    out: Offsets = {t: dict(ps) for t, ps in recorded.items()}
    lost: Lost = {}
    for topic, parts in recorded.items():
        for partition, offset in parts.items():
            held = (bounds.get(topic) or {}).get(partition)
            if held is None:
                continue
            oldest, end = held
            if offset < oldest or offset > end:
                reason = "retention" if offset < oldest else "truncated" if topic in same else "recreated"
                out[topic][partition] = oldest
                lost.setdefault(topic, {})[partition] = {"from": offset, "resumed_at": oldest,
                                                         "reason": reason}
    return out, lost


def past_recreated(recorded: Mapping[str, Mapping[int, int]], topics: Iterable[str],
                   bounds: Mapping[str, Mapping[int, tuple[int, int]]]) -> tuple[Offsets, Lost]:
    """The offsets of `topics` (created again since they were recorded) at the oldest offset of every
    partition of the new topic (one the old topic did not have too), and what was lost: every message
    of the old topic from the recorded offset on. Partitions the new topic does not have are left as
    recorded (not read)."""
    out: Offsets = {t: dict(ps) for t, ps in recorded.items()}
    lost: Lost = {}
    for topic in topics:
        for partition, (oldest, _) in (bounds.get(topic) or {}).items():
            out.setdefault(topic, {})[partition] = oldest
            offset = (recorded.get(topic) or {}).get(partition)
            if offset is not None:
                lost.setdefault(topic, {})[partition] = {"from": offset, "resumed_at": oldest,
                                                         "reason": "recreated"}
    return out, lost


def encode_lost(lost: Mapping[str, Mapping[int, Mapping[str, object]]]) -> str:
    return json.dumps({t: {str(p): dict(v) for p, v in sorted(ps.items())} for t, ps in sorted(lost.items())},
                      separators=(",", ":"))


def describe_lost(lost: Mapping[str, Mapping[int, Mapping[str, object]]]) -> str:
    """One line: which partitions lost which offsets."""
    said = []
    for topic, parts in sorted(lost.items()):
        for partition, v in sorted(parts.items()):
            if v["reason"] == "retention":
                said.append(f"{topic}-{partition} offsets {v['from']}..{int(str(v['resumed_at'])) - 1} "
                            "(deleted by retention before they were read)")
            elif v["reason"] == "truncated":
                said.append(f"{topic}-{partition} now ends before offset {v['from']}, which the writer had "
                            "reached (the partition was truncated, as after an unclean leader election, its "
                            f"topic unchanged); read again from its offset {v['resumed_at']}")
            else:
                said.append(f"{topic}-{partition} from offset {v['from']} on (the topic was created again; "
                            f"read from its offset {v['resumed_at']})")
    return "; ".join(said)
