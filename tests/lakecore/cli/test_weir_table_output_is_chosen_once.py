"""`weir table` chooses its output once: a text and a JSON output object with one method per result kind,
so no command decides how to print (no `if as_json` in a command body, no printing of its own), and
every command's --json output, in every state of its result, is one JSON document."""

from __future__ import annotations

import ast
import inspect
import json
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from lakecore.cli.main import app, table_app

PRINTERS = {"emit_json", "print", "write", "echo", "show_table"}


def _commands() -> list[tuple[str, object]]:
    found = []
    for command in table_app.registered_commands:
        fn = command.callback
        while hasattr(fn, "__wrapped__"):
            fn = fn.__wrapped__
        found.append((command.name or fn.__name__, fn))
    return found


@pytest.mark.parametrize(("name", "fn"), _commands(), ids=[n for n, _ in _commands()])
def test_no_command_decides_how_to_print(name: str, fn: object) -> None:
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))  # type: ignore[arg-type]
    branches = [ast.unparse(n.test) for n in ast.walk(tree) if isinstance(n, ast.If | ast.IfExp)
                and "as_json" in {x.id for x in ast.walk(n.test) if isinstance(x, ast.Name)}]
    printing = [ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)
                and isinstance(n.func, ast.Attribute | ast.Name)
                and (n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id) in PRINTERS
                and not ast.unparse(n.func).startswith("write_output")]
    assert (branches, printing) == ([], [])


def test_the_text_and_json_outputs_show_every_result_kind() -> None:
    from lakecore.cli.json_output import JsonOutput
    from lakecore.cli.output import Output
    from lakecore.cli.text_output import TextOutput

    kinds = {n for n, v in vars(Output).items() if callable(v) and not n.startswith("_")}
    assert {"compaction", "clustering", "clean", "archival", "rollback", "restore", "savepoint",
            "written", "timeline", "description", "check", "repair", "error"} <= kinds
    for output in (TextOutput, JsonOutput):
        assert kinds <= {n for n in dir(output) if callable(getattr(output, n))}, output


def weir(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_every_maintenance_state_prints_one_json_document(tmp_path) -> None:
    uri = str(tmp_path / "t")
    assert weir("table", "create", uri, "--schema", "id:int64,ts:int64", "--record-key", "id",
                "--ordering-field", "ts", "--buckets", "1")[0] == 0

    def upsert(n: int) -> str:
        src = tmp_path / f"in{n}.parquet"
        pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64()), "ts": pa.array([n, n], pa.int64())}),
                       src)
        return json.loads(weir("table", "upsert", uri, "-i", str(src), "--json")[1])["instant"]

    for n in range(4):
        upsert(n)
    dry = True
    runs: list[tuple[tuple[str, ...], bool]] = [
        (("compact", "--dry-run"), dry), (("compact",), not dry), (("compact",), not dry),  # nothing left
        (("cluster", "--strategy", "all", "--dry-run"), dry), (("cluster", "--strategy", "all"), not dry),
        (("clean", "--policy", "keep_latest_file_versions", "--retain", "1"), dry),  # unless --run
        (("clean", "--policy", "keep_latest_file_versions", "--retain", "1", "--run"), not dry),
        (("clean",), dry),                                                           # nothing to delete
        (("archive", "--min-instants", "1", "--max-instants", "2", "--dry-run"), dry),
        (("archive", "--min-instants", "1", "--max-instants", "2"), not dry),
        (("archive",), not dry),                                                     # nothing due
    ]
    each_prints_one_document(uri, runs)
    point = upsert(10)
    each_prints_one_document(uri, [(("savepoint", point, "--dry-run"), dry), (("savepoint", point), not dry),
                                   (("restore", point), dry),                   # a dry run unless --run
                                   (("rollback", upsert(11)), dry)])            # the plan unless --yes


def each_prints_one_document(uri: str, runs: list[tuple[tuple[str, ...], bool]]) -> None:
    for args, dry_run in runs:
        if dry_run:  # the text output of the same state first: it changes nothing
            code, text = weir("table", args[0], uri, *args[1:])
            assert code == 0 and text.strip(), (args, text)
        code, out = weir("table", args[0], uri, *args[1:], "--json")
        assert code == 0, (args, out)
        assert isinstance(json.loads(out), dict), (args, out)
