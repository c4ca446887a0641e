"""`weir run` says at once why a resource cannot go on (the condition's reason and message under its
progress line) and ends once nothing is going any more: exit 1 naming every resource that waits for a
change to its manifest (an invalid spec, a reference to a missing table, a writer of an invalid table),
each with its file and line; exit 0 when everything got where its spec says, a paused resource left as
it is. No Spark runs here: none of these writers can submit a driver."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from lakeoperator.cli import app
from tests.lakeoperator.local_run import TABLE, weir_run

WRITER = """apiVersion: weir.dev/v1alpha1
kind: LakeWriter
metadata:
  name: {name}
spec:
  tableRef: {{name: {table}}}
  mode: batch
"""
SOURCE = "  source: {format: parquet, path: input}\n"
TIMEOUT = "20"   # a run that never ends (what these folders did) fails the test instead of hanging it


def run(work: Path, *files: tuple[str, str]) -> tuple[int, str, str]:
    (work / "input").mkdir()   # the writers' source is there (`weir run` refuses a path that is not)
    return weir_run(work, dict(files), "--timeout", TIMEOUT)


def writer(name: str, table: str = "people", extra: str = SOURCE) -> str:
    return WRITER.format(name=name, table=table) + extra


def test_invalid_writers_are_named_with_their_reason_and_the_run_ends_1(tmp_path: Path) -> None:
    writers = [writer("no-source", extra=""), writer("bad-operation", extra=f"{SOURCE}  operation: upsurt\n"),
               writer("no-table", table="peeple")]
    code, out, err = run(tmp_path, ("table.yaml", TABLE), ("writers.yaml", "---\n".join(writers)))
    assert code == 1, out + err
    assert "LakeTable/people: Ready" in out
    assert "LakeWriter/no-source: InvalidSpec\n  InvalidSpec: spec.source: needs exactly one of path" in out
    assert "LakeWriter/bad-operation: InvalidSpec\n  InvalidSpec: spec.operation: 'upsurt' is not one " \
           "of" in out
    assert "LakeWriter/no-table: InvalidSpec\n  InvalidSpec: tableRef.name: no LakeTable 'peeple' in " \
           "namespace default (did you mean 'people'?); create it, or fix the reference" in out
    lines = [line for line in err.splitlines() if not line.startswith("note: ")]   # how it runs here
    assert lines[0] == "error: 3 resources cannot go on until their manifests change (the others ran to " \
                       "completion):", err
    assert sorted(line.split(":")[0] for line in lines[1:]) == [
        "  LakeWriter/bad-operation (m/writers.yaml", "  LakeWriter/no-source (m/writers.yaml",
        "  LakeWriter/no-table (m/writers.yaml"]
    assert "  LakeWriter/no-table (m/writers.yaml:19): InvalidSpec: tableRef.name: no LakeTable " \
           "'peeple'" in err
    assert "not done after" not in err


def test_a_folder_with_only_an_invalid_table_ends_1_with_its_reason(tmp_path: Path) -> None:
    code, out, err = run(tmp_path, ("table.yaml", TABLE.replace("type: string", "type: strin")))
    assert code == 1, out + err
    assert "LakeTable/people: InvalidSpec\n  InvalidSpec: spec.schema[1].type: 'strin' is not a column " \
           "type (did you mean string?); use one of" in out
    assert "error: 1 resource cannot go on until its manifest changes:\n  LakeTable/people " \
           "(m/table.yaml:1): InvalidSpec: spec.schema[1].type: 'strin'" in err


def test_a_writer_of_an_invalid_table_is_named_with_the_table(tmp_path: Path) -> None:
    code, out, err = run(tmp_path, ("table.yaml", TABLE.replace("recordKey: [id]", "recordKey: [key]")),
                         ("writer.yaml", writer("load")))
    assert code == 1, out + err
    assert "error: 2 resources cannot go on until their manifests change:" in err
    assert "  LakeWriter/load (m/writer.yaml:1): InvalidSpec: tableRef.name: LakeTable 'people' has an " \
           "invalid spec (spec.recordKey" in err
    assert "  LakeTable/people (m/table.yaml:1): InvalidSpec: spec.recordKey" in err


def test_a_valid_table_alone_is_ready_and_the_run_ends_0(tmp_path: Path) -> None:
    code, out, err = run(tmp_path, ("table.yaml", TABLE))
    assert code == 0, out + err
    assert out == "LakeTable/people: Ready\n" and err == ""
    assert (tmp_path / "lake" / "people" / ".weir").is_dir()


def test_a_paused_writer_is_left_as_it_is_and_the_run_ends_0(tmp_path: Path) -> None:
    paused = writer("load").replace("  name: load\n",
                                    "  name: load\n  annotations: {weir.dev/paused: \"true\"}\n")
    code, out, err = run(tmp_path, ("table.yaml", TABLE), ("writer.yaml", paused))
    assert code == 0, out + err
    assert "LakeWriter/load: Paused\n  Paused: annotation weir.dev/paused is \"true\"; remove it to resume " \
           "reconciliation" in out


def test_weir_get_shows_an_invalid_writers_reason_as_its_phase_like_the_run(tmp_path: Path) -> None:
    code, out, _ = run(tmp_path, ("table.yaml", TABLE), ("writers.yaml", writer("no-source", extra="")))
    assert code == 1 and "LakeWriter/no-source: InvalidSpec" in out
    shown = CliRunner().invoke(app, ["get", "lw", "--state", str(tmp_path / ".weir-run")])
    assert shown.exit_code == 0, shown.stdout + shown.stderr
    header, line = shown.stdout.splitlines()[:2]
    assert line.split()[0] == "no-source", shown.stdout
    assert line.split()[header.split().index("PHASE")] == "InvalidSpec", shown.stdout   # not Pending
