"""Timeline: instants, instant times, commit metadata, and the timeline store."""

from lakecore.timeline.instant import (
    ACTIONS,
    WRITE_ACTIONS,
    Action,
    Instant,
    State,
    parse_file_name,
    requested_time_of,
)
from lakecore.timeline.instant_time import (
           format_ms,
           next_instant_time,
           now_ms,
           parse_point_in_time,
           to_epoch_ms,
)
from lakecore.timeline.metadata import CommitMetadata, RowCounts, WriteStat
from lakecore.timeline.overwrite import (
    OVERWRITE_OPERATIONS,
    OverwriteScope,
    pending_overwrite,
    pending_overwrites,
    requested_scope,
    scope_of,
)
from lakecore.timeline.store import TIMELINE_DIR, TimelineStore
from lakecore.timeline.timeline import Timeline

__all__ = ["ACTIONS", "OVERWRITE_OPERATIONS", "TIMELINE_DIR", "WRITE_ACTIONS", "Action", "CommitMetadata",
           "Instant", "OverwriteScope", "RowCounts", "State", "Timeline", "TimelineStore", "WriteStat",
           "format_ms", "next_instant_time", "now_ms", "parse_file_name", "parse_point_in_time",
           "pending_overwrite", "pending_overwrites", "requested_scope", "requested_time_of", "scope_of",
           "to_epoch_ms"]
