"""Published snapshots: what each one shows (a Weir instant, a view) and which ones a target keeps.
Pure.

Retention moves in step with the table's own: a published snapshot whose instant completed before
the earliest point Weir still reads (the newest clean's `earliest_retained`) expires, as do all but
the newest `keep`; the newest is always kept (it is what readers see). Clean keeps the files of every
retained snapshot (`services.published`), so expiring them is what lets clean reclaim their files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lakecore.publish.plan import PublishPlan, PublishView


@dataclass(frozen=True)
class PublishedSnapshot:
    instant: str        # the Weir instant's requested time
    completion: str     # its completion time (what `read(as_of=instant)` resolves to)
    view: PublishView
    id: int             # the Iceberg snapshot id or the Delta version
    schema: str = ""    # plan.schema_fingerprint of its columns

    @classmethod
    def of(cls, plan: PublishPlan, snapshot_id: int) -> PublishedSnapshot:
        return cls(plan.instant.requested_time, plan.instant.completion_time or "", plan.view, snapshot_id,
                   plan.fingerprint)


@dataclass(frozen=True)
class Retention:
    keep: int = 10              # published snapshots kept at most (time travel through the target)
    after: str | None = None    # the earliest completion time Weir still reads; older snapshots expire


def retained(snapshots: Sequence[PublishedSnapshot], policy: Retention) -> list[PublishedSnapshot]:
    """The snapshots to keep, oldest first; `snapshots` oldest first, the newest last."""
    if not snapshots:
        return []
    *older, newest = snapshots
    kept = [s for s in older if policy.after is None or s.completion >= policy.after]
    tail = kept[-(policy.keep - 1):] if policy.keep > 1 else []
    return [*tail, newest]
