"""The `weir` command: lakecore's table commands, the local launcher (`run`, `get`, `describe`) and
`weir operator` (lakeoperator.main: the operator on a cluster), and `weir demo` (lakeoperator.dev.demo).

`weir run -f DIR` reconciles the manifests in DIR on this machine (lakeoperator.local) until nothing is
going any more (every batch writer done, the rest waiting for a change to a manifest: run_verdict.py);
`weir get [KIND] [NAME]` and `weir describe KIND NAME` show the status it keeps,
as kubectl would for the same resources on a cluster. The commands share lakecore's error handling:
one line with a remedy, `--debug` for the traceback.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import Annotated, Any

import typer

from lakecore.cli.consoles import say
from lakecore.cli.logs import stop_cli_logging
from lakecore.cli.main import app, emit_json, err, friendly, out
from lakecore.cli.tables import Col, show_table
from lakeoperator.local import (
    LocalLauncher,
    ManifestError,
    Runner,
    StateDir,
    apply,
    done_before,
    left_alone,
    local_settings,
    manifest_stamp,
    missing_inputs,
    resolve_kind,
    retry_failed_writers,
    row,
    rows,
    run_alone,
    run_notes,
)
from lakeoperator.manifests import Manifests, read_manifests
from lakeoperator.run_verdict import WAITS_FOR_A_CHANGE, RunFailed, Standing, closing_error, progress_lines
from lakeoperator.views import Fields, Rows, describe_sections, get_sections

DEFAULT_STATE = ".weir-run"
StateOpt = Annotated[str, typer.Option("--state", help="Where `weir run` keeps status, pods and logs.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable JSON output.")]


@app.command("run")
@friendly
def run(directory: Annotated[str, typer.Option("-f", "--filename", help="Directory (or file) of manifests.")],
        state: StateOpt = DEFAULT_STATE,
        follow: Annotated[bool, typer.Option(help="Keep going after every batch writer is done (streams go "
                                             "on; a manifest edited meanwhile is applied).")] = False,
        timeout: Annotated[float, typer.Option(help="Give up after this many seconds (0: never).")] = 0.0,
        give_up_after: Annotated[float, typer.Option(
            help="Give up on a table that keeps failing (its storage or ZooKeeper does not answer; retried "
                 "meanwhile) for this many seconds (0: never; --follow never does).")] = 300.0,
        secrets_dir: Annotated[str | None, typer.Option(help="Secrets as DIR/<secret>/<key> files.")] = None,
        retry_failed: Annotated[bool, typer.Option(
            help="Run again the writers that ended Failed or Aborted in an earlier run.")] = True,
        as_json: JsonOpt = False) -> None:
    """Run the LakeTables, LakeWriters and TableServices of a directory on this machine: tables created,
    writers' and services' Spark jobs run as local processes, status kept in --state. Ends when nothing
    is going any more: exit 0 when every resource got where its spec says, 1 naming each one that cannot
    go on until its manifest changes (an invalid spec, a missing table, a failed writer). A writer that
    ended Failed or Aborted in an earlier run runs again (--no-retry-failed: it stays as it ended). A table
    whose reconcile keeps failing for --give-up-after seconds (retried meanwhile) ends the run too."""
    loaded = read_manifests(directory)   # every mistake refused before anything is applied
    missing = missing_inputs(loaded, Path.cwd())
    if missing:
        raise ManifestError.of(missing, directory)
    with run_alone(state):   # one run per state directory
        for note in (*loaded.notes, *run_notes(loaded, follow=follow)):
            err.print(f"note: {note}", soft_wrap=True, markup=False, highlight=False)
        _run(loaded, directory, state, follow, timeout, secrets_dir, retry_failed, as_json,
             give_up_s=None if follow or give_up_after <= 0 else give_up_after)


def _run(loaded: Manifests, directory: str, state: str, follow: bool, timeout: float, secrets_dir: str | None,
         retry_failed: bool, as_json: bool, give_up_s: float | None = None) -> None:
    from datetime import UTC, datetime

    store = StateDir(state, secrets_dir=secrets_dir)
    applied = apply(store, list(loaded.resources), datetime.now(UTC))
    for note in (*left_alone(store, applied), *done_before(applied)):
        err.print(f"note: {note}", soft_wrap=True, markup=False, highlight=False)
    for line in retry_failed_writers(store, applied, datetime.now(UTC)) if retry_failed else ():
        if not as_json:
            say(line)
    settings, substitute, env = local_settings()
    launcher = LocalLauncher(Path(state) / "pods-state", secrets_dir=secrets_dir, substitute=substitute,
                             base_env=env)
    runner = Runner(store, launcher, settings, keys=frozenset(r.key for r in applied), give_up_s=give_up_s)
    seen: dict[tuple[str, str, str], list[str]] = {}
    stamp = manifest_stamp(directory)

    def reapply() -> None:
        """--follow: a manifest edited, added or removed meanwhile is applied, as `kubectl apply` would
        (a mistake in it is told, and nothing of it applied, until it is fixed). A resource whose
        manifest went keeps running until the run ends (the next run leaves it alone)."""
        nonlocal stamp, loaded
        now_stamp = manifest_stamp(directory)
        if now_stamp == stamp:
            return
        stamp = now_stamp
        try:
            again = read_manifests(directory)
            gaps = missing_inputs(again, Path.cwd())
            if gaps:
                raise ManifestError.of(gaps, directory)
        except ManifestError as exc:
            err.print(f"the changed manifests are not applied: {exc}", soft_wrap=True, markup=False,
                      highlight=False)
            return
        loaded = again
        applied_now = apply(store, list(again.resources), datetime.now(UTC))
        runner.keys = frozenset({*(runner.keys or ()), *(r.key for r in applied_now)})
        if not as_json:
            say(f"applied the changed manifests of {directory}")

    def progress(applying: bool = True) -> None:
        if follow and applying:
            reapply()
        for r in store.all():
            if r.key not in (runner.keys or ()):
                continue
            shown = row(r)
            lines = progress_lines(f"{r.kind}/{r.key[2]}", shown["phase"], shown["detail"], r.body)
            if seen.get(r.key) != lines and not as_json:
                for line in lines:
                    say(line)
            seen[r.key] = lines

    interrupted, signals = 0, _RunSignals(launcher.hurry)   # the signals that stopped the run
    with _handled(signals):   # to the end: a late signal ends the run no sooner than this
        try:
            done = runner.run(until_done=not follow, timeout_s=timeout or None, on_step=progress)
        except KeyboardInterrupt:
            done, interrupted = False, signals.received[0] if signals.received else signal.SIGINT
        finally:
            signals.stopping = True
            launcher.close()   # the drivers run in sessions of their own: stopped here, never left behind
            try:
                runner.settle()    # their writers' status says so (Pending: they start with the next run)
                progress(applying=False)
            except Exception as exc:   # best effort: never in place of the run's own outcome
                err.print("note: the stopped writers' status is left as it was "
                          f"({type(exc).__name__}: {exc}); the next `weir run` brings it up to date",
                          soft_wrap=True, markup=False, highlight=False)
        if signals.hurried and launcher.killed:
            err.print(f"note: a second signal while the drivers were stopping: {launcher.killed} of them "
                      "killed (SIGKILL) without the rest of their grace period", soft_wrap=True, markup=False,
                      highlight=False)
        _end_run(runner, store, loaded, done=done, interrupted=interrupted, follow=follow, timeout=timeout,
                 state=state, as_json=as_json)


def _end_run(runner: Runner, store: StateDir, loaded: Manifests, *, done: bool, interrupted: int,
             follow: bool, timeout: float, state: str, as_json: bool) -> None:
    """How `weir run` ends, its drivers stopped: the JSON report, and the exit that says whether the run
    got where its manifests say (a RunFailed naming what cannot go on)."""
    verdicts = runner.verdicts()
    if as_json:
        ours = runner.keys or frozenset()
        emit_json({"done": done, "resources": [r for r in rows(store)
                                                if (r["kind"], r["namespace"], r["name"]) in ours],
                   "left_alone": [{"kind": k, "namespace": n, "name": m} for k, n, m in
                                  sorted(r.key for r in store.all() if r.key not in ours)],
                   "waiting": [{"kind": v.kind, "namespace": v.namespace, "name": v.name,
                                "standing": v.standing.value, "reason": v.reason, "message": v.message}
                               for v in verdicts if v.standing in WAITS_FOR_A_CHANGE]})
    if interrupted:   # the way to end --follow; a run stopped before it was over is not a success
        raise typer.Exit(0 if follow else 128 + interrupted)
    origins = {key: f"{o.file}:{o.line}" for key, o in loaded.origins.items()}
    if not done and timeout and not follow:
        going = ", ".join(v.label for v in verdicts if v.standing == Standing.GOING)
        raise RunFailed(f"not done after {timeout:g}s ({going} still going); `weir get --state {state}` "
                        "shows where each resource is, `weir describe` why")
    closing = closing_error(verdicts, origins)
    if closing is not None:
        # only a writer of these manifests runs again when the run is started again (retry_failed_writers)
        stalled = {(v.kind, v.namespace, v.name) for v in verdicts if v.standing == Standing.STALLED}
        if any((r.body.get("status") or {}).get("phase") in ("Failed", "Aborted") and r.key in stalled
               and r.key in loaded.origins for r in store.all("LakeWriter")):
            closing += "\nA writer that ended Failed or Aborted runs again when `weir run` is started " \
                "again (fix its input first), or when its manifest changes."
        raise RunFailed(closing)


class _RunSignals:
    """What SIGINT (Ctrl-C), SIGTERM (a service manager) and SIGHUP (a closed terminal) do to `weir run`.
    While it runs, the first ends it as Ctrl-C does: a KeyboardInterrupt, so the launcher stops its
    drivers before the process ends (SIGTERM's and SIGHUP's default action would end it at once and
    leave them running). Once it is stopping them (`stopping`), a further signal hurries the stop: the
    drivers are killed without the rest of their grace period (`hurry`), instead of the process ending
    half way, which left the drivers not yet stopped running and their writers' status unsettled.
    `received` lists the signals' numbers."""

    def __init__(self, hurry: Callable[[], None]) -> None:
        self.hurry = hurry
        self.received: list[int] = []
        self.stopping = False
        self.hurried = False

    def __call__(self, signum: int, _frame: Any) -> None:
        self.received.append(signum)
        if not self.stopping:
            self.stopping = True
            raise KeyboardInterrupt
        self.hurried = True
        self.hurry()


