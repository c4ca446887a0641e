"""`make demo` (`weir demo [DIR]`, `python -m lakeoperator.dev.demo [DIR]`): the seed scenarios of
`examples/demo/` run on the local launcher — the same reconcile core, supervisor and local driver
processes as `weir run` — with progress on the terminal (demo_progress.py: phases, commits, each writer's
stage while its driver starts and writes, a line at least every 10 s), then what came out.

1. `stitch`: three streaming LakeWriters fill the column groups of one wide table under non-blocking
   concurrency (partial updates, events out of order), then a compaction TableService runs after their
   three delta commits. The table must equal the join of each stream's latest values.
2. `delete`: a streaming LakeWriter ingests orders into an optimistic table, round after round (this
   driver drops the input files, as an upstream system would); a long batch delete (`operation:
   delete`) starts while it runs. The ingestion's micro-batches commit into the file groups the delete
   is about to write, so when the delete's first data file appears the supervisor decides from outside
   that it lost (a completed write always wins), stops it, and `restartPolicy.onConflict: Restart` runs
   it again; the erased orders end gone and every ingested order present.

Why the conflict happens every run, not by luck: the delete draws its instant first, then reads, hashes
and shuffles its input (seconds: it lists millions of order ids) before it writes a file, then writes
for seconds more. This driver drops an ingestion round only once the delete's instant is drawn, the
next only once the last is committed, at most two while the delete runs, and none once the delete
writes (its markers are there): so an ingestion commit completes after the delete started and before
its first file, and no ingestion write is live beside the delete's files (it would be the younger one,
and lose). The supervisor scans at every reconcile step (every 0.2 s here) and sees, while the delete
writes, a live write on file groups a write completed into since it started: the delete loses (a
completed write always wins). A real erasure writes for minutes, this one for about a second, which a
supervisor pass on a loaded machine could miss (the delete's own commit check would then find the
conflict: the same loser, decided by the writer): so the delete's first attempt holds its tasks once
their files are written (the pause point tests use, `sparkjobs.contract.PAUSE_ENV`, set only in the
manifest this driver applies) until the decision, at most `HOLD_S`. No round is dropped while the
restarted delete runs, one after it.

Kafka when it can: with Java, the broker's jars (`make kafka`), Spark's Kafka connector (`make
spark-jars`) and the Python Kafka client, a Kafka broker of the demo's own (KRaft, free ports on
127.0.0.1, stopped by pid at the end) carries the streams: each writer reads the topic of its stream
(demo_feeds.py); otherwise (or with --files) they read files under the work directory, and the demo says
which it uses.

ZooKeeper when it can: with Java and the Debian package's jar, a ZooKeeper server of the demo's own
(its data dir and a free port on 127.0.0.1, stopped by pid at the end and on Ctrl-C) holds the tables'
locks, writer registry and abort flags; otherwise (or with --storage-lock) the storage lock, and the
demo says so. Everything
stays in the work directory (a temporary one unless DIR is given) for `weir get` / `weir describe` /
`weir table ...`; the last lines print those commands, as they run from where the demo was started
(the virtualenv's weir: `.venv/bin/weir` under `make demo`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from rich.console import Console
from rich.table import Table as RichTable

from lakecore import Table
from lakecore.cli.tables import Col, show_table
from lakecore.cli.timeline_html import write_timeline_html
from lakeoperator.dev.demo_feeds import Feed, start_feed
from lakeoperator.dev.demo_progress import CONFLICT_EVENTS, Progress, writer_of
from lakeoperator.dev.zookeeper import ZooKeeperServer, zookeeper_missing_reason
from lakeoperator.local import LocalLauncher, Runner, StateDir, apply, local_settings
from lakeoperator.manifests import load_manifests
from sparkjobs.contract import PAUSE_ENV

log = logging.getLogger(__name__)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "demo"
SCENARIOS = ("stitch", "delete")
STREAMS = {"telemetry": ("temperature", "humidity"), "location": ("site", "region"),
           "status": ("firmware", "healthy")}
SITES = ("eu-paris", "eu-berlin", "eu-madrid", "us-austin", "us-boston", "ap-tokyo")
FIRMWARE = ("1.3.0", "1.4.2", "1.5.0")
STEP_S = 0.2   # at most this long between two reconcile steps (each scans the tables once)
HOLD_S = 60.0  # the longest the delete's first attempt is held with its files written (`Delete.start`)


@dataclass(frozen=True)
class Size:
    """How much data: `full` for `make demo`, `small` for a quick run (the test's)."""

    devices: int
    stream_files: int
    orders: int            # the orders the ingestion's first round brings
    erasures: int          # the order ids of the erasure request (the delete's input)
    round_orders: int      # new orders per later ingestion round
    rounds: int            # ingestion rounds after the first: all but the last while the delete runs


SIZES = {"full": Size(devices=40, stream_files=3, orders=50_000, erasures=4_000_000, round_orders=1_000,
                      rounds=3),
         "small": Size(devices=12, stream_files=2, orders=10_000, erasures=3_000_000, round_orders=200,
                       rounds=3)}


# -- the work directory ------------------------------------------------------------------------


def render(scenario: str, work: Path, zookeeper: str | None, feed: Feed) -> list[dict[str, Any]]:
    """The scenario's manifests for this work directory: relative paths made absolute under it, the
    tables' lock on the demo's ZooKeeper (or on storage), each writer's stream from `feed` (files or a
    Kafka topic). Written to `<work>/manifests/<scenario>/`."""
    docs = load_manifests(EXAMPLES / scenario)
    target = work / "manifests" / scenario
    target.mkdir(parents=True, exist_ok=True)
    for doc in docs:
        spec = doc["spec"]
        if doc["kind"] == "LakeTable":
            spec["location"] = str(work / spec["location"])
            spec["lock"] = {"provider": "zookeeper", "zookeeper": {"connect": zookeeper}} if zookeeper \
                else {"provider": "storage"}
        elif doc["kind"] == "LakeWriter" and (spec.get("source") or {}).get("path"):
            source = spec["source"]
            streamed = spec.get("mode") == "streaming"   # a batch writer's input stays a file (the erasures)
            spec["source"] = feed.source(Path(source["path"]).name, source.get("format", "parquet")) \
                if streamed else {**source, "path": str(work / source["path"])}
        name = f"{doc['kind'].lower()}-{doc['metadata']['name']}.yaml"
        (target / name).write_text(yaml.safe_dump(doc, sort_keys=False))
    return docs


def stitch_inputs(feed: Feed, size: Size, rng: random.Random) -> dict[str, dict[str, Any]]:
    """Events per stream in batches (files, or messages), out of order across batches; returns what joining
    each stream's latest values gives, per device."""
    devices = [f"d{i:03d}" for i in range(size.devices)]
    expected: dict[str, dict[str, Any]] = {d: {"device": d} for d in devices}
    for stream, columns in STREAMS.items():
        latest: dict[str, dict[str, Any]] = {}
        used: set[tuple[str, int]] = set()
        for f in range(size.stream_files):
            rows = []
            for d in rng.sample(devices, k=max(1, size.devices * 2 // 3)):
                ts = rng.randrange(1, 1000)
                while (d, ts) in used:  # one event per device and time: no ties to break
                    ts = rng.randrange(1, 1000)
                used.add((d, ts))
                rows.append(row := {"device": d, **_stream_values(stream, rng), f"{stream}_ts": ts})
                if d not in latest or latest[d][f"{stream}_ts"] < ts:
                    latest[d] = row
            feed.send(stream, rows, f"part-{f}", "device")
        for d in devices:
            row = latest.get(d) or {}
            expected[d] |= {c: row.get(c) for c in (*columns, f"{stream}_ts")}
    return expected


def _stream_values(stream: str, rng: random.Random) -> dict[str, Any]:
    if stream == "telemetry":
        temperature = round(rng.uniform(15, 30), 1)
        return {"temperature": temperature, "humidity": round(40 + temperature / 2, 1)}
    if stream == "location":
        site = rng.choice(SITES)
        return {"site": site, "region": site.split("-")[0]}
    return {"firmware": rng.choice(FIRMWARE), "healthy": rng.random() > 0.2}


ORDERS_SCHEMA = pa.schema([("order_id", pa.int64()), ("customer", pa.string()), ("amount", pa.float64()),
                           ("ts", pa.int64())])
CUSTOMERS = 100
FORGOTTEN = ("c007", "c042", "c063")   # the customers who asked to be forgotten


def orders(ids: range, ts: int) -> pa.Table:
    customers = [f"c{i * 7919 % CUSTOMERS:03d}" for i in ids]
    return pa.table({"order_id": pa.array(ids, pa.int64()), "customer": customers,
                     "amount": [round(5 + i % 997 * 0.25, 2) for i in ids], "ts": [ts] * len(ids)},
                    schema=ORDERS_SCHEMA)


def erasure_request(work: Path, first: pa.Table, size: Size) -> set[int]:
    """The delete's input: every order id the erasure request lists — the forgotten customers' orders
    in the table, and the ids the upstream order system ever gave them (most long archived, so not in
    the table: deleting them is a no-op, but the job still reads, hashes and routes each)."""
    folder = work / "input" / "erasures"
    folder.mkdir(parents=True, exist_ok=True)
    present = {r["order_id"] for r in first.to_pylist() if r["customer"] in FORGOTTEN}
    archived = range(10_000_000, 10_000_000 + size.erasures)
    ids = sorted(present) + list(archived)
    pq.write_table(pa.table({"order_id": pa.array(ids, pa.int64())}), folder / "request.parquet")
    return present


# -- the scenarios -------------------------------------------------------------------------------


def _writer(state: StateDir, name: str) -> dict[str, Any]:
    r = state.load("LakeWriter", "default", name)
    return (r.body.get("status") or {}) if r else {}


@dataclass
class Stitch:
    work: Path
    size: Size
    state: StateDir
    feed: Feed
    expected: dict[str, dict[str, Any]] = field(default_factory=dict)
    location: str = ""
    table: str = "devices"

    def start(self, zookeeper: str | None, now: datetime) -> None:
        docs = render("stitch", self.work, zookeeper, self.feed)   # a topic exists before its events
        self.expected = stitch_inputs(self.feed, self.size, random.Random(12))
        self.location = next(d["spec"]["location"] for d in docs if d["kind"] == "LakeTable")
        apply(self.state, docs, now)

    def done(self) -> bool:
        writers = [f"devices-{s}" for s in STREAMS]
        service = self.state.load("TableService", "default", "devices-compaction")
        ran = ((service.body.get("status") or {}).get("lastRun") or {}) if service else {}
        return all(_writer(self.state, w).get("phase") in ("Succeeded", "Failed") for w in writers) \
            and ran.get("outcome") in ("success", "failed")

    def tick(self, now: datetime) -> None:
        return


@dataclass
class Delete:
    """Feeds the ingestion in rounds and starts the delete when the table holds the first one (see the
    module docstring for the order that makes the conflict certain)."""

    work: Path
    size: Size
    state: StateDir
    feed: Feed
    say: Callable[[str], None]
    location: str = ""
    table: str = "orders"
    held_back: list[dict[str, Any]] = field(default_factory=list)
    ingested: dict[int, dict[str, Any]] = field(default_factory=dict)
    erased: set[int] = field(default_factory=set)
    stage: str = "seed"
    rounds: int = 0
    delete_instant: str | None = None
    ingest_docs: list[dict[str, Any]] = field(default_factory=list)
    hold: Path | None = None          # the delete's pause point while its first attempt writes (`start`)
    held_since: float | None = None   # when its tasks reached it

    def start(self, zookeeper: str | None, now: datetime) -> None:
        docs = render("delete", self.work, zookeeper, self.feed)
        self.location = next(d["spec"]["location"] for d in docs if d["kind"] == "LakeTable")
        self.held_back = [d for d in docs if (d["spec"] or {}).get("operation") == "delete"]
        # The delete's tasks hold once their files are written (the pause point tests use) until the
        # supervisor has decided: a real erasure writes for minutes, this one for a second, which a
        # loaded machine's supervisor pass can miss (the delete's own commit check then finds the
        # conflict). Released once decided, or after HOLD_S; the restarted attempt does not hold.
        self.hold = self.work / "hold-erase"
        shutil.rmtree(self.hold, ignore_errors=True)   # a work directory used before (make demo DIR=...)
        self.hold.mkdir()
        (self.hold / "hold").touch()
        for d in self.held_back:
            conf = d["spec"].setdefault("spark", {}).setdefault("conf", {})
            conf[f"spark.executorEnv.{PAUSE_ENV}"] = str(self.hold)
        self.ingest_docs = [d for d in docs if d not in self.held_back and d["kind"] == "LakeWriter"]
        first = orders(range(self.size.orders), ts=1)
        self.erased = erasure_request(self.work, first, self.size)
        self._drop(first)
        apply(self.state, [d for d in docs if d not in self.held_back], now)

    def _drop(self, batch: pa.Table) -> None:
        rows = batch.to_pylist()
        self.feed.send("orders", rows, f"round-{self.rounds:03d}", "order_id")
        self.ingested |= {r["order_id"]: r for r in rows}
        self.say(f"[cyan]ingestion round {self.rounds} arrived[/cyan] ({batch.num_rows:,} new orders in "
                 "its source)")
        self.rounds += 1

    def _next_round(self) -> None:
        first = self.size.orders + (self.rounds - 1) * self.size.round_orders
        self._drop(orders(range(first, first + self.size.round_orders), ts=1 + self.rounds))

    def _commits(self) -> list[tuple[str, str, int]]:
        """(instant, writer, records) of the completed writes."""
        try:
            table = Table.open(self.location)
            metas = [(i, table.commit_metadata(i)) for i in table.timeline().completed]
        except Exception:
            return []
        return [(i.requested_time, writer_of(m.extra), m.records) for i, m in metas]

    def _all_ingested(self, since: str = "") -> bool:
        """Every round dropped is committed (a micro-batch may take two rounds), one of them after
        `since`."""
        ours = [(t, n) for t, w, n in self._commits() if w.endswith("/orders-ingest")]
        return sum(n for _, n in ours) >= len(self.ingested) and any(t > since for t, _ in ours)

    def _delete_writes(self) -> bool:
        """The delete's write has begun writing files (its markers are there)."""
        from lakecore.concurrency.conflicts.outside import held_groups
        from lakecore.storage import open_storage

        assert self.delete_instant is not None
        return bool(held_groups(open_storage(self.location), self.delete_instant))

    def release(self) -> None:
        """Let the delete's held tasks go on (they stop on their own once the delete lost)."""
        if self.hold is not None:
            (self.hold / "hold").unlink(missing_ok=True)

    def _held_too_long(self) -> bool:
        if self.hold is None or not any(self.hold.glob("reached-*")):
            return False
        self.held_since = self.held_since or time.monotonic()
        return time.monotonic() - self.held_since > HOLD_S

    def tick(self, now: datetime) -> None:
        erase = _writer(self.state, "orders-erase")
        if self.stage == "seed" and self._all_ingested():
            self.say("ingestion committed its first round: [bold]starting the long delete[/bold] "
                     "(orders-erase)")
            apply(self.state, self.held_back, now)
            self.stage = "delete-starting"
        elif self.stage == "delete-starting" and erase.get("currentInstant"):
            self.delete_instant = str(erase["currentInstant"])
            self.say(f"the delete drew its instant {self.delete_instant}; it reads and routes "
                     f"{self.size.erasures + len(self.erased):,} order ids before it writes (its tasks "
                     "then hold with their files written until the supervisor decides: a real erasure "
                     "writes for minutes, this one for a second)")
            self._next_round()
            self.stage = "feeding"
        elif self.stage == "feeding":
            ended = [h.get("cause") for h in erase.get("history") or []]
            if self._held_too_long():
                self.say(f"[red]the supervisor has not decided in {HOLD_S:.0f}s: letting the delete go "
                         "on[/red]")
                self.release()
            if (erase.get("lastConflict") or {}).get("role") == "Lost" or ended:
                self.release()
                if not (erase.get("lastConflict") or {}).get("role"):
                    self.say(f"[red]the delete ended ({ended}) before the supervisor saw "
                             "its files: its own commit check found the conflict[/red]")
                self.stage = "restarting"
            elif self.rounds < self.size.rounds and self.delete_instant is not None \
                    and self._all_ingested(self.delete_instant) and not self._delete_writes():
                self._next_round()
        elif self.stage == "restarting" and erase.get("phase") in ("Succeeded", "Failed", "Aborted"):
            if self.rounds <= self.size.rounds:
                self._next_round()   # ingestion goes on after the delete
            self.stage = "last-round"
        elif self.stage == "last-round" and self._all_ingested():
            self.say("every round ingested: suspending the ingestion (spec.state: Suspended)")
            suspended = json.loads(json.dumps(self.ingest_docs))
            for d in suspended:
                d["spec"]["state"] = "Suspended"
            apply(self.state, suspended, now)
            self.stage = "suspending"
        elif self.stage == "suspending" and _writer(self.state, "orders-ingest").get("phase") == "Suspended":
            self.stage = "done"

    def done(self) -> bool:
        return self.stage == "done" or \
            _writer(self.state, "orders-erase").get("phase") in ("Failed", "Aborted")


# -- the report ----------------------------------------------------------------------------------


def show_rows(console: Console, title: str, data: list[dict[str, Any]], limit: int = 8) -> None:
    if not data:
        console.print(f"{title}: (empty)")
        return
    view = RichTable(*data[0].keys(), title=title)
    for row in data[:limit]:
        view.add_row(*("" if v is None else str(v) for v in row.values()))
    console.print(view)
    if len(data) > limit:
        console.print(f"... and {len(data) - limit} more rows")


def show_timeline(console: Console, name: str, location: str) -> None:
    table = Table.open(location)
    rows = []
    for i in table.timeline().instants:
        meta = table.commit_metadata(i) if i.is_completed else None
        counts = meta.counts if meta and meta.write_stats else None
        rows.append((i.requested_time, i.action, i.state.name.lower(), i.completion_time or "",
                     meta.operation if meta else "", f"{counts.written:,}" if counts else "",
                     f"{counts.delete_keys:,}" if counts else "", writer_of(meta.extra) if meta else ""))
    show_table(console, (Col("instant", "id"), Col("action", drop=1), Col("state"), Col("completed", "id"),
                         Col("operation"), Col("rows written", "number"), Col("delete keys", "number"),
                         Col("by")), rows, title=f"timeline of {name}")
    aborted = Path(location) / ".weir" / "aborted"
    for proof in sorted(aborted.glob("*")) if aborted.exists() else ():
        console.print(f"  proof of death: write {proof.name} was aborted from outside ({proof})")


def show_supervision(console: Console, state: StateDir) -> None:
    console.print("[bold]What supervision decided[/bold] (the writers' status.lastConflict and Events)")
    any_decision = False
    for r in state.all("LakeWriter"):
        status = r.body.get("status") or {}
        conflict = status.get("lastConflict")
        history = [h.get("cause") for h in status.get("history") or []]
        if conflict:
            any_decision = True
            console.print(f"  {r.key[2]}: {conflict_line(conflict)}")
        ended = f"attempts ended: {', then '.join(map(str, history))}" if history \
            else "no attempt has ended"
        console.print(f"  {r.key[2]}: phase {status.get('phase')}; {ended}")
        for e in r.events or ():
            if e["reason"] in CONFLICT_EVENTS:
                console.print(f"    {e['type']:<7} {e['reason']:<13} {e['message']}")
    if not any_decision:
        console.print("  no conflict was decided")


def conflict_line(conflict: dict[str, Any]) -> str:
    """A writer's status.lastConflict in a sentence: who won, on which file groups, what the loser had
    written (a winner's record carries no bytes of its own), who decided and when."""
    won = conflict.get("role") == "Won"
    groups = ", ".join(str(g) for g in conflict.get("fileGroups") or ()) or "none named"
    other = conflict.get("otherWriter") or "a writer the operator does not run"
    written = conflict.get("bytesWritten")
    if conflict.get("void"):
        lost = "; void: the loser committed before it could be aborted"
    elif not won and isinstance(written, int) and written:
        lost = f"; the {written:,} bytes it had written were rolled back"
    else:
        lost = ""
    return (f"{'won' if won else 'lost'} the conflict of its write {conflict.get('instant')} against write "
            f"{conflict.get('other')} ({other}) on file groups {groups}{lost}; decided by "
            f"{conflict.get('decidedBy')} at {conflict.get('at')}")


def write_pictures(work: Path, tables: dict[str, str]) -> list[Path]:
    """The timeline picture of each table (HTML: one lane per writer, conflicts and aborts marked)."""
    return [write_timeline_html(Table.open(location), work / f"timeline-{name}.html",
                                title=f"Weir demo: the timeline of {name}")
            for name, location in tables.items()]


# -- main ----------------------------------------------------------------------------------------


def start_zookeeper(console: Console, work: Path, *, wanted: bool = True) -> ZooKeeperServer | None:
    """A ZooKeeper of the demo's own, or None (the tables then lock on storage; says why)."""
    if not wanted:
        console.print("The tables lock on storage (--storage-lock); the writer registry is on storage too")
        return None
    reason = zookeeper_missing_reason()
    if reason is not None:
        console.print(f"[yellow]No ZooKeeper here ({reason}):[/yellow] the tables lock on storage "
                      "(`make system-deps` installs it)")
        return None
    server = ZooKeeperServer(work / "zookeeper").start()
    console.print(f"ZooKeeper started on {server.connect_string} (pid {server.pid}, data in "
                  f"{server.data_dir}): the tables' lock, writer registry and abort flags")
    return server


def driver_start(own_options: str | None, options: str) -> str:
    """The line that says how the demo's Spark drivers start (sparkjobs.driver_jvm)."""
    if own_options:
        return f"Spark drivers start with your SPARK_SUBMIT_OPTS ({own_options})"
    said = "Spark drivers start with C1 only and one GC thread (the demo's jobs are short)"
    if "SharedArchiveFile" in options:
        return f"{said}, and map the class-data-sharing archive of `make spark-cds`"
    return f"{said}; `make spark-cds` would have them start ~5 s sooner each"


def run(work: Path, size: Size, console: Console, *, timeout_s: float = 900.0,
        scenarios: tuple[str, ...] = SCENARIOS, zookeeper_wanted: bool = True,
        kafka_wanted: bool = True) -> bool:
    """Run the scenarios in `work`, side by side in one reconcile loop (as one operator runs every
    resource); True when every outcome checks out."""
    work.mkdir(parents=True, exist_ok=True)
    state = StateDir(work / "state")
    own_options = os.environ.get("SPARK_SUBMIT_OPTS")
    settings, substitute, env = local_settings(fast_start=True)   # small jobs: they start in ~half the time
    console.print(driver_start(own_options, env.get("SPARK_SUBMIT_OPTS", "")), markup=False, highlight=False)
    launcher = LocalLauncher(work / "state" / "pods-state", substitute=substitute, base_env=env)
    runner = Runner(state, launcher, settings)
    progress = Progress(console, state)
    zookeeper = start_zookeeper(console, work, wanted=zookeeper_wanted)
    connect = zookeeper.connect_string if zookeeper else None
    broker = None
    running: list[Stitch | Delete] = []
    try:
        feed, broker = start_feed(console, work, kafka_wanted=kafka_wanted)
        for name in scenarios:
            title = (EXAMPLES / name / "README.md").read_text().splitlines()[0].lstrip("# ")
            console.print(f"[bold]{name}[/bold] ({EXAMPLES / name}): {title}")
            scenario: Stitch | Delete = Stitch(work, size, state, feed) if name == "stitch" \
                else Delete(work, size, state, feed, progress.say)
            scenario.start(connect, datetime.now(UTC))
            progress.tables[scenario.table] = scenario.location
            running.append(scenario)
        console.rule("progress")
        deadline = time.monotonic() + timeout_s
        while not all(s.done() for s in running):
            if time.monotonic() > deadline:
                console.print(f"[red]not done after {timeout_s:.0f}s[/red]; `weir get --state {state.path}` "
                              "shows where each resource is, `weir describe` why")
                return False
            _, wait = runner.step()
            progress.update()
            for s in running:
                s.tick(datetime.now(UTC))
            time.sleep(max(0.05, min(wait, STEP_S)))
        progress.update()
        console.rule("outcome")
        ok = all([report(console, s, state) for s in running])
        for s in running:
            show_timeline(console, s.table, s.location)
        show_supervision(console, state)
        pictures = write_pictures(work, dict(progress.tables))
    finally:
        for s in running:
            if isinstance(s, Delete):
                s.release()   # no driver, and no later `weir run` of these manifests, waits on it
        launcher.close()
        if runner.supervisor is not None:
            runner.supervisor.close()
        if zookeeper is not None:
            from lakecore.concurrency.zookeeper import close_shared_clients

            unlocked = to_storage_lock(list(progress.tables.values()))
            if unlocked:
                console.print(f"{', '.join(unlocked)}: now on the storage lock, as ZooKeeper stops with the "
                              "demo (`weir table` commands write them after it)", markup=False,
                              highlight=False)
            close_shared_clients()   # the demo's own clients (tables opened, abort flags) go first
            zookeeper.stop()
            console.print(f"ZooKeeper (pid {zookeeper.pid}) stopped")
        if broker is not None:
            broker.stop()
            console.print(f"Kafka broker (pid {broker.pid}) stopped")
    console.rule("[bold]Look around[/bold]")
    for p in pictures:
        console.print(f"timeline picture: {p}\n  open it: xdg-open {p}   (or: chromium {p})")
    weir = weir_command()
    commands = [f"{weir} get --state {state.path}", f"{weir} describe lw orders-erase --state {state.path}",
                *(f"{weir} table {verb} {location}" for location in progress.tables.values()
                  for verb in ("read", "describe", "timeline"))]
    for command in commands:
        console.print(command, soft_wrap=True, markup=False, highlight=False)
    console.print(f"logs of the Spark drivers: {state.path / 'pods-state' / 'logs'}")
    console.print(f"[bold]{'All checks passed' if ok else 'Some checks FAILED'}[/bold]")
    return ok


def to_storage_lock(locations: list[str]) -> list[str]:
    """Switch the demo's tables from its ZooKeeper, which stops with the demo, to the storage lock: a
    table whose lock is gone cannot be written (a later `weir table compact` waited for it, then failed).
    Returns the tables switched; one that cannot be is left as it is, said in the log."""
    from lakecore import Table
    from lakecore.config import LockSpec

    switched = []
    for location in locations:
        try:
            table = Table.open(location)
            if table.config.lock.provider == "zookeeper":
                table.set_lock_provider(LockSpec("storage"), timeout=30)
                switched.append(table.config.name)
        except Exception as exc:   # best effort: the demo's outcome stands
            log.warning("%s keeps the ZooKeeper lock: %s", location, exc)
    return switched


def weir_command(cwd: Path | None = None) -> str:
    """`weir` as a shell started where the demo was runs it: the one beside this interpreter (the
    virtualenv's: `make demo` prints .venv/bin/weir), relative to `cwd` when it lies under it, also when
    this process's PATH finds it (make puts .venv/bin on its own PATH, not on the user's shell's);
    plain `weir` only when there is none beside the interpreter."""
    beside = Path(sys.executable).parent / "weir"
    if not beside.exists():
        return "weir"
    try:
        return str(beside.relative_to(cwd or Path.cwd()))
    except ValueError:
        return str(beside)


def report(console: Console, scenario: Stitch | Delete, state: StateDir) -> bool:
    table = Table.open(scenario.location)
    got = sorted(table.read().to_pylist(), key=lambda r: str(next(iter(r.values()))))
    if isinstance(scenario, Stitch):
        show_rows(console, "the stitched devices table (first rows)", got)
        expected = [scenario.expected[d] for d in sorted(scenario.expected)]
        same = [{k: r.get(k) for k in expected[0]} for r in got] == expected
        console.print(f"equal to joining each stream's latest values: [bold]{same}[/bold] "
                      f"({len(got)} devices)")
        return same
    by_id = {r["order_id"]: r for r in got}
    gone = not (scenario.erased & set(by_id))
    kept = {i: r for i, r in scenario.ingested.items() if i not in scenario.erased}
    present = all(by_id.get(i) == r for i, r in kept.items()) and len(by_id) == len(kept)
    erase = _writer(state, "orders-erase")
    lost = (erase.get("lastConflict") or {}).get("role") == "Lost"
    console.print(f"the {len(scenario.erased):,} erased orders are gone: [bold]{gone}[/bold]; the "
                  f"{len(kept):,} other ingested orders are all there: [bold]{present}[/bold]; the delete "
                  f"lost a conflict decided from outside and was restarted: [bold]{lost}[/bold] "
                  f"(phase {erase.get('phase')})")
    return gone and present and lost and erase.get("phase") == "Succeeded"


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lakeoperator.dev.demo",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", nargs="?", help="work directory (default: a new temporary one)")
    parser.add_argument("--size", choices=sorted(SIZES), default="full", help="how much data")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS,
                        help="run only this scenario (repeatable; default: all)")
    parser.add_argument("--storage-lock", action="store_true",
                        help="lock the tables on storage even when a ZooKeeper could be started")
    parser.add_argument("--files", action="store_true",
                        help="feed the streams from files even when a Kafka broker could be started")
    args = parser.parse_args(argv)
    # piped (a log, `tee`): tables 160 wide, each line whole (a terminal wraps them at its width)
    console = Console(width=None if sys.stdout.isatty() else 160, soft_wrap=not sys.stdout.isatty())
    signal.signal(signal.SIGTERM, _interrupt)   # stopped like Ctrl-C: the drivers and ZooKeeper go too
    if not EXAMPLES.is_dir():
        console.print(f"[red]{EXAMPLES} not found[/red]: the demo runs from a checkout of Weir (`make demo`, "
                      "or `pip install -e .` there)")
        return 2
    work = Path(args.dir).resolve() if args.dir else Path(tempfile.mkdtemp(prefix="weir-demo-"))
    console.print(f"[bold]Weir demo[/bold] in {work} (size {args.size}): the local launcher runs "
                  f"the manifests of {EXAMPLES}")
    try:
        ok = run(work, SIZES[args.size], console, scenarios=tuple(args.scenario or SCENARIOS),
                 zookeeper_wanted=not args.storage_lock, kafka_wanted=not args.files)
    except KeyboardInterrupt:
        console.print(f"\ninterrupted: drivers and ZooKeeper stopped; what ran is in {work}")
        return 130
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
