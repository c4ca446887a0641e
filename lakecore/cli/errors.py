"""What the CLI says when a command fails: one line that says what happened and what to do.

Pure: an exception (and the table URI the command was given) in, the line out. lakecore errors
already end with a remedy; the expected OS and Arrow errors (a missing or unreadable file, a data
file of the table that is gone or damaged) get one here, and so does a module of an extra that is not
installed (`EXTRA_OF`: which `pip install 'weir[EXTRA]'` brings it); a `CommandError` (what other
packages' commands raise for their users' mistakes: a manifest, a run that cannot finish) is printed as
it is worded. Anything else is a bug: the line says to rerun with WEIR_DEBUG=1 for the traceback.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakecore.errors import LakecoreError


class CommandError(Exception):
    """A command cannot do what it was asked, worded for its user: each line of the message says what is
    wrong and what to do (several lines when there are several mistakes)."""


@dataclass(frozen=True)
class CliError:
    kind: str           # the exception's class name
    message: str        # one line, ending with what to do
    retryable: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"error": {"type": self.kind, "message": self.message, "retryable": self.retryable}}


# the optional modules the code imports -> the extra of pyproject.toml that installs them
EXTRA_OF = {"kazoo": "zookeeper", "s3fs": "s3", "pyspark": "spark", "yaml": "operator",
            "croniter": "operator", "kopf": "operator", "kubernetes": "operator", "urllib3": "operator",
            "jsonschema": "operator", "prometheus_client": "operator", "fastavro": "publish",
            "pyroaring": "publish", "pyiceberg": "catalog", "sqlalchemy": "catalog",
            "confluent_kafka": "kafka"}


def missing_extra(exc: BaseException) -> tuple[str, str] | None:
    """(module, extra) when `exc` is, or was raised from, the import of a module an extra installs (fsspec
    says "Install s3fs to access S3" from the ModuleNotFoundError)."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            return None
        if isinstance(seen, ModuleNotFoundError) and seen.name:
            top = seen.name.split(".")[0]
            if top in EXTRA_OF:
                return top, EXTRA_OF[top]
        seen = seen.__cause__ or seen.__context__
    return None


def one_line(text: str) -> str:
    return " ".join(text.split())


_PLACEHOLDER = re.compile(r"(`weir [^`]*?)\bTABLE\b")


def with_table(message: str, uri: str | None) -> str:
    """Fill in the table URI of commands a message names where the raising layer did not know it."""
    return _PLACEHOLDER.sub(lambda m: f"{m.group(1)}{uri}", message) if uri else message


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return one_line(text.splitlines()[0] if text else type(exc).__name__)


_QUOTED = re.compile(r"'([^']+)'")


def _missing_path(exc: FileNotFoundError) -> str | None:
    """The path a FileNotFoundError is about: its filename, or the first quoted path of Arrow's message."""
    if exc.filename:
        return str(exc.filename)
    found = _QUOTED.search(str(exc))
    return found.group(1) if found else None


def _in_table(path: str | None, uri: str) -> bool:
    """Whether a missing path is one of the table's own files (unknown: assume it is, the safe reading);
    a missing output folder or input file is not."""
    if path is None:
        return True
    if "://" not in uri or uri.startswith("file://"):
        root = os.path.abspath(uri.removeprefix("file://"))
        return os.path.abspath(path.removeprefix("file://")).startswith(root.rstrip("/") + "/") or \
            os.path.abspath(path) == root
    return uri.split("://", 1)[1].rstrip("/") in path


def describe(exc: BaseException, uri: str | None = None) -> CliError:
    """The one-line error for a command that failed with `exc` (on table `uri`, if it had one)."""
    kind = type(exc).__name__
    check = f"`weir table check {uri}` lists what is missing or damaged" if uri else \
        "`weir table check URI` lists what is missing or damaged"
    if isinstance(exc, LakecoreError):
        return CliError(kind, with_table(one_line(str(exc)), uri), exc.retryable)
    if isinstance(exc, CommandError):
        return CliError(kind, "\n".join(line.rstrip() for line in str(exc).splitlines() if line.strip()))
    if isinstance(exc, ImportError) and (extra := missing_extra(exc)) is not None:
        module, name = extra
        return CliError(kind, f"this needs the Python module {module!r}, which weir's `{name}` extra "
                              f"installs and this installation lacks; install it: pip install 'weir[{name}]'")
    if isinstance(exc, PermissionError):
        where = exc.filename or _first_line(exc)
        return CliError(kind, f"permission denied: {where}; give this user access to it (read for "
                              "reads, write for writes and table services) or run as a user that has it")
    if isinstance(exc, FileNotFoundError):
        where = exc.filename or _first_line(exc)
        if uri is not None and _in_table(_missing_path(exc), uri):
            return CliError(kind, f"a file the table needs is missing ({where}); {check}: restore it "
                                  "from a backup (a lost table.json or instant file: `weir table repair`)")
        return CliError(kind, f"no such file or folder: {_missing_path(exc) or where}; check the path")
    if isinstance(exc, (IsADirectoryError, NotADirectoryError)):
        return CliError(kind, f"{exc.strerror}: {exc.filename}; check the path")
    if isinstance(exc, OSError):
        return CliError(kind, f"{_first_line(exc)}; check the path, the disk and the storage credentials, "
                              "then retry", retryable=True)
    if type(exc).__module__.startswith("botocore."):   # s3fs lets some of botocore's errors through
        if "Credential" in kind:
            return CliError(kind, f"no usable S3 credentials ({_first_line(exc)}): set AWS_ACCESS_KEY_ID and "
                                  "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE; AWS_ENDPOINT_URL for an "
                                  "S3-compatible store), then retry")
        return CliError(kind, f"the object store failed the request ({_first_line(exc)}); check the "
                              "endpoint (AWS_ENDPOINT_URL), the network and the credentials, then retry",
                        retryable=True)
    if isinstance(exc, pa.ArrowException):
        return CliError(kind, f"a file could not be read as Parquet ({_first_line(exc)}); a data file of "
                              f"the table is damaged: {check}, then restore it from a backup")
    return CliError(kind, f"unexpected {kind}: {_first_line(exc)}; rerun with WEIR_DEBUG=1 (or "
                          "`weir --debug ...`) for the traceback and report it")
