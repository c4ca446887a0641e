"""What every job entry point shares: parse the contract's argv, run, print one JSON line, exit with
a code the operator's restart policy understands (sparkjobs.contract.EXIT_*).

The JSON line is also the container's termination message (Kubernetes' `terminationMessagePath`,
/dev/termination-log, where the kubelet provides it; `WEIR_TERMINATION_LOG` names another file for
runners that cannot): the operator reads it from the pod's status, e.g. the instant a service run
completed, without reading logs."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

from sparkjobs.contract import (
    EXIT_BAD_INPUT,
    EXIT_BUSY,
    EXIT_CONFLICT,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    StorageArgs,
)

Describe = Callable[[BaseException], dict[str, Any]]


def run_job(parse: Callable[[], Any], run: Callable[[Any], dict[str, Any]], *, done: str,
            bad_input: tuple[type[BaseException], ...], conflict: tuple[type[BaseException], ...],
            describe_conflict: Describe | None = None, busy: tuple[type[BaseException], ...] = (),
            unavailable: tuple[type[BaseException], ...] = ()) -> int:
    """`parse()` the arguments (ValueError: bad input), `run(args)`; map what was raised to an outcome.
    A lock option that contradicts the table's recorded lock is bad input, and so is a damaged data
    file (bytes that do not decode): retrying cannot fix either."""
    from lakecore.errors import DamagedFile, LockProviderMismatch

    refused: tuple[type[BaseException], ...] = (*bad_input, LockProviderMismatch, DamagedFile)
    try:
        args = parse()
    except ValueError as exc:
        return _say(EXIT_BAD_INPUT, {"outcome": "bad_input", "error": str(exc)})
    try:
        out = run(args)
    except busy as exc:
        return _say(EXIT_BUSY, {"outcome": "busy", **_error(exc)})
    except unavailable as exc:   # the source does not answer (no broker): retried, spending no budget
        return _say(EXIT_UNAVAILABLE, {"outcome": "unavailable", **_error(exc)})
    except conflict as exc:
        return _say(EXIT_CONFLICT, {"outcome": "conflict", **(describe_conflict or _error)(exc)})
    except refused as exc:
        return _say(EXIT_BAD_INPUT, {"outcome": "bad_input", **_error(exc)})
    except Exception as exc:  # storage, lock, Spark (e.g. a source path that does not exist): retry later
        return _say(EXIT_FAILED, {"outcome": "failed", **_error(exc)})
    return _say(EXIT_OK, {"outcome": done, **out})


def open_table(uri: str, zookeeper: str | None, storage: StorageArgs | None = None) -> Any:
    """The table with the lock its table.json records, its storage options by the reference `storage`
    names: the table's handle and every task pickled from it carry the reference, and each process
    resolves it. A `--zookeeper` connect string must name the recorded lock's ensemble: a job given
    one for a table that records another lock is refused (LockProviderMismatch), never run under a
    lock the table's other writers do not take."""
    from lakecore import Table
    from lakecore.config import LockSpec

    lock = LockSpec("zookeeper", connect=zookeeper) if zookeeper else None
    return Table.open(uri, lock=lock, storage_options=storage_options(storage))


def owned_columns(config: Any, group: str | None) -> list[str] | None:
    """The columns a writer of column group `group` writes: the record key, the partition fields, the
    group's columns and its ordering field, in table order (None: every column, no group given).
    An unknown group is bad input."""
    if group is None:
        return None
    from lakecore.errors import InvalidTableConfig

    found = next((g for g in config.column_groups if g.name == group), None)
    if found is None:
        names = ", ".join(g.name for g in config.column_groups) or "none: the table has no column groups"
        raise InvalidTableConfig(f"column group {group!r} is not one of the table's ({names}); fix the "
                                 "writer's columnGroup")
    wanted = {*config.record_key, *config.partition_fields, *found.columns, found.ordering_field}
    return [name for name in config.schema.names if name in wanted]


def storage_options(args: StorageArgs | None) -> Any:
    """The job's storage options as a lakecore `OptionsRef` (None: none given)."""
    if args is None or not (args.storage_options_env or args.storage_options_file or args.storage_options):
        return None
    from lakecore.storage import OptionsRef

    return OptionsRef(env=args.storage_options_env, file=args.storage_options_file,
                      literal=dict(args.storage_options))


def _error(exc: BaseException) -> dict[str, Any]:
    return {"error": f"{type(exc).__name__}: {str(exc)[:2000]}"}


TERMINATION_LOG = "/dev/termination-log"
# what the operator reads of an outcome (a service run's instant, a lost conflict's other instant)
_READ_BY_THE_OPERATOR = ("outcome", "service", "instant", "early", "other", "aborted_by", "bytes_written",
                         "file_groups")
TERMINATION_LOG_ENV = "WEIR_TERMINATION_LOG"
MESSAGE_BYTES = 4096  # what Kubernetes keeps of a termination message


def _say(code: int, payload: dict[str, Any]) -> int:
    line = json.dumps(payload)
    print(line, flush=True)
    _terminate_with(line)
    return code


def _terminate_with(message: str) -> None:
    """Write the termination message, if this process runs where one is read (never creates
    /dev/termination-log outside a container: only an existing one is written)."""
    path = os.environ.get(TERMINATION_LOG_ENV) or None
    if path is None and os.path.exists(TERMINATION_LOG):
        path = TERMINATION_LOG
    if path is None:
        return
    if len(message) > MESSAGE_BYTES:  # still JSON: what the operator reads, the rest cut to fit
        payload = json.loads(message)
        kept = {k: payload[k] for k in _READ_BY_THE_OPERATOR if k in payload}
        if isinstance(kept.get("file_groups"), list):
            kept["file_groups"] = kept["file_groups"][:20]
        for text in ("error", "message"):
            if text in payload:
                kept[text] = str(payload[text])[:300]  # ASCII JSON: at most 6 bytes a character
        message = json.dumps(kept)
    try:
        with open(path, "w", encoding="ascii") as f:
            f.write(message)
    except OSError as exc:  # the outcome is in the log too
        print(f"could not write the termination message to {path}: {exc}", file=sys.stderr, flush=True)
