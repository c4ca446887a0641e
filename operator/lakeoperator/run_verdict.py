"""Where each resource of a `weir run` stands, whether the run is over, and how it ends (pure).

A resource is going (it works towards its spec and gets there without a change), done (a Ready table,
a finished writer, an idle service), paused (weir.dev/paused, or a table weir.dev/managed "false": left
as it is), stalled (it cannot go on until its manifest changes: the status' kstatus Stalled condition,
set for an invalid spec, a reference to a missing table, a failed or aborted writer, a refused change,
a table that does not match its spec), failing (a table whose reconcile has failed and been retried for
longer than the run's `give_up_s`: its storage or ZooKeeper does not answer) or blocked (a writer that
waits for a table that is stalled, failing or paused). The run is over when nothing is going: resources
that are fine run to completion first, then the run ends non-zero naming every stalled, failing and
blocked resource with its reason and message.

Reads only the status the reconcile core derived (status.py); must not decide anything of its own
about a resource's spec.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lakecore.cli.errors import CommandError
from lakeoperator.specs import ObjectRef

FINISHED_WRITER_PHASES = ("Succeeded", "Failed", "Aborted", "Suspended")


class Standing(enum.StrEnum):
    GOING = "going"
    DONE = "done"
    PAUSED = "paused"
    STALLED = "stalled"
    FAILING = "failing"     # retried, failing for longer than the run gives it (`weir run --give-up-after`)
    BLOCKED = "blocked"


WAITS_FOR_A_CHANGE = (Standing.STALLED, Standing.FAILING, Standing.BLOCKED)


@dataclass(frozen=True)
class Verdict:
    kind: str
    namespace: str
    name: str
    standing: Standing
    reason: str = ""         # the condition's reason (CamelCase)
    message: str = ""        # ... and message, ending with what to do
    blocked_by: str = ""     # "LakeTable/<name>" for a blocked resource

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.name}" if self.namespace == "default" else \
            f"{self.kind}/{self.namespace}/{self.name}"


def _conditions(body: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    status = body.get("status") or {}
    return {str(c.get("type")): c for c in status.get("conditions") or () if isinstance(c, Mapping)}


def _true(condition: Mapping[str, Any] | None) -> bool:
    return condition is not None and condition.get("status") == "True"


def _ref(body: Mapping[str, Any]) -> str:
    return str(((body.get("spec") or {}).get("tableRef") or {}).get("name") or "")


def _failing_for(condition: Mapping[str, Any] | None, now: datetime,
                 started: datetime | None) -> float | None:
    """Seconds since a False Ready condition last flipped (its lastTransitionTime: not ready since),
    counted from `started` at the earliest (a run gives a table failing before it started the whole time
    too); None when unknown."""
    if condition is None or condition.get("status") != "False":
        return None
    try:
        since = datetime.fromisoformat(str(condition.get("lastTransitionTime") or ""))
    except ValueError:   # none, or not a time
        return None
    since = since if since.tzinfo is not None else since.replace(tzinfo=UTC)   # no zone: UTC, as written
    return (now - max(since, started or since)).total_seconds()


def judge(body: Mapping[str, Any], table: Verdict | None = None, *, now: datetime | None = None,
          give_up_s: float | None = None, started: datetime | None = None) -> Verdict:
    """One resource after a reconcile pass; `table`: the verdict on the LakeTable a writer refers to. With
    `now` and `give_up_s`, a table whose reconcile has failed (and been retried) for longer than
    `give_up_s` (since the run `started`, at the earliest) is failing, no longer going."""
    ref = ObjectRef.from_body(body)
    kind = str(body.get("kind"))
    status = body.get("status") or {}
    conditions = _conditions(body)
    current = int(status.get("observedGeneration") or 0) == ref.generation

    def verdict(standing: Standing, condition: Mapping[str, Any] | None = None, **extra: str) -> Verdict:
        c = condition or {}
        return Verdict(kind, ref.namespace, ref.name, standing, str(c.get("reason") or ""),
                       str(c.get("message") or ""), **extra)

    if ref.paused or not ref.managed:
        return verdict(Standing.PAUSED, conditions.get("ReconciliationPaused"))
    stalled = conditions.get("Stalled") if current and _true(conditions.get("Stalled")) else None
    invalid = stalled is not None and stalled.get("reason") == "InvalidSpec"
    if kind == "LakeTable":
        if stalled is not None:
            return verdict(Standing.STALLED, stalled)
        if status.get("phase") == "Ready" and current:
            return verdict(Standing.DONE)
        age = _failing_for(conditions.get("Ready"), now, started) \
            if now is not None and give_up_s is not None and status.get("phase") == "Failed" else None
        if age is not None and give_up_s is not None and age >= give_up_s:
            return verdict(Standing.FAILING, conditions.get("Degraded"))
        return verdict(Standing.GOING, conditions.get("Ready"))
    if kind == "LakeWriter":
        if invalid:
            return verdict(Standing.STALLED, stalled)
        if not writer_finished(body):
            ready = conditions.get("Ready") or {}
            if ready.get("reason") == "TableNotReady" and table is not None and \
                    table.standing in (*WAITS_FOR_A_CHANGE, Standing.PAUSED):
                return verdict(Standing.BLOCKED, ready, blocked_by=table.label)
            return verdict(Standing.GOING, ready)
        return verdict(Standing.STALLED, stalled) if stalled is not None else verdict(Standing.DONE)
    if stalled is not None:   # a TableService: invalid (a missing table), or whatever its status says
        return verdict(Standing.STALLED, stalled)
    return verdict(Standing.GOING, conditions.get("Progressing")) if status.get("activeRun") else \
        verdict(Standing.DONE)


def writer_finished(body: Mapping[str, Any]) -> bool:
    """A writer that holds no run open: one that ended (or is suspended), or a stream without
    availableNow (it runs until stopped)."""
    spec = body.get("spec") or {}
    if spec.get("mode") == "streaming" and not bool((spec.get("trigger") or {}).get("availableNow")):
        return True
    return (body.get("status") or {}).get("phase") in FINISHED_WRITER_PHASES


def judge_all(bodies: Iterable[Mapping[str, Any]], *, now: datetime | None = None,
              give_up_s: float | None = None, started: datetime | None = None) -> list[Verdict]:
    """Every resource's verdict (tables first: a writer's depends on its table's)."""
    listed = list(bodies)
    tables = {(v.namespace, v.name): v for v in (judge(b, now=now, give_up_s=give_up_s, started=started)
                                                 for b in listed if b.get("kind") == "LakeTable")}
    out = []
    for body in listed:
        if body.get("kind") == "LakeTable":
            ref = ObjectRef.from_body(body)
            out.append(tables[(ref.namespace, ref.name)])
        else:
            out.append(judge(body, tables.get((ObjectRef.from_body(body).namespace, _ref(body)))))
    return out


