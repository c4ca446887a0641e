"""The request loop a reader process runs inside its own venv: `python serve.py ENGINE`.

Runs with that venv's packages only (standard library, pyarrow and the engine; never the project's code):
imports `engine_<ENGINE>.py` from this directory, calls its `start()` once, then answers one JSON request
per line on stdin with one JSON line: `{"ok": true, "rows": N}` after writing the result as an Arrow IPC
file at the request's `out`, or `{"ok": false, "error": ..., "kind": ...}`. Replies go to the original
stdout, which is then pointed at stderr: whatever the engine or its JVM prints cannot corrupt them.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from typing import Any

import pyarrow as pa


def write_arrow(table: pa.Table, path: str) -> None:
    with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def main(engine_name: str) -> None:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def reply(message: dict[str, Any]) -> None:
        replies.write(json.dumps(message) + "\n")

    started = time.monotonic()
    engine = importlib.import_module(f"engine_{engine_name}")
    versions = engine.start()
    reply({"ready": True, "versions": versions, "seconds": time.monotonic() - started})
    for line in sys.stdin:
        request = json.loads(line)
        started = time.monotonic()
        try:
            table = getattr(engine, request.pop("op"))(**request.pop("args"))
            write_arrow(table, request["out"])
            reply({"ok": True, "rows": table.num_rows, "seconds": time.monotonic() - started})
        except Exception as error:
            traceback.print_exc()
            reply({"ok": False, "kind": type(error).__name__, "error": str(error).strip()})
    engine.stop()


if __name__ == "__main__":
    main(sys.argv[1])
