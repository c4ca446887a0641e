"""`weir table timeline URI --html FILE`: a picture of a table's timeline as one self-contained HTML page.

One lane per writer (the name its commits record), one per table service; every instant a bar from
requested to completion on a shared time axis, pending ones open to "now"; aborted writes, lost
conflicts and rolled-back writes marked, with why in the hover title (SVG <title>) and in a table below
the picture. Inline CSS and SVG only: no script, font or network, so the file opens anywhere.

`render(facts)` is pure (TimelineFacts in, HTML out); the facts are read by timeline_spans. Every string
that comes from the table (writer names, reasons, the table's name and URI) is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from lakecore.cli.timeline_spans import (
    SERVICE_LANES,
    WRITE_LANE_UNKNOWN,
    WRITE_LANE_UNNAMED,
    Counted,
    Span,
    TimelineFacts,
    read_facts,
)
from lakecore.errors import InvalidInput
from lakecore.table import Table

WIDTH, LABEL_W, RIGHT_PAD = 1360, 250, 40
PLOT_W = WIDTH - LABEL_W - RIGHT_PAD
AXIS_H, GROUP_H, ROW_H, BAR_H, LANE_PAD = 44, 24, 16, 12, 5
MAX_ROWS = 8           # sub-rows a lane stacks overlapping bars into; more overlap shares the last row
MAX_LISTED = 300       # aborted / taken-back writes listed in the table below the picture
_STEPS_MS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000,
             120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000,
             86_400_000, 172_800_000, 604_800_000, 2_592_000_000, 31_536_000_000]

CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:20px;color:#222;
background:#fff}
h1{font-size:20px;margin:0 0 4px} p.meta{margin:2px 0;color:#444} .note{color:#8a4b00}
.legend{display:flex;flex-wrap:wrap;gap:6px 18px;margin:10px 0;padding:0;list-style:none}
.legend li{display:flex;align-items:center;gap:6px} .legend svg{flex:none}
svg.timeline{max-width:100%;height:auto;border:1px solid #ddd;background:#fff}
svg text{font:11px system-ui,sans-serif;fill:#333} svg text.group{font-weight:600;fill:#000}
svg .grid{stroke:#e6e6e6} svg .axis{stroke:#999} svg .now{stroke:#d35400;stroke-dasharray:4 3}
svg .lane-bg{fill:#fafafa} svg .lane-sep{stroke:#eee}
svg .archived-region{fill:#78909c;fill-opacity:.12;pointer-events:none}
.span rect{stroke:#fff;stroke-width:.5} .span:hover rect{stroke:#000;stroke-width:1.5}
.b-write{fill:#2f6fdf} .b-compaction{fill:#8e44ad} .b-clustering{fill:#138d75} .b-clean{fill:#7f8c8d}
.b-rollback{fill:#e67e22} .b-savepoint,.b-restore{fill:#34495e}
.o-pending rect{fill:url(#pending);stroke:#b7950b;stroke-width:1}
.o-aborted rect{fill:url(#aborted);stroke:#c0392b;stroke-width:1}
.o-rolled_back rect{fill:#f5b7b1;stroke:#c0392b;stroke-width:1;stroke-dasharray:3 2}
.archived{opacity:.45} .strike{stroke:#c0392b;stroke-width:1.2} .open{fill:#b7950b}
.link{stroke:#c0392b;stroke-width:1.2;stroke-dasharray:2 2;fill:none}
.mark{stroke:#c0392b;stroke-width:2.2;stroke-linecap:round} .mark-dead{stroke:#222}
.count{fill:#2f6fdf} .archival{stroke:#546e7a;stroke-width:3}
table.aborts{border-collapse:collapse;margin-top:14px;font-size:13px}
table.aborts td,table.aborts th{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
"""

DEFS = ('<defs><pattern id="pending" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#f9e79f"/>'
        '<rect width="3" height="6" fill="#f4d03f"/></pattern>'
        '<pattern id="aborted" width="6" height="6" patternUnits="userSpaceOnUse" '
        'patternTransform="rotate(45)"><rect width="6" height="6" fill="#f1948a"/>'
        '<rect width="3" height="6" fill="#e74c3c"/></pattern></defs>')