def over(verdicts: Iterable[Verdict]) -> bool:
    """Nothing is going: the run can end."""
    return all(v.standing != Standing.GOING for v in verdicts)


def explanation(body: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason, message) worth a line under a resource's progress: why it is paused, stalled, degraded (a
    failed attempt, an unreachable table), waiting for its table, or stopped with the run that ended; None
    when it simply goes its way."""
    conditions = _conditions(body)
    for kind in ("ReconciliationPaused", "Stalled", "Degraded"):
        c = conditions.get(kind)
        if _true(c) and c is not None and c.get("message"):
            return str(c.get("reason") or ""), str(c["message"])
    ready = conditions.get("Ready") or {}
    if ready.get("status") == "False" and ready.get("reason") in ("TableNotReady", "Stopped") \
            and ready.get("message"):   # waiting for its table; stopped with the run that ended
        return str(ready["reason"]), str(ready["message"])
    return None


def unphased_reason(body: Mapping[str, Any]) -> str | None:
    """What stands for the phase of a resource that never got one because it cannot start (an invalid
    spec, a missing table): the reason it is stalled, paused or degraded. `weir run` and `weir get` show
    it in the phase column."""
    if (body.get("status") or {}).get("phase"):
        return None
    why = explanation(body)
    return why[0] if why is not None and why[0] else None


def progress_lines(label: str, phase: str, detail: str, body: Mapping[str, Any]) -> list[str]:
    """What `weir run` prints for a resource whose state changed: `Kind/name: Phase detail`, and under it
    the reason and message when there is one to tell (a stalled resource that never got a phase shows
    its reason as its phase)."""
    why = explanation(body)
    if unphased_reason(body) is not None:
        phase, detail = str(unphased_reason(body)), ""
    lines = [f"{label}: {phase} {detail}".rstrip()]
    if why is not None:
        lines.append(f"  {why[0]}: {why[1]}" if why[0] else f"  {why[1]}")
    return lines


class RunFailed(CommandError):
    """`weir run` ended with resources that cannot go on, or did not end within its --timeout."""


def closing_error(verdicts: Iterable[Verdict], origins: Mapping[tuple[str, str, str], str] | None = None
                  ) -> str | None:
    """The run's closing error when anything is stalled or blocked (None: every resource is done or
    paused): one line per resource with its reason and message (what to do), and its manifest."""
    listed = list(verdicts)
    waiting = [v for v in listed if v.standing in WAITS_FOR_A_CHANGE]
    if not waiting:
        return None
    many = len(waiting) > 1
    others = " (the others ran to completion)" if len(waiting) < len(listed) else ""
    failing = any(v.standing == Standing.FAILING for v in waiting)
    until = "" if failing else f" until {'their manifests change' if many else 'its manifest changes'}"
    lines = [f"{len(waiting)} resource{'s' if many else ''} cannot go on{until}{others}:"]
    for v in waiting:
        where = (origins or {}).get((v.kind, v.namespace, v.name))
        named = f"{v.label} ({where})" if where else v.label
        reason = f"{v.reason} (still failing, retried; the run gave up on it)" \
            if v.standing == Standing.FAILING else v.reason
        lines.append(f"  {named}: {reason}: {v.message}" if reason else f"  {named}: {v.message}")
    if failing:
        lines.append("A failing resource may recover once what its message names answers again: start the "
                     "run again then (or give it longer: --give-up-after SECONDS, 0 waits for ever).")
    return "\n".join(lines)
