"""The history checker for multi-writer runs: what the writers say happened vs what the table holds.

Checks (each failure names the batch or instant):
1. every committed batch is on the timeline exactly once, and nothing else is;
2. no batch is both committed and lost;
3. the table equals a serial replay of the committed batches in completion order (no lost update,
   no duplicate key, nothing from a lost batch);
4. every conflict is a true file-group overlap with an instant that completed while the loser wrote;
5. nothing is left pending;
6. writes that failed (e.g. the lock was unavailable) left nothing on the timeline;
7. every early abort names an OLDER instant on one of the loser's file groups that either completed
   there or was still alive when the loser stopped — never one that had already aborted or been
   claimed by a rollback (its proof of death, `.weir/aborted/<T>`, is older than the early abort).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from lakecore import Table
from lakecore.write import route

# file times come from the kernel's coarse clock (up to a tick behind the time the check reads)
NEEDLESS_SLACK_MS = 10


@dataclass(frozen=True)
class Verdict:
    committed: int
    conflicts: int
    archived: int = 0  # instants the table had archived by the end (inline archival under the writers)
    early: int = 0     # early aborts (all of them justified, or check() fails)


def load_log(path: str) -> list[dict]:
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def check(table: Table, entries: list[dict], batch_of: Callable[[str], pa.Table]) -> Verdict:
    timeline = table.timeline()
    assert timeline.pending == (), f"instants left pending: {timeline.pending}"
    # the whole history: instants archived (inline, while the writers ran) and the active ones
    archived = table.archived_instants()
    assert not {i.requested_time for i in archived} & {i.requested_time for i in timeline.instants}, \
        "an instant is both archived and active"
    writes = [i for i in (*archived, *timeline.completed) if i.action in ("commit", "deltacommit")]
    on_timeline = {table.commit_metadata(i).extra["batch"]: i for i in writes}
    assert len(on_timeline) == len(writes), "a batch was committed twice"
    committed = {e["batch"]: e for e in entries if e["outcome"] == "committed"}
    lost = {e["batch"]: e for e in entries if e["outcome"] == "conflict"}
    early = {e["batch"]: e for e in entries if e["outcome"] == "early"}
    failed = {e["batch"] for e in entries if e["outcome"] == "failed"}
    assert not committed.keys() & lost.keys(), f"both committed and lost: {committed.keys() & lost.keys()}"
    both = committed.keys() & early.keys()
    assert not both, f"committed and aborted early: {both}"
    landed = failed & on_timeline.keys()
    assert not landed, f"writes that failed are on the timeline: {landed}"
    assert committed.keys() == on_timeline.keys(), (
        f"writers committed {sorted(committed.keys() - on_timeline.keys())} that the timeline lacks; "
        f"timeline has {sorted(on_timeline.keys() - committed.keys())} no writer committed")
    for tag, e in committed.items():
        assert on_timeline[tag].requested_time == e["instant"], tag

    # 3. serial replay in completion order (commit-time ordering: the later commit wins)
    expected: dict[int, dict] = {}
    for inst in writes:
        for row in batch_of(table.commit_metadata(inst).extra["batch"]).to_pylist():
            expected[row["id"]] = row
    got = table.read().to_pylist()
    ids = [r["id"] for r in got]
    assert len(ids) == len(set(ids)), "duplicate keys in the snapshot"
    assert {r["id"]: r for r in got} == expected, "the snapshot differs from the serial replay"

    # 4. every conflict is a real overlap with an instant completed during the loser's write
    by_time = {i.requested_time: i for i in writes}
    for tag, e in lost.items():
        assert e["conflicts"], f"{tag} lost without a named conflict"
        ours = {(g.partition, g.file_id) for g in route(batch_of(tag), table.config)}
        for c in e["conflicts"]:
            theirs = by_time.get(c["theirs"])
            assert theirs is not None, f"{tag} lost to {c['theirs']}, which is not a completed write"
            assert (theirs.completion_time or "") > e["instant"], f"{tag} lost to an earlier commit"
            overlap = {tuple(g) for g in c["file_groups"]}
            assert overlap and overlap <= ours, f"{tag}: claimed overlap {overlap} not in its groups {ours}"
            their_groups = table.commit_metadata(theirs).file_groups
            assert overlap <= their_groups, f"{tag}: {c['theirs']} did not write {overlap}"

    # 7. every early abort was justified: an older writer, on our file group, alive at the time
    for tag, e in early.items():
        ours = {(g.partition, g.file_id) for g in route(batch_of(tag), table.config)}
        overlap = {tuple(g) for g in e["file_groups"]}
        assert overlap and overlap <= ours, f"{tag}: early overlap {overlap} not in its groups {ours}"
        theirs = by_time.get(e["other"])
        if theirs is not None and e["other"] > e["instant"]:  # newer, and completed since ours began
            assert (theirs.completion_time or "") > e["instant"], f"{tag} stopped for an earlier commit"
            assert overlap <= table.commit_metadata(theirs).file_groups, f"{tag}: {e['other']} wrote apart"
            continue
        assert e["other"] and e["other"] < e["instant"], f"{tag} stopped for {e['other']}: not older"
        if theirs is not None:
            continue  # it completed: it held a marker there, or its commit wrote there
        path = os.path.join(table.uri, ".weir", "aborted", e["other"])
        try:  # when the proof of death became visible (its "at" is taken before it is written): the
            # inode's change time, set when its temp file was linked into place and unlinked; its
            # mtime is when the temp file was written, before the fsync that precedes the link
            visible = os.stat(path).st_ctime_ns // 1_000_000
            with open(path) as fh:
                by = json.load(fh)["by"]
        except FileNotFoundError:
            continue
        assert visible >= e["at"] - NEEDLESS_SLACK_MS, (
            f"needless early abort: {tag}'s check at {e['at']} found {e['other']} alive, but its proof of "
            f"death ({by}) existed since {visible}")
    return Verdict(len(committed), len(lost), len(archived), len(early))