LEGEND = [("b-write", "", "completed write (one lane per writer, named by its commits)"),
          ("b-compaction", "", "compaction"), ("b-clustering", "", "clustering (replacecommit)"),
          ("b-clean", "", "clean"), ("b-rollback", "", "rollback"),
          ("b-savepoint", "", "savepoint / restore"),
          ("", "o-pending", "pending (requested or inflight): open to now"),
          ("", "o-aborted", "aborted: proof of death recorded, never completes"),
          ("", "o-rolled_back", "rolled back / undone: its data was deleted"),
          ("mark", "", "lost a conflict (at the abort decision)"),
          ("mark mark-dead", "", "other abort (writer aborted, dead writer, rollback claim)"),
          ("b-write archived", "", "archived (faded)")]


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def timeline_html(table: Table, *, title: str | None = None) -> str:
    """The picture of `table`'s timeline as a self-contained HTML page."""
    return render(read_facts(table), title=title)


def write_timeline_html(table: Table, path: str | Path, *, title: str | None = None) -> Path:
    """Write the picture to `path` (its directory must exist); returns the path written."""
    page = timeline_html(table, title=title)
    target = Path(path)
    try:
        target.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"cannot write the timeline picture to {target} ({exc.strerror or exc}); choose a "
                           "file in an existing directory you can write to") from exc
    return target


# -- layout -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lane:
    name: str
    group: str                  # writers | table services | older instants (counted)
    rows: tuple[tuple[Span, ...], ...] = ()
    counted: tuple[Counted, ...] = ()
    archival: bool = False


@dataclass(frozen=True)
class Scale:
    t0: int
    t1: int

    def x(self, ms: int) -> float:
        return LABEL_W + (ms - self.t0) * PLOT_W / (self.t1 - self.t0)


def scale_of(facts: TimelineFacts) -> Scale:
    starts = [s.start_ms for s in facts.spans] + [c.start_ms for c in facts.counted]
    ends = [s.end_ms if s.end_ms is not None else facts.now_ms for s in facts.spans]
    ends += [c.end_ms for c in facts.counted]
    if facts.archived_boundary_ms is not None:
        starts.append(facts.archived_boundary_ms)
        ends.append(facts.archived_boundary_ms)
    if not starts:
        return Scale(facts.now_ms - 60_000, facts.now_ms + 1_000)
    t0, t1 = min(starts), max(ends)
    pad = max((t1 - t0) // 50, 500)
    return Scale(t0 - pad, t1 + pad)


def pack(spans: Iterable[Span], now: int) -> tuple[tuple[Span, ...], ...]:
    """Bars into sub-rows so that instants that overlap in time do not hide each other (greedy, by
    start): a writer's one-after-another instants share a row, concurrent ones get a row each."""
    rows: list[list[Span]] = []
    ends: list[int] = []
    for s in sorted(spans, key=lambda s: (s.start_ms, s.instant)):
        end = s.end_ms if s.end_ms is not None else now
        for i, last in enumerate(ends):
            if last <= s.start_ms:
                rows[i].append(s)
                ends[i] = end
                break
        else:
            if len(rows) < MAX_ROWS:
                rows.append([s])
                ends.append(end)
            else:
                rows[-1].append(s)
                ends[-1] = max(ends[-1], end)
    return tuple(tuple(r) for r in rows)


def lanes_of(facts: TimelineFacts) -> list[Lane]:
    by_lane: dict[str, list[Span]] = {}
    for s in facts.spans:
        by_lane.setdefault(s.lane, []).append(s)
    writers = sorted((n for n in by_lane if not _is_service_lane(n)),
                     key=lambda n: (n in (WRITE_LANE_UNNAMED, WRITE_LANE_UNKNOWN), n))
    lanes = [Lane(n, "writers", pack(by_lane[n], facts.now_ms)) for n in writers]
    for n in SERVICE_LANES:
        if n in by_lane:
            lanes.append(Lane(n, "table services", pack(by_lane[n], facts.now_ms)))
    if facts.archival:
        lanes.append(Lane("archival", "table services", ((),), archival=True))
    actions = sorted({c.action for c in facts.counted})
    for a in actions:
        lanes.append(Lane(f"{a} (older, counted)", "older instants (counted)",
                          counted=tuple(c for c in facts.counted if c.action == a)))
    return lanes


def _is_service_lane(name: str) -> bool:
    return name in SERVICE_LANES


# -- drawing ----------------------------------------------------------------------------------------


def render(facts: TimelineFacts, *, title: str | None = None) -> str:
    scale = scale_of(facts)
    lanes = lanes_of(facts)
    heading = title or f"Timeline of {facts.name}"
    svg = _svg(facts, scale, lanes)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(heading)}</title>", f"<style>{CSS}</style></head><body>",
        f'<svg width="0" height="0" style="position:absolute" aria-hidden="true">{DEFS}</svg>',
        f"<h1>{esc(heading)}</h1>",
        f'<p class="meta">Table <b>{esc(facts.name)}</b> at <code>{esc(facts.uri)}</code></p>',
        f'<p class="meta">From {esc(_iso(scale.t0))} to {esc(_iso(scale.t1))} (UTC); picture taken at '
        f"{esc(_iso(facts.now_ms))}</p>",
        f'<p class="meta">{esc(_summary(facts))}</p>',
        *(f'<p class="meta note">{esc(n)}</p>' for n in facts.notes),
        _legend(), svg, _abort_table(facts.spans), "</body></html>", ""])


