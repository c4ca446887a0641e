"""LakeTable publishing decisions (pure): which spec.publish targets are due after a commit, and what
each one's status entry says after a publish.

A target is due when it never published, its last publish failed, it shows an older instant than the
table's latest completed one, or the spec asks for what it does not show (another view, a catalog it is
not registered in, another Iceberg format version). A publish that failed keeps what the target's readers
still see, with the error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lakeoperator.specs import PublishSpec


@dataclass(frozen=True)
class PublishOutcome:
    """One target's publish: what its readers see now, or why it failed (`error`)."""

    format: str
    instant: str | None = None
    snapshot: int | None = None
    view: str | None = None
    location: str | None = None
    catalog: str | None = None     # what the catalog's table reads now
    error: str | None = None
    format_version: int | None = None  # Iceberg's


def entries_of(status: Mapping[str, Any] | None) -> dict[str, Mapping[str, Any]]:
    """status.published by format."""
    return {str(e.get("format")): e for e in (status or {}).get("published") or () if isinstance(e, Mapping)}


def due_targets(spec: PublishSpec, status: Mapping[str, Any] | None, latest: str | None) -> tuple[str, ...]:
    """The targets to publish now (none before the table's first completed instant)."""
    if latest is None:
        return ()
    entries = entries_of(status)

    def due(target: str) -> bool:
        e = entries.get(target)
        return e is None or bool(e.get("error")) or e.get("instant") != latest \
            or (spec.view is not None and e.get("view") != spec.view) \
            or (target == "iceberg" and spec.catalog is not None and not e.get("catalog")) \
            or (target == "iceberg" and e.get("formatVersion", 2) != spec.iceberg_format_version)

    return tuple(t for t in spec.targets if due(t))


def published_fields(spec: PublishSpec, status: Mapping[str, Any] | None, outcomes: Sequence[PublishOutcome],
                     now: str) -> dict[str, Any]:
    """status.published and publishedInstant after `outcomes` (published at `now`, an RFC 3339 time):
    one entry per spec target, in spec order; publishedInstant the oldest instant they show (None until
    each showed one)."""
    entries = entries_of(status)
    for o in outcomes:
        if o.error is not None and o.instant is None:   # nothing new shown: keep what readers see
            entries[o.format] = {**entries.get(o.format, {"format": o.format}), "error": o.error}
            continue
        fresh = {"format": o.format, "instant": o.instant, "snapshot": o.snapshot, "view": o.view,
                 "location": o.location, "catalog": o.catalog, "publishedAt": now, "error": o.error,
                 "formatVersion": o.format_version}
        entries[o.format] = {k: v for k, v in fresh.items() if v is not None}
    shown = [dict(entries[t]) for t in spec.targets if t in entries]
    instants = [str(e["instant"]) for e in shown if e.get("instant")]
    return {"published": shown,
            "publishedInstant": min(instants) if len(instants) == len(spec.targets) else None}
