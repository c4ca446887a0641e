"""`weir table timeline URI --html FILE` draws a table's real timeline: one lane per writer named by its
commits, services on their own lanes, the write that lost a conflict marked with whom it lost to, the
rolled-back and pending writes, archived instants; strings from the table escaped; the text output
unchanged without the option; a missing table or an unwritable path fails with one line. The page is
parsed here (its SVG as XML) and, in headless Chromium, rendered and looked at."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from html.parser import HTMLParser

import numpy as np
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from lakecore import Table
from lakecore.cli.main import app
from lakecore.cli.timeline_html import render, timeline_html, write_timeline_html
from lakecore.cli.timeline_spans import Span, TimelineFacts, read_facts
from lakecore.concurrency.conflicts.outside import abort_loser, find_outside_conflicts
from lakecore.concurrency.liveness.heartbeat import HeartbeatConfig, mark_aborted
from lakecore.concurrency.liveness.writers import StorageWriterRegistry
from lakecore.concurrency.rollback import rollback_write
from lakecore.concurrency.transaction import commit_write
from lakecore.layout import bucket_file_id
from lakecore.services import ArchivalPolicy, CleanPolicy, CompactionStrategy
from lakecore.timeline import now_ms
from tests.lakecore.concurrency.conflicts.test_occ_conflicts import SCHEMA, keys_in_bucket, start
from tests.support.browser import read_png, screenshot

EVIL = 'team/<script>alert("x")</script>'
SVG = "{http://www.w3.org/2000/svg}"
runner = CliRunner()


def rows(ids: list[int], tag: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "ts": [1] * len(ids), "v": [tag] * len(ids)})


@pytest.fixture(scope="module")
def story(tmp_path_factory):
    """One table with everything the picture shows, built with lakecore's own APIs."""
    uri = str(tmp_path_factory.mktemp("timeline") / "orders")
    t = Table.create(uri, schema=SCHEMA, record_key="id", name="orders")
    t.upsert(rows(keys_in_bucket(0, 3), "a"), extra={"writer": "team/alpha"})
    t.upsert(rows(keys_in_bucket(1, 3), "a"), extra={"writer": "team/alpha"})
    t.upsert(rows(keys_in_bucket(2, 3), "e"), extra={"writer": EVIL})
    t.maintenance.archive(ArchivalPolicy(min_instants=1, max_instants=2))  # the oldest ones go to history
    undone = t.upsert(rows(keys_in_bucket(2, 1), "oops"), extra={"writer": "team/alpha"}).instant
    t.maintenance.rollback(undone.requested_time, dry_run=False)           # a completed write undone
    kept = t.upsert(rows(keys_in_bucket(0, 1), "kept"), extra={"writer": "team/alpha"}).instant
    t.maintenance.savepoint(kept.requested_time, comment="before the backfill")
    backfill = t.upsert(rows(keys_in_bucket(1, 1), "backfill"), extra={"writer": "team/alpha"}).instant
    t.maintenance.restore(kept.requested_time, dry_run=False)              # undoes the backfill

    shared = keys_in_bucket(3, 4)
    older = start(t, shared[:2], "beta")                                 # two live writes, one group
    younger = start(t, shared[2:], "gamma")
    (conflict,) = find_outside_conflicts(t.storage, t.config.concurrency_mode, HeartbeatConfig())
    conflict = replace(conflict, loser_writer="team/gamma", winner_writer="team/beta")  # the registry's
    assert abort_loser(t.storage, t.lock, conflict, "weir-operator")     # as the supervisor does
    rollback_write(t.storage, t.lock, younger[0].instant, by="abort of the loser")  # the loser gives up
    commit_write(*older, lock=t.lock, extra={"writer": "team/beta"})

    t.maintenance.compact(CompactionStrategy())
    assert t.maintenance.clean(CleanPolicy("keep_latest_file_versions", 1), dry_run=False).instant is not None
    pending = start(t, keys_in_bucket(0, 1), "late")[0].instant          # left inflight
    StorageWriterRegistry(t.storage).register(t.uri, pending.requested_time, {"writer": "team/late"})
    stopped = start(t, keys_in_bucket(1, 1), "stopped")[0].instant       # dead, not rolled back yet
    mark_aborted(t.storage, stopped.requested_time, "weir-operator", now_ms(),
                 {"reason": "its LakeWriter was deleted"})
    return {"table": Table.open(uri), "loser": conflict.loser, "winner": conflict.winner,
            "group": bucket_file_id(3), "undone": undone.requested_time,
            "pending": pending.requested_time, "stopped": stopped.requested_time,
            "restored": backfill.requested_time}


