"""A plain-Python model of event-time ordering that the table-level property tests compare against.

State per key: (ordering value, value or DELETED). A record or delete replaces the state iff the
current ordering is unknown (a key-only delete), the new one is unknown, or new >= current.
"""

from __future__ import annotations

DELETED = object()


def apply(model: dict, op: str, rows: list) -> None:
    """Apply one write: rows are (key, ts, value) for upserts, (key, ts or None) for deletes."""
    for row in rows:
        if op == "delete":
            k, ts = row
            new = (ts, DELETED)
        else:
            k, ts, v = row
            new = (ts, v)
        cur = model.get(k)
        if cur is None or cur[0] is None or new[0] is None or new[0] >= cur[0]:
            model[k] = new


def live(model: dict) -> dict:
    """{key: (ts, value)} of the keys that are not deleted."""
    return {k: (ts, v) for k, (ts, v) in model.items() if v is not DELETED}
