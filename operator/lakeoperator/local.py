"""`weir run -f DIR`: the operator's reconcile core over manifests on disk, with no Kubernetes.

Takes the LakeTables, LakeWriters and TableServices manifests.py read from a directory, reconciles them
with the same observe step and core the Kubernetes controller uses (observe.py, reconcile.py), launches
their Spark jobs as local processes (launch/local.py) and keeps what `kubectl` would show — status, the
spec each writer runs, Events — in a state directory, one JSON file per resource (`StateDir`, this
launcher's `store.Store`), so `weir get` / `weir describe` read it and a restarted `weir run` carries on
where the last one stopped. The supervisor's decisions go through the same sink as on a cluster
(supervision/sink.py). Relative paths in the manifests are relative to the directory `weir run` is
started in. The loop ends when nothing is going any more (run_verdict.py).

Must not hold decisions of its own: what to do is the planners'; this module only loops, persists and
reports.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lakecore.cli.errors import CommandError
from lakeoperator.builders.driver_pod import PodSettings, child_name
from lakeoperator.launch.local import LocalLauncher
from lakeoperator.manifests import KINDS, ManifestError, Manifests
from lakeoperator.observe import Inputs, TableInputs, observe
from lakeoperator.reconcile import Outcome, reconcile
from lakeoperator.run_verdict import Verdict, explanation, judge_all, over, unphased_reason
from lakeoperator.specs import ObjectRef, SpecError, parse_lake_writer, parse_table_service
from lakeoperator.status import ended_attempts, retried_writer_status
from lakeoperator.supervision import (
    StoreSink,
    Supervisor,
    watched_table,
    with_current_instant,
    zookeeper_abort_flag,
)
from sparkjobs.driver_jvm import submit_options
from sparkjobs.jars import classpath

SHORT = {"lt": "LakeTable", "laketable": "LakeTable", "laketables": "LakeTable", "lw": "LakeWriter",
         "lakewriter": "LakeWriter", "lakewriters": "LakeWriter", "lts": "TableService",
         "tableservice": "TableService", "tableservices": "TableService"}
EVENTS_KEPT = 50
IMAGE_JOBS_DIR = "/opt/weir/sparkjobs"
log = logging.getLogger(__name__)


@dataclass
class Resource:
    body: dict[str, Any]
    applied: dict[str, Any] | None = None
    events: list[dict[str, Any]] | None = None

    @property
    def kind(self) -> str:
        return str(self.body["kind"])

    @property
    def key(self) -> tuple[str, str, str]:
        meta = self.body["metadata"]
        return self.kind, str(meta.get("namespace") or "default"), str(meta["name"])


class StateDir:
    """Resources and their status on disk: `<dir>/<kind>/<namespace>.<name>.json`; `weir run`'s
    `store.Store`. The Secrets a spec names are read from `secrets_dir` (`--secrets-dir`:
    `<dir>/<secret>/<key>`), as its drivers' are; without one the run opens tables with its own
    environment's credentials."""

    inherits_environment = True   # its drivers run with this process's environment

    def __init__(self, path: str | Path, clock: Callable[[], datetime] = lambda: datetime.now(UTC), *,
                 secrets_dir: str | Path | None = None) -> None:
        self.path = Path(path)
        self.clock = clock   # when Events posted through the store happen
        self.secrets_dir = Path(secrets_dir) if secrets_dir else None

    @property
    def holds_secrets(self) -> bool:
        return self.secrets_dir is not None

    def file(self, kind: str, namespace: str, name: str) -> Path:
        return self.path / "resources" / kind / f"{namespace}.{name}.json"

    def load(self, kind: str, namespace: str, name: str) -> Resource | None:
        f = self.file(kind, namespace, name)
        if not f.exists():
            return None
        d = json.loads(f.read_text())
        return Resource(d["body"], d.get("applied"), d.get("events") or [])

    def save(self, r: Resource) -> None:
        f = self.file(*r.key)
        f.parent.mkdir(parents=True, exist_ok=True)
        tmp = f.with_suffix(".tmp")
        tmp.write_text(json.dumps({"body": r.body, "applied": r.applied, "events": r.events}, indent=2))
        tmp.replace(f)

    def all(self, kind: str | None = None) -> list[Resource]:
        kinds = [kind] if kind else list(KINDS)
        out = []
        for k in kinds:
            for f in sorted((self.path / "resources" / k).glob("*.json")):
                d = json.loads(f.read_text())
                out.append(Resource(d["body"], d.get("applied"), d.get("events") or []))
        return out

    # -- store.Store ------------------------------------------------------------------------------

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        r = self.load(kind, namespace, name)
        return r.body if r is not None else None

    def names(self, kind: str, namespace: str) -> list[str]:
        return sorted(r.key[2] for r in self.all(kind) if r.key[1] == namespace)

    def bodies(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        return [r.body for r in self.all(kind) if r.key[1] == namespace]

    def applied_spec(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        r = self._of(body)
        return dict(r.applied) if r is not None and r.applied is not None else None

    def secret_value(self, namespace: str, name: str, key: str) -> str | None:
        """`<secrets_dir>/<name>/<key>` (every namespace's, as the local launcher reads them)."""
        if self.secrets_dir is None or any("/" in part or part.startswith(".") for part in (name, key)):
            return None   # a name that would leave the directory is no Secret
        try:
            return (self.secrets_dir / name / key).read_text()
        except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError):
            return None

    def replace_status(self, body: Mapping[str, Any], status: Mapping[str, Any]) -> dict[str, Any]:
        r = self._of(body)
        if r is None:   # gone meanwhile
            return dict(body)
        r.body["status"] = dict(status)
        self.save(r)
        return r.body

    def post_event(self, involved: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        r = self._of(involved)
        if r is not None:
            _add_events(r, [(type_, reason, message)], self.clock())
            self.save(r)

    def _of(self, body: Mapping[str, Any]) -> Resource | None:
        meta = body.get("metadata") or {}
        return self.load(str(body["kind"]), str(meta.get("namespace") or "default"), str(meta["name"]))


def apply(state: StateDir, manifests: list[dict[str, Any]], now: datetime) -> list[Resource]:
    """Like `kubectl apply`: new resources get uid and creationTimestamp, changed specs a new generation;
    status, the applied spec and Events are kept."""
    out = []
    for doc in manifests:
        meta = doc["metadata"]
        current = state.load(doc["kind"], meta["namespace"], meta["name"])
        if current is None:
            body = json.loads(json.dumps(doc))
            body["metadata"] |= {"uid": f"local-{doc['kind'].lower()}-{meta['namespace']}-{meta['name']}",
                                 "generation": 1, "creationTimestamp": _stamp(now)}
            current = Resource(body, None, [])
        else:
            body = current.body
            if body.get("spec") != doc.get("spec") or (body["metadata"].get("annotations") or {}) != \
                    (meta.get("annotations") or {}):
                if body.get("spec") != doc.get("spec"):
                    body["metadata"]["generation"] = int(body["metadata"].get("generation") or 1) + 1
                body["spec"] = doc.get("spec")
                body["metadata"]["annotations"] = meta.get("annotations") or {}
        state.save(current)
        out.append(current)
    return out


def manifest_stamp(path: str | Path) -> tuple[tuple[str, int, int], ...]:
    """What changes when a manifest of `path` (a file, or a directory's *.yaml / *.yml) is edited, added
    or removed: `weir run --follow` reads them again then."""
    root = Path(path)
    files = [root] if root.is_file() else sorted([*root.glob("*.yaml"), *root.glob("*.yml")])
    out = []
    for f in files:
        try:
            st = f.stat()
        except OSError:
            continue
        out.append((str(f), st.st_mtime_ns, st.st_size))
    return tuple(out)


def left_alone(state: StateDir, applied: Iterable[Resource]) -> list[str]:
    """A note naming the resources `state` holds from an earlier run that none of the manifests given
    declares (a manifest deleted, another folder's): the run leaves them as they are. Their status stays
    for `weir get`; nothing is deleted (a LakeTable's data least of all)."""
    given = {r.key for r in applied}
    others = [f"{r.kind}/{r.key[2]}" if r.key[1] == "default" else f"{r.kind}/{r.key[1]}/{r.key[2]}"
              for r in state.all() if r.key not in given]
    if not others:
        return []
    them, are = ("them", "they are") if len(others) > 1 else ("it", "it is")
    return [f"{', '.join(others)}: kept in {state.path} from an earlier run, in none of these manifests: "
            f"left as {are}, not run (`weir get` shows {them}; removing its file under "
            f"{state.path / 'resources'} forgets one; no data is deleted)"]


def done_before(applied: Iterable[Resource]) -> list[str]:
    """A note naming the writers of these manifests that succeeded in an earlier run with the spec they
    have now: a batch writer (or a stream with availableNow) writes its input once, so they do not run
    again, also when files were added to their path since."""
    def done(r: Resource) -> bool:
        status, spec = r.body.get("status") or {}, r.body.get("spec") or {}
        once = spec.get("mode") == "batch" or bool((spec.get("trigger") or {}).get("availableNow"))
        return r.kind == "LakeWriter" and once and status.get("phase") == "Succeeded" \
            and status.get("observedGeneration") == r.body["metadata"].get("generation")

    def kafka(r: Resource) -> bool:
        return bool(((r.body.get("spec") or {}).get("source") or {}).get("kafka"))

    said = []
    for of_kafka in (False, True):
        names = [r.key[2] for r in applied if done(r) and kafka(r) == of_kafka]
        if not names:
            continue
        they, their = ("they are", "their") if len(names) > 1 else ("it is", "its")
        new, again = (f"new messages in {their} topics", f"reads on from the offsets {their} last commit "
                      "recorded") if of_kafka else (f"new files in {their} path", "writes it again (a "
                                                    "stream: only the files it has not read)")
        said.append(f"LakeWriter {', '.join(names)} succeeded in an earlier run: a batch writer (or a stream "
                    f"with availableNow) writes its input once, so {they} not run again ({new} included); "
                    f"a new spec.restartNonce {again}")
    return said


def retry_failed_writers(state: StateDir, resources: Iterable[Resource], now: datetime) -> list[str]:
    """Starting `weir run` again is how a writer that ended Failed or Aborted is asked to run again on this
    machine (after its input was fixed), as a new spec.restartNonce asks on a cluster: each such writer
    among `resources` goes back to Pending with fresh budgets (status.retried_writer_status), with an
    Event. A writer whose spec changed restarts anyway. Returns a line to print per writer."""
    said = []
    for r in resources:
        status = r.body.get("status") or {}
        retried = retried_writer_status(status) if r.kind == "LakeWriter" else None
        if retried is None:
            continue
        ended = f"{status.get('phase')}" + (f" ({why[0]})" if (why := explanation(r.body)) and why[0] else "")
        message = f"it ended {ended} in an earlier run: trying again (weir run was started again)"
        r.body["status"] = retried
        _add_events(r, [("Normal", "Retrying", message)], now)
        state.save(r)
        said.append(f"{r.kind}/{r.key[2]}: {message}")
    return said


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _record(r: Resource, outcome: Outcome, now: datetime) -> None:
    r.body["status"] = outcome.status
    if r.kind == "LakeWriter":
        r.applied = dict(outcome.applied) if outcome.applied is not None else None
    _add_events(r, outcome.events, now)


def _add_events(r: Resource, new: Iterable[tuple[str, str, str]], now: datetime) -> None:
    events = r.events if r.events is not None else []
    for kind, reason, message in new:
        if events and events[-1]["reason"] == reason and events[-1]["message"] == message:
            events[-1]["count"] = int(events[-1].get("count", 1)) + 1
            events[-1]["lastTimestamp"] = _stamp(now)
        else:
            events.append({"type": kind, "reason": reason, "message": message, "count": 1,
                           "firstTimestamp": _stamp(now), "lastTimestamp": _stamp(now)})
    r.events = events[-EVENTS_KEPT:]


def missing_inputs(manifests: Manifests, cwd: Path) -> list[str]:
    """A line for each LakeWriter whose source is local files (`spec.source.path`: no URL scheme, or
    file:) that are not there: a writer run here would fail on it after its driver started, twice (its
    restarts). Relative paths are taken from `cwd`, where `weir run` runs, as Spark takes them; where the
    path's tail is found beside the writer's manifest (a copied example), the line says which path
    would name it."""
    lines = []
    for doc in manifests.resources:
        source = (doc.get("spec") or {}).get("source") if doc.get("kind") == "LakeWriter" else None
        path = source.get("path") if isinstance(source, dict) else None
        if not isinstance(path, str) or not path or "$" in path:
            continue
        local = path.removeprefix("file://") if path.startswith("file://") else path.removeprefix("file:")
        if "://" in local:
            continue   # an object store: not judged here
        full = cwd / local
        if glob.glob(str(full)) if glob.has_magic(local) else full.exists():
            continue
        key = (doc["kind"], doc["metadata"]["namespace"], doc["metadata"]["name"])
        origin = manifests.origins.get(key)
        where = origin.at() if origin is not None else f"LakeWriter {key[1]}/{key[2]}"
        hint = "; fix the path or run from the folder it is relative to"
        if origin is not None and not Path(local).is_absolute():
            parts = Path(local).parts
            beside = [origin.file.parent / Path(*parts[i:]) for i in range(len(parts))]
            found = next((b for b in beside if b.exists()), None)
            if found is not None:
                near = os.path.relpath(found, cwd)
                hint = f"; it is at {near!r} from here: write that (or an absolute path)"
        what = "matches no file" if glob.has_magic(local) else "does not exist"
        lines.append(f"{where}: LakeWriter {key[2]}: spec.source.path {path!r} {what} (relative "
                     f"paths are taken from where `weir run` runs: {cwd}){hint}")
    return lines


def run_notes(manifests: Manifests, *, follow: bool) -> list[str]:
    """What `weir run` says before it starts about how it runs these manifests where they differ from a
    cluster: Spark in local mode for a spec of `spark.mode: kubernetes` (PodSettings.local_only), and,
    without `follow`, a stream without availableNow stopped when the rest is done (run_verdict counts it
    as holding no run open). Resources that do not run are left out: invalid (their status says why),
    suspended or paused."""
    cluster: list[str] = []
    streams: list[str] = []
    for doc in manifests.resources:
        ref = ObjectRef.from_body(doc)
        if doc.get("kind") not in ("LakeWriter", "TableService") or ref.paused or not ref.managed:
            continue
        label = f"{doc['kind']}/{ref.name}"
        try:
            if doc["kind"] == "LakeWriter":
                writer = parse_lake_writer(doc)
                spark, runs = writer.spark, writer.state != "Suspended"
                if runs and writer.mode == "streaming" and not writer.trigger.available_now:
                    streams.append(label)
            else:
                service = parse_table_service(doc)
                spark, runs = service.spark, not service.suspend
        except SpecError:
            continue
        if runs and spark.mode == "kubernetes":
            cluster.append(label)
    notes = []
    scheduled = [f"TableService/{ObjectRef.from_body(d).name} ({(d.get('spec') or {}).get('schedule')!r})"
                 for d in manifests.resources if d.get("kind") == "TableService"
                 and isinstance(d.get("spec"), dict) and d["spec"].get("schedule")
                 and not d["spec"].get("suspend")]
    if scheduled and not follow:
        notes.append(f"{', '.join(scheduled)} run{'' if len(scheduled) > 1 else 's'} on a schedule: this run "
                     "ends when the rest is done, before the next slot comes unless it is due now; `weir run "
                     "--follow` keeps going until then")
    if cluster:
        notes.append(f"{', '.join(cluster)}: spark.mode kubernetes (the default) asks a cluster for executor "
                     "pods; here Spark runs in local mode in the driver's process, with spark.localCores "
                     "threads (spark.executor is not used); set `spark: {mode: local}` to say so")
    if streams and not follow:
        many = len(streams) > 1
        notes.append(f"{', '.join(streams)} stream{'' if many else 's'} until stopped (no "
                     f"spec.trigger.availableNow): this run stops {'them' if many else 'it'} once the rest "
                     "is done (at once when nothing else runs); `weir run --follow` keeps streaming until "
                     "Ctrl-C, `trigger: {availableNow: true}` writes what is there and ends")
    return notes


def local_settings(*, fast_start: bool = False) -> tuple[PodSettings, dict[str, str], dict[str, str]]:
    """Pod settings and the launcher's substitutions for this machine: the image's spark-submit and
    job files are this interpreter's and this checkout's; Spark workers use this interpreter; the
    connectors the image bakes in (Kafka, Avro, s3a: sparkjobs.jars) come from `make spark-jars`.
    Unless SPARK_SUBMIT_OPTS is set, drivers map the class-data-sharing archive of `make spark-cds`
    when it is there, and with `fast_start` (short jobs on small data: the demo) also run C1 only with
    one GC thread (sparkjobs.driver_jvm)."""
    import importlib.util

    found = importlib.util.find_spec("sparkjobs")  # where the job files are; not imported (no pyspark here)
    if found is None or not found.submodule_search_locations:
        raise RuntimeError("the sparkjobs package is not installed here; run `make deps`")
    jobs = str(next(iter(found.submodule_search_locations)))
    search = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    submit = shutil.which("spark-submit", path=search)
    if submit is None:
        raise RuntimeError("spark-submit not found next to this Python or on PATH; install pyspark "
                           "(`make deps`) and run weir from its virtualenv")
    settings = PodSettings(jobs_dir=IMAGE_JOBS_DIR, spark_submit="spark-submit", local_only=True)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")}
    connectors = classpath()
    if connectors:  # the image has them in pyspark's jars; here spark-submit's launcher adds them
        env["SPARK_DIST_CLASSPATH"] = os.pathsep.join(
            p for p in (env.get("SPARK_DIST_CLASSPATH"), connectors) if p)
    if not env.get("SPARK_SUBMIT_OPTS") and (options := submit_options(fast_start=fast_start)):
        env["SPARK_SUBMIT_OPTS"] = options   # spark-submit's launcher passes them to the driver JVM
    return settings, {"spark-submit": submit, f"{IMAGE_JOBS_DIR}/": f"{jobs}/"}, env


class StateInUse(CommandError):
    """Another `weir run` uses the state directory: two runs would drive the same writers and services."""


@contextmanager
def run_alone(state: str | Path) -> Iterator[None]:
    """Hold `state`'s run lock (an exclusive flock of `<state>/run.lock`, which the system lets go when
    the process ends, also by kill -9) while the block runs; StateInUse, naming the holder, when another
    `weir run` holds it. Two runs on one directory both submitted writers and started service runs for the
    same resources (a compaction ran twice; one run's status overwrote the other's)."""
    import fcntl

    path = Path(state)
    path.mkdir(parents=True, exist_ok=True)
    with open(path / "run.lock", "a+", encoding="utf-8") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "another process"
            raise StateInUse(f"another `weir run` ({holder}) uses the state directory {state}: stop it first "
                             "(Ctrl-C), or give this run its own --state") from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()}, started {datetime.now(UTC).isoformat(timespec='seconds')}")
        lock.flush()
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@dataclass
class Runner:
    """One reconcile loop over a state directory; with `supervise`, the Ready tables' live writes are
    scanned once per step (supervision/: conflicts decided from outside, dead writes rolled back). A
    table a scan saw a commit on, or one of whose writers' attempts ended, has its status derived again
    at the end of the step, so it never lags behind its writers'."""

    state: StateDir
    launcher: LocalLauncher
    settings: PodSettings
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    supervise: bool = True
    conflict_grace_s: float = 10.0
    # the resources this run runs (`weir run`: those of its manifests); the others the state holds from
    # an earlier run are left as they are, neither reconciled nor judged. None: every one.
    keys: frozenset[tuple[str, str, str]] | None = None
    # a table failing and retried for longer than this is given up on (run_verdict: failing); None: never
    give_up_s: float | None = None
    started: datetime | None = field(default=None, init=False)   # when run() began
    supervisor: Supervisor | None = field(default=None, init=False)
    sink: StoreSink = field(init=False)
    _due: set[tuple[str, str]] = field(default_factory=set, init=False)   # tables whose status is due

    def __post_init__(self) -> None:
        self.sink = StoreSink(self.state, self.launcher, grace_s=self.conflict_grace_s,
                              on_commit=lambda namespace, name: self._due.add((namespace, name)))
        if self.supervise:
            self.supervisor = Supervisor(self.sink, grace_s=self.conflict_grace_s, clock=self.clock,
                                         abort_flag=zookeeper_abort_flag)

    def step(self) -> tuple[bool, float]:
        """Reconcile every resource once: the tables, then the writers and services. Returns (nothing is
        going any more: every resource is done, paused, or waits for a change to a manifest; seconds
        until the next step)."""
        now = self.clock()
        waits: list[float] = []
        going = self._drivers_going() if self.supervisor is not None else {}
        for kind in KINDS:
            for r in self._ours(self.state.all(kind)):
                inputs = observe(self.state, kind, r.body)
                self._reconcile(r, inputs, now, waits)
                if isinstance(inputs, TableInputs):
                    self._watch(r, inputs)
        if self.supervisor is not None:
            # a driver that died mid-write (kill -9, out of memory), seen by this step's reconcile or after
            self._abort_writes_of(self._gone_of(going))
            self.supervisor.run_once()
        self._refresh_tables()
        return over(self.verdicts()), min([1.0, *waits])

    def settle(self) -> None:
        """After the launcher stopped its drivers (the run is over): reconcile once each writer that had
        one going, so its status says how it ended — a driver stopped by the end of the run is `Pending`,
        to start again with the next run — rather than `Running` with no driver — and no writer without
        a driver keeps showing a current instant (the scan that would clear it runs no more). The
        launcher starts nothing any more (closed)."""
        now, waits = self.clock(), list[float]()
        stopped = self._gone_of(self._drivers_going())
        for r in self._ours(self.state.all("LakeWriter")):
            if (r.body.get("status") or {}).get("phase") in ("Submitted", "Running"):
                self._reconcile(r, observe(self.state, "LakeWriter", r.body), now, waits)
        self._abort_writes_of(stopped)   # their writes end now, not a heartbeat timeout later
        for r in self._ours(self.state.all("LakeWriter")):   # no driver: no write going (no scan will say so)
            status = r.body.get("status") or {}
            if status.get("phase") not in ("Submitted", "Running"):
                cleared = with_current_instant(status, None)
                if cleared is not None:
                    r.body["status"] = cleared
                    self.state.save(r)
        self._refresh_tables()

    def _drivers_going(self) -> dict[str, str]:
        """The writers whose status shows a driver going: "namespace/name" -> the submission it runs."""
        going: dict[str, str] = {}
        for r in self._ours(self.state.all("LakeWriter")):
            status = r.body.get("status") or {}
            if status.get("phase") in ("Submitted", "Running") and status.get("submissionId"):
                going[f"{r.key[1]}/{r.key[2]}"] = str(status["submissionId"])
        return going

    def _gone_of(self, drivers: dict[str, str]) -> dict[str, str]:
        """Those of `drivers` whose driver is known gone."""
        return {w: s for w, s in drivers.items() if self._gone(w.split("/", 1)[0], s)}

    def _abort_writes_of(self, drivers: dict[str, str]) -> None:
        """Record that the pending writes of these gone drivers are over (Supervisor.abort_stopped)."""
        if self.supervisor is None or not drivers:
            return
        for (namespace, table), instant in self.supervisor.abort_stopped(drivers, "weir run"):
            log.info("the write %s to LakeTable %s/%s ended with its driver", instant, namespace, table)

    def _gone(self, namespace: str, submission: str) -> bool:
        """Whether the driver pod of `submission` is known to have ended (the launcher saw it exit or
        stopped it), so no write of it can go on."""
        pod = self.launcher.get_pod(namespace, child_name(submission))
        return pod is None or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")

    def verdicts(self) -> list[Verdict]:
        """Where each resource stands (run_verdict.py): the run is over when none is going."""
        return judge_all((r.body for r in self._ours(self.state.all())), now=self.clock(),
                         give_up_s=self.give_up_s, started=self.started)

    def _ours(self, resources: list[Resource]) -> list[Resource]:
        return resources if self.keys is None else [r for r in resources if r.key in self.keys]

    def _watch(self, r: Resource, inputs: TableInputs) -> None:
        """Supervise a Ready table (its ZooKeeper credentials, if any, are this process's environment)."""
        if self.supervisor is None:
            return
        table = None
        if (r.body.get("status") or {}).get("phase") == "Ready":
            if inputs.zookeeper_error is not None:
                log.warning("LakeTable %s/%s is not supervised: %s", r.key[1], r.key[2],
                            inputs.zookeeper_error)
            else:
                try:
                    table = watched_table(r.key[1], r.body, None, inputs.zookeeper_credentials)
                except SpecError:
                    table = None
        if table is None:
            self.supervisor.forget(r.key[1], r.key[2])
        else:
            self.supervisor.watch(table)

    def _refresh_tables(self) -> None:
        """Derive again, after the step's writers and scan, the status of each table a commit was seen on
        or a writer's attempt ended for (the step's table pass came before): what `weir get` shows is
        the table as it is now. Written only when it changed."""
        due, self._due = self._due, set()
        for namespace, name in sorted(due):
            r = self.state.load("LakeTable", namespace, name)
            if r is None:
                continue
            now = self.clock()
            outcome = reconcile(observe(self.state, "LakeTable", r.body), self.launcher, now, self.settings)
            if outcome.status != (r.body.get("status") or {}):
                _record(r, outcome, now)
                self.state.save(r)

    def _reconcile(self, r: Resource, inputs: Inputs, now: datetime, waits: list[float]) -> None:
        try:
            outcome = reconcile(inputs, self.launcher, now, self.settings)
        except SpecError as exc:  # the core turns these into status; this is a last resort
            outcome = Outcome(r.body.get("status") or {}, events=(("Warning", "InvalidSpec", str(exc)),))
        if r.kind == "LakeWriter" and ended_attempts(r.kind, r.body.get("status") or {}, outcome.status):
            self._due.add((r.key[1], _ref(r.body)))   # its commit, if any, shows in the table's status now
        _record(r, outcome, now)
        self.state.save(r)
        if outcome.requeue_after is not None:
            waits.append(max(0.0, outcome.requeue_after))

    def run(self, *, until_done: bool = True, timeout_s: float | None = None,
            on_step: Callable[[], None] | None = None) -> bool:
        """Loop until nothing is going any more (every batch writer has finished, no service run is active,
        the rest waits for a change to its manifest: `verdicts()` says which), or forever without
        `until_done`, or the timeout. True when over."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        self.started = self.started or self.clock()
        while True:
            done, wait = self.step()
            if on_step is not None:
                on_step()
            if done and until_done:
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(max(0.05, min(wait, 1.0)))


def _ref(body: dict[str, Any]) -> str:
    return str(((body.get("spec") or {}).get("tableRef") or {}).get("name") or "")


def rows(state: StateDir, kind: str | None = None, name: str | None = None) -> Iterator[dict[str, str]]:
    """What `weir get` prints: one row per resource."""
    for r in state.all(kind):
        if not name or r.key[2] == name:
            yield row(r)


def row(r: Resource) -> dict[str, str]:
    """One resource's row of `weir get` (and of `weir run`'s progress)."""
    s = r.body.get("status") or {}
    spec = r.body.get("spec") or {}
    phase = s.get("phase")
    if r.kind == "LakeTable":
        detail = str(s.get("latestInstant") or "")
        if detail and s.get("latestAction"):   # a rollback is no write: say which it is
            detail += f" ({s['latestAction']})"
    elif r.kind == "LakeWriter":
        detail = f"attempts={(s.get('attempts') or {}).get('total', 0)}"
    else:   # a service has no phase: running a run, or waiting for its next one
        phase, detail = _service_phase(s)
    return {"kind": r.kind, "namespace": r.key[1], "name": r.key[2],
            "phase": str(phase or unphased_reason(r.body) or "Pending"),
            "table": str((spec.get("tableRef") or {}).get("name") or spec.get("location") or ""),
            "detail": detail}


def _service_phase(s: Mapping[str, Any]) -> tuple[str | None, str]:
    """A TableService's phase and detail in `weir run`'s progress: `Running <run>` while a run is active,
    `Scheduled runs=N last=<outcome> <instant>` between runs (`WaitingForCommits ...` for a service run
    by spec.trigger; each start and end is a line); None before its first reconcile or when it cannot
    start (its reason shows instead)."""
    active = s.get("activeRun") or {}
    runs = s.get("history") or []
    last = s.get("lastRun") or {}
    done = f"runs={len(runs)}" + (f" last={last.get('outcome')}" if last else "") + \
        (f" {last['instant']}" if last.get("instant") else "")
    if active:
        return "Running", f"{active.get('id')} ({done})"
    ready: Mapping[str, Any] = next((c for c in s.get("conditions") or () if c.get("type") == "Ready"), {})
    if ready.get("reason") == "Suspended":
        return "Suspended", done
    if ready.get("status") != "True":
        return None, done
    # waiting for its cron slot, or (spec.trigger) for enough commits since its last run
    return ("WaitingForCommits" if ready.get("reason") == "WaitingForCommits" else "Scheduled"), done


def resolve_kind(text: str | None) -> str | None:
    if text is None:
        return None
    kind = SHORT.get(text.lower()) or next((k for k in KINDS if k.lower() == text.lower()), None)
    if kind is None:
        raise ManifestError(f"unknown kind {text!r}; use laketable (lt), lakewriter (lw) or "
                            "tableservice (lts)")
    return kind
