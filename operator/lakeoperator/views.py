"""What `weir get` and `weir describe` show of the resources `weir run` keeps, as kubectl would (pure: a
resource's body and Events and the time now in; sections of fields and rows out; lakeoperator.cli prints
them with lakecore.cli.tables, so identifiers are never cut).

`describe` shows the resource's identity and phase, its conditions (type, status, reason, since,
message), then per kind: a table's columns (type, nullable, and role: record key, partition field,
ordering field, column group), a writer's attempts (times and causes) and last conflict (loser and winner
instants, file groups, who decided), a service's runs, and the Events (type, reason, age, count,
message). A field without a value is left out, never shown as null.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lakecore.cli.tables import Col
from lakeoperator.run_verdict import unphased_reason
from lakeoperator.status import parse_timestamp

SHORT_KINDS = {"LakeTable": "lt", "LakeWriter": "lw", "TableService": "lts"}   # what `weir describe` takes


@dataclass(frozen=True)
class Fields:
    """`Label:  value` lines (a value without a label continues the one above)."""

    title: str | None
    pairs: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Rows:
    title: str | None
    columns: tuple[Col, ...]
    rows: tuple[tuple[str, ...], ...]


Section = Fields | Rows


def age(at: str | None, now: datetime) -> str:
    """kubectl's short age of a timestamp: 45s, 12m, 5h, 3d."""
    when = parse_timestamp(at)
    if when is None:
        return ""
    s = max(0, int((now - when).total_seconds()))
    return f"{s}s" if s < 120 else f"{s // 60}m" if s < 3 * 3600 else f"{s // 3600}h" if s < 48 * 3600 \
        else f"{s // 86400}d"


def _text(value: Any) -> str:
    return "" if value is None else f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) \
        else str(value)


def _fields(title: str | None, pairs: Iterable[tuple[str, Any]]) -> Fields:
    return Fields(title, tuple((label, _text(v)) for label, v in pairs if v not in (None, "", [], {})))


# -- weir get --------------------------------------------------------------------------------------


def shown_phase(body: Mapping[str, Any]) -> str:
    """The phase, or for a resource that cannot start (no phase: an invalid spec, a missing table) the
    reason it is stalled, as `weir run` shows it; Pending before the first reconcile."""
    return str((body.get("status") or {}).get("phase") or unphased_reason(body) or "Pending")


def _get_columns(kind: str) -> tuple[Col, ...]:
    name = Col("NAME", "id")
    if kind == "LakeTable":
        return (name, Col("PHASE"), Col("LATEST INSTANT", "id"), Col("LOCATION", "id"), Col("AGE", drop=1))
    if kind == "LakeWriter":
        return (name, Col("TABLE", "id"), Col("MODE", drop=2), Col("PHASE"), Col("ATTEMPTS", "number"),
                Col("CURRENT INSTANT", "id", drop=3), Col("AGE", drop=1))
    return (name, Col("TABLE", "id"), Col("TYPE"), Col("LAST RUN"), Col("LAST INSTANT", "id"),
            Col("NEXT RUN", "id", drop=2), Col("AGE", drop=1))


def _get_row(kind: str, body: Mapping[str, Any], now: datetime, name: str) -> tuple[str, ...]:
    s = body.get("status") or {}
    spec = body.get("spec") or {}
    created = age((body.get("metadata") or {}).get("creationTimestamp"), now)
    table = _text((spec.get("tableRef") or {}).get("name"))
    if kind == "LakeTable":
        return (name, shown_phase(body), _text(s.get("latestInstant")),
                _text(s.get("location") or spec.get("location")), created)
    if kind == "LakeWriter":
        return (name, table, _text(spec.get("mode")), shown_phase(body),
                _text((s.get("attempts") or {}).get("total", 0)), _text(s.get("currentInstant")), created)
    last = s.get("lastRun") or {}
    running = (s.get("activeRun") or {}).get("id")
    return (name, table, _text(spec.get("type")), f"running {running}" if running else
            _text(last.get("outcome") or "none yet"), _text(last.get("instant")), _text(s.get("nextRunAt")),
            created)