def _summary(facts: TimelineFacts) -> str:
    counts: dict[str, int] = {}
    for s in facts.spans:
        counts[s.outcome] = counts.get(s.outcome, 0) + 1
    parts = [f"{counts.get(k, 0)} {label}" for k, label in
             (("completed", "completed"), ("pending", "pending"), ("aborted", "aborted"),
              ("rolled_back", "rolled back or undone"))]
    text = (f"{facts.total} instants on the timeline ({facts.archived} of them archived); "
            f"drawn: {', '.join(parts)}")
    counted = sum(c.count for c in facts.counted)
    return text + (f"; {counted} older ones counted" if counted else "") + "."


def _legend() -> str:
    items = []
    for cls, outcome, label in LEGEND:
        if cls.startswith("mark"):
            swatch = (f'<line class="{cls}" x1="3" y1="3" x2="11" y2="11"/>'
                      f'<line class="{cls}" x1="11" y1="3" x2="3" y2="11"/>')
        else:
            swatch = (f'<g class="span {outcome}"><rect class="{cls or "b-write"}" x="0" y="1" width="22" '
                      'height="12" rx="2"/></g>')
        items.append(f'<li><svg width="24" height="14" viewBox="0 0 24 14">{swatch}</svg>'
                     f"{esc(label)}</li>")
    return f'<ul class="legend">{"".join(items)}</ul>'