def svg_of(page: str) -> ET.Element:
    start_at = page.index('<svg class="timeline"')
    return ET.fromstring(page[start_at:page.index("</svg>", start_at) + len("</svg>")])


def spans(svg: ET.Element) -> dict[str, ET.Element]:
    return {g.get("data-instant", ""): g for g in svg.iter(f"{SVG}g") if "span" in g.get("class", "").split()}


def title(g: ET.Element) -> str:
    return g.findtext(f"{SVG}title") or ""


def test_writers_services_conflict_rollback_and_pending_are_drawn(story):
    page = timeline_html(story["table"])
    svg = svg_of(page)
    lanes = {g.get("data-lane") for g in svg.iter(f"{SVG}g") if g.get("class") == "lane"}
    assert {"team/alpha", "team/beta", EVIL, "compaction", "clean", "rollback", "archival",
            "(writer not recorded)"} <= lanes
    drawn = spans(svg)

    loser = drawn[story["loser"]]
    assert loser.get("data-outcome") == "rolled_back" and loser.get("data-conflict") == "true"
    assert loser.get("data-lane") == "team/gamma", "its proof of death names the loser's writer"
    why = title(loser)
    assert f"conflict: lost to {story['winner']} (team/beta)" in why and story["group"] in why
    assert "weir-operator" in why
    assert loser.findall(f"{SVG}line[@class='mark']"), "the lost conflict is marked on its bar"
    assert drawn[story["winner"]].get("data-lane") == "team/beta"
    (link,) = [p for p in svg.iter(f"{SVG}path") if p.get("class") == "link"]
    assert f"{story['loser']} lost a conflict to {story['winner']} (team/beta)" in title(link)

    undone = drawn[story["undone"]]
    assert undone.get("data-outcome") == "rolled_back" and "undone by rollback" in title(undone)
    pending = drawn[story["pending"]]
    assert pending.get("data-outcome") == "pending" and pending.find(f"{SVG}path[@class='open']") is not None
    assert pending.get("data-lane") == "team/late", "a live write is named by the registry on storage"
    assert "not completed" in title(pending)
    restored = drawn[story["restored"]]
    assert restored.get("data-outcome") == "rolled_back" and "undone by restore" in title(restored)
    restore = [g for g in drawn.values() if g.get("data-action") == "restore"]
    assert restore and restore[0].get("data-lane") == "restore" and "savepoint" in title(restore[0])
    assert [g for g in drawn.values() if g.get("data-lane") == "savepoint"]
    stopped = drawn[story["stopped"]]
    assert stopped.get("data-outcome") == "aborted" and stopped.get("data-conflict") is None
    assert stopped.get("data-lane") == "(writer not recorded)"
    assert "its LakeWriter was deleted (by weir-operator)" in title(stopped)
    assert stopped.findall(f"{SVG}line[@class='mark mark-dead']")

    compaction = [g for g in drawn.values() if g.get("data-action") == "compaction"]
    assert compaction and all(g.get("data-lane") == "compaction" for g in compaction)
    assert [g for g in drawn.values() if g.get("data-action") == "clean"]
    archived = [g for g in drawn.values() if "archived" in g.get("class", "").split()]
    assert archived and all(g.get("data-lane") == "team/alpha" for g in archived)
    alpha = next(g for g in drawn.values() if g.get("data-lane") == "team/alpha")
    assert "3 rows written" in title(alpha) and "writer: team/alpha" in title(alpha)
    assert "Aborted, rolled-back and stalled writes" in page and "1 archived" not in page.split("<svg")[0]