def get_sections(bodies: Sequence[Mapping[str, Any]], now: datetime, *, name_kinds: bool) -> list[Rows]:
    """One table per kind, in the order given; `name_kinds`: names as `lt/orders` (several kinds listed,
    as `kubectl get` does; `weir describe lt orders` takes the two parts)."""
    by_kind: dict[str, list[Mapping[str, Any]]] = {}
    for b in bodies:
        by_kind.setdefault(str(b["kind"]), []).append(b)
    out = []
    for kind, found in by_kind.items():
        rows = tuple(_get_row(kind, b, now, f"{SHORT_KINDS.get(kind, kind.lower())}/{b['metadata']['name']}"
                              if name_kinds else str(b["metadata"]["name"])) for b in found)
        out.append(Rows(None, _get_columns(kind), rows))
    return out


# -- weir describe ---------------------------------------------------------------------------------


def describe_sections(body: Mapping[str, Any], events: Sequence[Mapping[str, Any]] | None,
                      now: datetime) -> list[Section]:
    """Everything `weir describe` shows of one resource (see the module docstring)."""
    kind = str(body.get("kind"))
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    s = body.get("status") or {}
    generation = meta.get("generation")
    observed = s.get("observedGeneration")
    head = [("Name", meta.get("name")), ("Namespace", meta.get("namespace")), ("Kind", kind),
            ("Created", _when(meta.get("creationTimestamp"), now)),
            ("Generation", f"{generation} (observed {observed})" if observed is not None and generation
             else generation)]
    sections: list[Section] = []
    if kind == "LakeTable":
        sections.append(_fields(None, [*head, *_table_fields(spec, s, now)]))
    elif kind == "LakeWriter":
        sections.append(_fields(None, [*head, *_writer_fields(spec, s, now)]))
    else:
        sections.append(_fields(None, [*head, *_service_fields(spec, s, now)]))
    if kind == "LakeTable":
        sections.append(_columns(spec))
    sections.append(_conditions(s.get("conditions") or (), now))
    if kind == "LakeWriter":
        sections.extend(_attempts(s))
        if s.get("lastConflict"):
            sections.append(_conflict(s["lastConflict"], str(meta.get("namespace")), str(meta.get("name"))))
    if kind == "TableService":
        sections.append(_runs(s))
    sections.append(_events(events or (), now))
    return sections


def _when(at: str | None, now: datetime) -> str | None:
    return f"{at} ({age(at, now)} ago)" if at else None


def _latest(instant: str | None, s: Mapping[str, Any]) -> str | None:
    """The latest instant, with its action and when it completed."""
    said = [str(x) for x in (s.get("latestAction"), s.get("latestInstantTime") and
                             f"completed {s['latestInstantTime']}") if x]
    return f"{instant} ({', '.join(said)})" if instant and said else instant


def _table_fields(spec: Mapping[str, Any], s: Mapping[str, Any], now: datetime) -> list[tuple[str, Any]]:
    lock = spec.get("lock") or {}
    zk = (lock.get("zookeeper") or {}).get("connect")
    instant = s.get("latestInstant")
    return [("Location", s.get("location") or spec.get("location")),
            ("Table type", spec.get("tableType")), ("Record key", ", ".join(spec.get("recordKey") or ())),
            ("Partition fields", ", ".join(spec.get("partitionFields") or ())),
            ("Concurrency", (spec.get("concurrency") or {}).get("mode")),
            ("Lock", f"{lock.get('provider')}{f' at {zk}' if zk else ''}" if lock.get("provider") else None),
            ("Phase", shown_phase({"status": s})),
            ("Latest instant", _latest(instant, s)),
            ("Pending compactions", s.get("pendingCompactions") or None),
            ("Active writers", s.get("activeWriters") or None),
            *((f"Published ({e.get('format')})", _published(e)) for e in s.get("published") or ()),
            ("Last error", s.get("lastError"))]