@contextmanager
def _handled(signals: _RunSignals) -> Iterator[None]:
    """`signals` handles SIGINT, SIGTERM and SIGHUP within the block (the previous handlers after)."""
    if threading.current_thread() is not threading.main_thread():   # handlers live in the main thread
        yield
        return
    previous = {s: signal.signal(s, signals) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


KindArg = Annotated[str | None, typer.Argument(help="laketable|lt, lakewriter|lw, tableservice|lts")]


@app.command("get")
@friendly
def get(kind: KindArg = None,
        name: Annotated[str | None, typer.Argument()] = None, state: StateOpt = DEFAULT_STATE,
        namespace: Annotated[str | None, typer.Option(
            "--namespace", "-n", help="Only this namespace's resources (default: every namespace).")] = None,
        as_json: JsonOpt = False) -> None:
    """List the resources `weir run` manages, with their phase (one table per kind, as kubectl)."""
    from datetime import UTC, datetime

    resolved = resolve_kind(kind)
    if as_json:
        emit_json([r for r in rows(StateDir(state), resolved, name) if namespace in (None, r["namespace"])])
        return
    found = [r.body for r in StateDir(state).all(resolved) if (not name or r.key[2] == name)
             and namespace in (None, r.key[1])]
    if not found:
        said = f"no resources in {state}" + (f" of kind {resolved}" if resolved else "") \
            + (f" named {name}" if name else "") + (f" in namespace {namespace}" if namespace else "")
        if not Path(state).is_dir():   # nothing ran here: say how something does
            said += f" (no {state} here: `weir run -f DIR` runs a directory of manifests and keeps their " \
                    "status there; --state names another)"
        say(said)
    for i, section in enumerate(get_sections(found, datetime.now(UTC), name_kinds=resolved is None)):
        if i:
            out.print()
        show_table(out, section.columns, section.rows)


@app.command("describe")
@friendly
def describe(kind: Annotated[str, typer.Argument(help="laketable|lt, lakewriter|lw, tableservice|lts")],
             name: str,
             namespace: Annotated[str, typer.Option("--namespace", "-n", help="Its namespace.")] = "default",
             state: StateOpt = DEFAULT_STATE, as_json: JsonOpt = False) -> None:
    """One resource as kubectl describes it: identity and phase, conditions, attempts and the last
    conflict (writers), runs (services) and Events, as `weir run` keeps them; --json: the whole body."""
    from datetime import UTC, datetime

    resolved = resolve_kind(kind)
    assert resolved is not None
    r = StateDir(state).load(resolved, namespace, name)
    if r is None:
        raise ManifestError(f"no {resolved} {namespace}/{name} in {state}; `weir get --state {state}` "
                            "lists them")
    if as_json:
        emit_json({"resource": r.body, "events": r.events})
        return
    for i, section in enumerate(describe_sections(r.body, r.events, datetime.now(UTC))):
        indent = 2 if i else 0   # the first section is the resource's identity, at the margin
        if section.title:
            say(f"{section.title}:" + ("" if _rows_of(section) else "  <none>"))
        if isinstance(section, Fields):
            show_table(out, [Col("", "id"), Col("")], [(f"{k}:", v) for k, v in section.pairs], header=False,
                       indent=indent)
        elif section.rows:
            show_table(out, section.columns, section.rows, indent=indent)


def _rows_of(section: Fields | Rows) -> tuple[Any, ...]:
    return section.pairs if isinstance(section, Fields) else section.rows


@app.command("demo")
def demo(directory: Annotated[str | None, typer.Argument(help="Work directory (default: a temporary one).")]
         = None,
         size: Annotated[str, typer.Option(help="full or small (less data, quicker).")] = "full",
         storage_lock: Annotated[bool, typer.Option(help="Lock on storage even when ZooKeeper could run.")]
         = False) -> None:
    """Run the seed scenarios of examples/demo on this machine (what `make demo` runs): three streams
    stitching one table with a compaction, and a long delete stopped from outside and restarted."""
    from lakeoperator.dev.demo import main as demo_main

    raise typer.Exit(demo_main([*([directory] if directory else []), "--size", size,
                                *(["--storage-lock"] if storage_lock else [])]))


def _kafka() -> None:
    from lakeoperator.dev.kafka_cli import kafka_app

    app.add_typer(kafka_app, name="kafka")


_kafka()


def _operator() -> None:
    from lakeoperator.main import operator_command

    @wraps(operator_command)
    def operator(*args: Any, **kwargs: Any) -> Any:
        stop_cli_logging()  # the operator logs every library through kopf's handler (lakeoperator.main)
        return operator_command(*args, **kwargs)

    app.command("operator")(operator)


_operator()