def test_strings_from_the_table_are_escaped(story):
    page = timeline_html(story["table"], title="<b>orders</b>")
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;orders&lt;/b&gt;" in page

    class Tags(HTMLParser):
        found: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.found.append(tag)

    parser = Tags()
    parser.feed(page)
    assert "script" not in parser.found and "b" in parser.found  # <b> is ours (the table name)
    assert EVIL in {g.get("data-lane") for g in svg_of(page).iter(f"{SVG}g")}  # parsed back, intact


def test_the_cli_writes_the_file_and_keeps_the_text_output(story, tmp_path):
    uri = story["table"].uri
    out = tmp_path / "timeline.html"
    result = runner.invoke(app, ["table", "timeline", uri, "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == str(out) and out.read_text().startswith("<!DOCTYPE html>")
    as_json = runner.invoke(app, ["table", "timeline", uri, "--html", str(out), "--json"])
    assert as_json.exit_code == 0 and json.loads(as_json.output) == {"html": str(out)}
    text = runner.invoke(app, ["table", "timeline", uri])
    assert text.exit_code == 0 and "instants" in text.output and "<svg" not in text.output


def test_a_missing_table_or_an_unwritable_path_fails_with_one_line(story, tmp_path):
    result = runner.invoke(app, ["table", "timeline", str(tmp_path / "nothing"),
                                 "--html", str(tmp_path / "x.html")])
    assert result.exit_code == 1 and "no table at" in result.output and not (tmp_path / "x.html").exists()
    bad = tmp_path / "no" / "such" / "dir" / "t.html"
    result = runner.invoke(app, ["table", "timeline", story["table"].uri, "--html", str(bad)])
    assert result.exit_code == 1 and "cannot write the timeline picture" in result.output
    assert len(result.output.strip().splitlines()) == 1
    with pytest.raises(Exception, match="existing directory"):
        write_timeline_html(story["table"], bad)


def test_thousands_of_instants_are_capped_and_the_rest_counted(story):
    facts = read_facts(story["table"], max_spans=3)
    assert len([s for s in facts.spans if s.outcome == "completed"]) <= 3 + 1  # the capped newest
    assert facts.counted and any("counts per time slice" in n for n in facts.notes)
    counted = render(facts)
    assert "counts per time slice" in counted
    assert [g for g in svg_of(counted).iter(f"{SVG}g") if "(older, counted)" in g.get("data-lane", "")]
    many = tuple(Span(f"2026112310{i // 60000 % 60:02d}{i // 1000 % 60:02d}{i % 1000:03d}", "deltacommit",
                      "completed", "completed", f"team/w{i % 7}", False, 1_795_000_000_000 + i * 50,
                      1_795_000_000_000 + i * 50 + 40, writer=f"team/w{i % 7}") for i in range(5000))
    page = render(TimelineFacts("big", "memory://big", 1_795_000_300_000, many, total=5000))
    svg = svg_of(page)
    assert len(spans(svg)) == 5000 and len(page) < 8_000_000
    assert max(len(list(g)) for g in svg.iter(f"{SVG}g") if g.get("class") == "lane") < 5000 // 7 + 10


def test_the_page_renders_in_a_browser_with_coloured_bars_in_the_lanes(story, tmp_path):
    page = write_timeline_html(story["table"], tmp_path / "timeline.html")
    image = read_png(screenshot(page, tmp_path / "timeline.png", width=1400, height=900))
    assert image.shape == (900, 1400, 3)
    non_white = (image < 245).any(axis=2)
    assert non_white.mean() > 0.02, "the page is (nearly) blank"
    assert len(np.unique(image.reshape(-1, 3)[::5], axis=0)) > 30, "too few colours for a timeline"
    lanes = image[200:, 270:]  # right of the lane labels, below the title and legend

    def pixels(rgb: tuple[int, int, int]) -> int:
        return int((np.abs(lanes.astype(int) - rgb) <= 8).all(axis=2).sum())

    bar = 3 * 10  # the narrowest bar drawn (5 x 12 px) less its border and rounded corners
    assert pixels((0x2F, 0x6F, 0xDF)) >= 2 * bar, "no completed-write bars in the lanes"
    assert pixels((0x8E, 0x44, 0xAD)) >= bar, "no compaction bar"
    assert pixels((0xE6, 0x7E, 0x22)) >= bar, "no rollback bar"