def _columns(spec: Mapping[str, Any]) -> Rows:
    """The table's columns as its spec declares them: type, nullable, and each one's role (record key,
    partition field, ordering field, or the column group it belongs to)."""
    key = list(spec.get("recordKey") or ())
    parts = list(spec.get("partitionFields") or ())
    groups = [g for g in spec.get("columnGroups") or () if isinstance(g, Mapping)]
    rows = []
    for c in spec.get("schema") or ():
        if not isinstance(c, Mapping):
            continue
        name = str(c.get("name"))
        role = [r for r, on in (("record key", name in key), ("partition field", name in parts),
                                ("ordering field", name == spec.get("orderingField"))) if on]
        role += [f"orders group {g.get('name')}" for g in groups if g.get("orderingField") == name]
        role += [f"group {g.get('name')}" for g in groups if name in (g.get("columns") or ())]
        nullable = "no" if c.get("nullable") is False or name in key else "yes"
        rows.append((name, _text(c.get("type")), nullable, ", ".join(role)))
    return Rows("Columns", (Col("NAME", "id"), Col("TYPE", "id"), Col("NULLABLE"), Col("ROLE")), tuple(rows))


def _published(entry: Mapping[str, Any]) -> str:
    """One spec.publish target: the instant its readers see, where they open it, and its last error."""
    shown = f"{entry.get('instant')} ({entry.get('location')})" if entry.get("instant") else "nothing yet"
    catalog = f"; {entry['catalog']}" if entry.get("catalog") else ""
    error = f"; last publish failed: {entry['error']}" if entry.get("error") else ""
    return shown + catalog + error


def _writer_fields(spec: Mapping[str, Any], s: Mapping[str, Any], now: datetime) -> list[tuple[str, Any]]:
    source = spec.get("source") or {}
    lock = s.get("currentInstantLock") or {}
    current = s.get("currentInstant")
    if current and s.get("currentInstantStartedAt"):
        current = f"{current} (started {s['currentInstantStartedAt']}"
        current += f"; table lock waited {lock['waitMs']} ms, held {lock['holdMs']} ms)" if lock else ")"
    return [("Table", (spec.get("tableRef") or {}).get("name")), ("Mode", spec.get("mode")),
            ("Operation", spec.get("operation")), ("Column group", spec.get("columnGroup")),
            ("Source", " ".join(str(v) for v in (source.get("format"), source.get("path") or
                                                  (source.get("table") or {}).get("name")) if v)),
            ("State", spec.get("state")),
            ("Phase", shown_phase({"status": s})),
            ("Submission", f"{s['submissionId']} (submitted {s['submittedAt']})"
             if s.get("submissionId") and s.get("submittedAt") else s.get("submissionId")),
            ("Driver pod", s.get("driverPod")), ("Current instant", current),
            ("Next retry at", s.get("nextRetryAt")), ("Last error", s.get("lastError"))]


def _service_fields(spec: Mapping[str, Any], s: Mapping[str, Any], now: datetime) -> list[tuple[str, Any]]:
    trigger = spec.get("trigger") or {}
    active = s.get("activeRun") or {}
    running = None
    if active.get("id"):
        running = f"{active['id']} (started {active.get('startedAt')}" + \
            (f", driver pod {active['driverPod']})" if active.get("driverPod") else ")")
    return [("Table", (spec.get("tableRef") or {}).get("name")), ("Type", spec.get("type")),
            ("Schedule", spec.get("schedule")),
            ("Trigger", ", ".join(f"{k} {v}" for k, v in trigger.items()) or None),
            ("State", spec.get("state")), ("Active run", running), ("Next run at", s.get("nextRunAt")),
            ("Last error", s.get("lastError"))]


