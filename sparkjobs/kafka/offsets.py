"""The Kafka offsets a writer's commit records, so a writer whose Spark checkpoint is gone resumes from the
table (like Hudi's checkpoint in its commit metadata). Pure: values in, values out.

`weir.kafka.offsets` in a commit's metadata is JSON {topic: {partition: next offset}}: the first offset
the writer has not written, per partition it has read (Spark's `startingOffsets` form).

`weir.kafka.lost` (a writer with `--kafka-on-data-loss skip`, in the first commit after it went on past
messages Kafka no longer held): JSON {topic: {partition: {"from": the offset it would have read next,
"resumed_at": the oldest offset Kafka held, "reason": "retention" | "recreated"}}}."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

OFFSETS_KEY = "weir.kafka.offsets"
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
              bounds: Mapping[str, Mapping[int, tuple[int, int]]]) -> tuple[Offsets | None, Lost]:
    """The recorded offsets moved on past what Kafka no longer holds, and what was lost: a partition whose
    recorded offset is below the oldest it holds lost the messages in between (retention deleted them
    unread); one whose recorded offset is past its end was created again (every message from the
    recorded offset on, of the old topic, is gone) and is read from its start. Partitions Kafka no longer
    has are left as recorded (Spark's subscription no longer reads them)."""
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
                reason = "retention" if offset < oldest else "recreated"
                out[topic][partition] = oldest
                lost.setdefault(topic, {})[partition] = {"from": offset, "resumed_at": oldest,
                                                         "reason": reason}
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
            else:
                said.append(f"{topic}-{partition} from offset {v['from']} on (the topic was created again; "
                            f"read from its offset {v['resumed_at']})")
    return "; ".join(said)