def _svg(facts: TimelineFacts, scale: Scale, lanes: Sequence[Lane]) -> str:
    body: list[str] = []
    y = AXIS_H
    group = None
    lane_top = y
    placed: dict[str, tuple[Span, float]] = {}  # instant -> its span and the middle of its bar
    for lane in lanes:
        if lane.group != group:
            group = lane.group
            body.append(f'<text class="group" x="8" y="{y + 16}">{esc(group)}</text>')
            y += GROUP_H
        rows = max(1, len(lane.rows))
        h = rows * ROW_H + 2 * LANE_PAD
        body.append(f'<g class="lane" data-lane="{esc(lane.name)}">')
        body.append(f'<rect class="lane-bg" x="{LABEL_W}" y="{y}" width="{PLOT_W}" height="{h}"/>')
        label = lane.name if len(lane.name) <= 36 else lane.name[:35] + "…"
        body.append(f'<text class="lane-label" x="{LABEL_W - 8}" y="{y + LANE_PAD + 11}" text-anchor="end">'
                    f"<title>{esc(lane.name)}</title>{esc(label)}</text>")
        for r, row in enumerate(lane.rows):
            for s in row:
                body.append(_bar(s, scale, y + LANE_PAD + r * ROW_H, facts.now_ms))
                placed[s.instant] = (s, y + LANE_PAD + r * ROW_H + BAR_H / 2)
        if lane.counted:
            top = max(c.count for c in lane.counted)
            for c in lane.counted:
                x0, x1 = scale.x(c.start_ms), scale.x(c.end_ms)
                what = f"{c.count} {c.action} instant(s) requested {_iso(c.start_ms)} to {_iso(c.end_ms)}"
                body.append(f'<rect class="count" x="{x0:.1f}" y="{y + LANE_PAD}" '
                            f'width="{max(x1 - x0, 1):.1f}" height="{BAR_H}" '
                            f'opacity="{0.15 + 0.85 * c.count / top:.2f}"><title>{esc(what)}</title></rect>')
        if lane.archival and facts.archived_boundary_ms is not None:
            x = scale.x(facts.archived_boundary_ms)
            right = x < LABEL_W + PLOT_W - 120  # the label fits right of the mark
            body.append(f'<g class="archival-mark"><title>{esc(facts.archival or "")}</title>'
                        f'<line class="archival" x1="{x:.1f}" y1="{y + 3}" x2="{x:.1f}" y2="{y + h - 3}"/>'
                        f'<text x="{x + 6 if right else x - 6:.1f}" y="{y + LANE_PAD + 11}" '
                        f'text-anchor="{"start" if right else "end"}">{facts.archived} archived</text></g>')
        body.append("</g>")
        body.append(f'<line class="lane-sep" x1="0" y1="{y + h}" x2="{WIDTH}" y2="{y + h}"/>')
        y += h
    height = y + 10
    body += _conflict_links(placed, scale, facts.now_ms)
    if facts.archived_boundary_ms is not None:  # on top, see-through, not in the way of the bars' titles
        width = max(scale.x(facts.archived_boundary_ms) - LABEL_W, 0)
        body.append(f'<rect class="archived-region" x="{LABEL_W}" y="{lane_top}" width="{width:.1f}" '
                    f'height="{y - lane_top}"/>')
    head = [f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" role="img" aria-label="timeline">']
    axis = _axis(scale, y, facts.now_ms)
    return "".join(head + axis + body + ["</svg>"])


def _axis(scale: Scale, bottom: int, now: int) -> list[str]:
    span = scale.t1 - scale.t0
    step = next((s for s in _STEPS_MS if span / s <= 9), _STEPS_MS[-1])
    fmt = "%H:%M:%S.%f" if step < 1000 else "%H:%M:%S" if step < 60_000 else \
        "%m-%d %H:%M" if step < 86_400_000 else "%Y-%m-%d"
    out = [f'<line class="axis" x1="{LABEL_W}" y1="{AXIS_H - 6}" x2="{LABEL_W + PLOT_W}" y2="{AXIS_H - 6}"/>',
           f'<text x="8" y="{AXIS_H - 12}">time (UTC)</text>']
    t = -(-scale.t0 // step) * step
    while t <= scale.t1:
        x = scale.x(t)
        text = datetime.fromtimestamp(t / 1000, tz=UTC).strftime(fmt)
        if step < 1000:
            text = text[:-3]
        out.append(f'<line class="grid" x1="{x:.1f}" y1="{AXIS_H - 10}" x2="{x:.1f}" y2="{bottom}"/>'
                   f'<text x="{x:.1f}" y="{AXIS_H - 14}" text-anchor="middle">{esc(text)}</text>')
        t += step
    if scale.t0 <= now <= scale.t1:
        x = scale.x(now)
        out.append(f'<line class="now" x1="{x:.1f}" y1="{AXIS_H - 6}" x2="{x:.1f}" y2="{bottom}"><title>now: '
                   f'{esc(_iso(now))}</title></line><text x="{x:.1f}" y="{AXIS_H - 26}" text-anchor="middle" '
                   'fill="#d35400">now</text>')
    return out


def _bar(s: Span, scale: Scale, y: int, now: int) -> str:
    x0 = scale.x(s.start_ms)
    x1 = max(scale.x(s.end_ms if s.end_ms is not None else now), x0 + 5)
    kind = "b-write" if not s.service else f"b-{s.lane}"
    classes = f"span o-{s.outcome} {kind}" + (" archived" if s.archived else "")
    attrs = (f'class="{classes}" data-instant="{esc(s.instant)}" data-action="{esc(s.action)}" '
             f'data-outcome="{esc(s.outcome)}" data-lane="{esc(s.lane)}"')
    if s.conflict:
        attrs += ' data-conflict="true"'
    parts = [f"<g {attrs}><title>{esc(_hover(s, now))}</title>",
             f'<rect class="{kind}" x="{x0:.1f}" y="{y}" width="{x1 - x0:.1f}" height="{BAR_H}" rx="2"/>']
    mid = y + BAR_H / 2
    if s.outcome == "rolled_back":
        parts.append(f'<line class="strike" x1="{x0:.1f}" y1="{mid}" x2="{x1:.1f}" y2="{mid}"/>')
    if s.end_ms is None:
        parts.append(f'<path class="open" d="M{x1:.1f},{y - 1} l6,{BAR_H / 2 + 1} l-6,{BAR_H / 2 + 1} z"/>')
    if s.outcome in ("aborted", "rolled_back") and (s.abort_ms is not None or s.conflict):
        at = s.abort_ms if s.abort_ms is not None else (s.end_ms if s.end_ms is not None else now)
        xm = min(max(scale.x(at), x0), x1)
        cls = "mark" if s.conflict else "mark mark-dead"
        r = 4.5
        for dx in (r, -r):
            parts.append(f'<line class="{cls}" x1="{xm - dx:.1f}" y1="{mid - r}" x2="{xm + dx:.1f}" '
                         f'y2="{mid + r}"/>')
    parts.append("</g>")
    return "".join(parts)


def _conflict_links(placed: dict[str, tuple[Span, float]], scale: Scale, now: int) -> list[str]:
    """A dashed line from each lost conflict's mark to the bar of the write it lost to."""
    out = []
    for loser, y0 in placed.values():
        if not loser.conflict or loser.lost_to not in placed:
            continue
        winner, y1 = placed[loser.lost_to]
        at = loser.abort_ms if loser.abort_ms is not None else loser.start_ms
        x0 = scale.x(at)
        w0 = scale.x(winner.start_ms)
        w1 = max(scale.x(winner.end_ms if winner.end_ms is not None else now), w0 + 5)
        x1 = min(max(x0, w0), w1)
        what = f"{loser.instant} lost a conflict to {winner.instant} ({winner.lane})"
        out.append(f'<path class="link" d="M{x0:.1f},{y0:.1f} L{x1:.1f},{y1:.1f}"><title>{esc(what)}</title>'
                   "</path>")
    return out


def _hover(s: Span, now: int) -> str:
    lines = [f"instant {s.instant} ({s.action})", f"state: {s.state}; {s.outcome.replace('_', ' ')}",
             f"requested: {_iso(s.start_ms)}"]
    if s.completion:
        lines.append(f"completed: {_iso(s.end_ms or s.start_ms)} (completion time {s.completion})")
    elif s.end_ms is None:
        lines.append(f"not completed: open for {(now - s.start_ms) / 1000:.1f} s until now")
    elif s.outcome == "rolled_back":
        lines.append(f"gone from the timeline: {_iso(s.end_ms)}")
    if s.end_ms is not None and s.completion:
        lines.append(f"took {(s.end_ms - s.start_ms) / 1000:.3f} s")
    if not s.service:
        lines.append("writer: " + (s.writer or "not recorded (a write names its writer when it commits)"))
    elif s.writer:
        lines.append(f"run by: {s.writer}")
    if s.operation:
        lines.append(f"operation: {s.operation}")
    if s.counts is not None and (s.files or not s.service):
        lines.append(f"{s.counts.describe()}; files: {s.files} in {s.file_groups} file group(s)")
        if s.counts.delete_keys:
            lines.append("(a delete key whose row the table does not hold deletes nothing)")
    if s.note:
        lines.append(s.note)
    if s.reason:
        lines.append(f"why: {s.reason}")
    if s.abort_ms is not None:
        lines.append(f"proof of death recorded: {_iso(s.abort_ms)}")
    if s.archived:
        lines.append("archived (read from the archived timeline)")
    return "\n".join(lines)


def _abort_table(spans: Sequence[Span]) -> str:
    bad = [s for s in spans
           if s.outcome in ("aborted", "rolled_back") or (s.outcome == "pending" and s.reason)]
    if not bad:
        return "<p>No aborted, rolled-back or stalled writes on the timeline drawn.</p>"
    rows = "".join(f"<tr><td><code>{esc(s.instant)}</code></td><td>{esc(s.action)}</td><td>{esc(s.lane)}</td>"
                   f"<td>{esc(s.outcome.replace('_', ' '))}{' (conflict)' if s.conflict else ''}</td>"
                   f"<td>{esc(s.reason or 'no reason recorded')}</td></tr>" for s in bad[-MAX_LISTED:])
    more = f"<p>(the newest {MAX_LISTED} of {len(bad)} are listed)</p>" if len(bad) > MAX_LISTED else ""
    return ("<h2>Aborted, rolled-back and stalled writes</h2>" + more +
            '<table class="aborts"><tr><th>instant</th><th>action</th><th>lane</th><th>outcome</th>'
            f"<th>why</th></tr>{rows}</table>")


def _iso(ms: int) -> str:
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.strftime("%Y-%m-%d %H:%M:%S.") + f"{ms % 1000:03d}"