def _conditions(conditions: Iterable[Mapping[str, Any]], now: datetime) -> Rows:
    """SINCE: the age of lastTransitionTime (--json has the time)."""
    return Rows("Conditions", (Col("TYPE", "id"), Col("STATUS"), Col("REASON", "id"), Col("SINCE"),
                               Col("MESSAGE")),
                tuple((_text(c.get("type")), _text(c.get("status")), _text(c.get("reason")),
                       age(c.get("lastTransitionTime"), now), _text(c.get("message"))) for c in conditions))


def _attempts(s: Mapping[str, Any]) -> list[Section]:
    a = s.get("attempts") or {}
    if not a and not s.get("history"):
        return []
    budget = ", ".join(f"{label} {a.get(k) or 0}" for k, label in (
        ("failures", "failures"), ("infraFailures", "infrastructure failures"), ("conflicts", "conflicts")))
    summary = _fields("Attempts", [("Total", a.get("total", 0)), ("Since the last reset", budget)])
    history = s.get("history") or ()
    rows = tuple((_text(h.get("attempt")), _text(h.get("submissionId")), _text(h.get("startedAt")),
                  _text(h.get("finishedAt")),
                  f"{h.get('cause')} (exit {h['exitCode']})" if h.get("exitCode") is not None
                  else _text(h.get("cause"))) for h in history)
    # narrow: the submission goes first (the Events name it too); the times and the cause stay
    finished = Rows(None, (Col("#", "number"), Col("SUBMISSION", "id", drop=1), Col("STARTED", "id"),
                           Col("FINISHED", "id"), Col("CAUSE")), rows)
    return [summary, finished] if rows else [summary]


def _conflict(c: Mapping[str, Any], namespace: str, name: str) -> Fields:
    me = f"{namespace}/{name}"
    other = c.get("otherWriter") or "a writer the operator does not run"
    won = c.get("role") == "Won"
    mine = f"write {c.get('instant')} ({me}" + (f", submission {c['submission']}" if c.get("submission")
                                                 else "") + ")"
    theirs = f"write {c.get('other')} ({other})"
    decided = f"{c.get('decidedBy')} at {c.get('at')}" if c.get("at") else c.get("decidedBy")
    written = c.get("bytesWritten")
    return _fields("Last conflict", [
        ("Outcome", ("won" if won else "lost") + (": void, the loser committed before it could be aborted"
                                                  if c.get("void") else "")),
        ("Loser", theirs if won else mine + (f"; {written:,} bytes written when the conflict was decided"
                                            if isinstance(written, int) and written else "")),
        ("Winner", mine if won else theirs),
        ("File groups", ", ".join(str(g) for g in c.get("fileGroups") or ())),
        ("Decided by", decided), ("Markers seen at", c.get("markerAt"))])


def _runs(s: Mapping[str, Any]) -> Rows:
    rows = tuple((_text(r.get("id")), _text(r.get("startedAt")), _text(r.get("finishedAt")),
                  _text(r.get("outcome")), _text(r.get("instant"))) for r in s.get("history") or ())
    return Rows("Runs", (Col("RUN", "id"), Col("STARTED", "id", drop=2), Col("FINISHED", "id", drop=1),
                         Col("OUTCOME"), Col("INSTANT", "id")), rows)


def _events(events: Iterable[Mapping[str, Any]], now: datetime) -> Rows:
    rows = []
    for e in events:
        seen = age(e.get("lastTimestamp"), now)
        count = int(e.get("count") or 1)
        if count > 1:
            seen += f" (x{count} over {age(e.get('firstTimestamp'), now)})"
        rows.append((_text(e.get("type")), _text(e.get("reason")), seen, _text(e.get("message"))))
    return Rows("Events", (Col("TYPE"), Col("REASON", "id"), Col("AGE"), Col("MESSAGE")), tuple(rows))
