"""The Kafka offsets a writer's commit records, so a writer whose Spark checkpoint is gone resumes from the
table (like Hudi's checkpoint in its commit metadata). Pure: values in, values out.

`weir.kafka.offsets` in a commit's metadata is JSON {topic: {partition: next offset}}: the first offset
the writer has not written, per partition it has read (Spark's `startingOffsets` form)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

OFFSETS_KEY = "weir.kafka.offsets"
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
