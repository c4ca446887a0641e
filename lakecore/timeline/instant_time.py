"""Instant times: 17-digit UTC millisecond stamps, unique and monotonic per table.

`next_instant_time` is pure: the caller holds the table lock, passes the clock reading and the newest
time already on the timeline (requested or completion), and gets a time strictly after both. Because
every requested and completion time is drawn this way under the lock, all of a table's times form one
increasing sequence, whatever the writers' clocks say: that is what completion-time file slicing needs.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from lakecore.errors import InstantNotFound

_FMT = "%Y%m%d%H%M%S"


def format_ms(epoch_ms: int) -> str:
    dt = datetime.fromtimestamp(epoch_ms / 1000, tz=UTC)
    return f"{dt.strftime(_FMT)}{epoch_ms % 1000:03d}"


def to_epoch_ms(instant_time: str) -> int:
    if len(instant_time) != 17 or not instant_time.isdigit():
        raise InstantNotFound(f"{instant_time!r} is not an instant time; use 17 digits yyyyMMddHHmmssSSS")
    dt = datetime.strptime(instant_time[:14], _FMT).replace(tzinfo=UTC)
    return int(dt.timestamp()) * 1000 + int(instant_time[14:])


def next_instant_time(now_ms: int, newest: str | None) -> str:
    floor = to_epoch_ms(newest) + 1 if newest else 0
    return format_ms(max(now_ms, floor))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_point_in_time(value: Any) -> str:
    """Accept an instant time, an ISO-8601 timestamp (UTC if naive), a datetime or an Instant (a write's
    `result.instant`: its requested time); return 17 digits. Zeros ("000", as Hudi's incremental reads
    start) are the point before every instant."""
    requested = getattr(value, "requested_time", None)
    if isinstance(requested, str):
        value = requested
    if isinstance(value, datetime):
        dt = value if value.tzinfo else value.replace(tzinfo=UTC)
        return format_ms(int(dt.timestamp() * 1000))
    s = str(value).strip()
    if s and set(s) == {"0"}:   # "0", "000", 17 zeros: before every instant (the start of incremental reads)
        return "0" * 17
    if len(s) == 17 and s.isdigit():
        try:
            to_epoch_ms(s)
        except ValueError:
            raise InstantNotFound(f"{value!r} is 17 digits but no time (yyyyMMddHHmmssSSS); pass e.g. "
                                  "20261122101500123, or 000 for before the first instant") from None
        return s
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        raise InstantNotFound(f"{value!r} is neither an instant time (17 digits) nor an ISO-8601 "
                              "timestamp; pass e.g. 20261122101500123 or 2026-11-22T10:15:00") from None
    return parse_point_in_time(dt)

