"""A writer whose input is bad ends Failed/BadInput with the job's own error — the column, the count, what
to do — from its driver's termination message, on the terminal, in its status and in its Event (not only
in the driver's log); `weir run` lets the good writer finish first, then ends 1 naming each writer that
cannot go on: a null record key, a column of the wrong type, and a spec without a source. Started again
once the input is fixed (null keys filled) and a manifest is (another input), it runs the failed writers
again and leaves the finished one be."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lakecore import Table
from tests.lakeoperator.local_run import weir_process

pytestmark = [pytest.mark.spark, pytest.mark.slow]
NULL_KEY = "NullKey: 2 row(s) have a null record key 'id'; every row needs one: drop or fill them"
WRONG_TYPE = "SchemaMismatch: column 'ts' has type string but the table stores int64; cast it to int64 " \
             "before writing"
REMEDY = "the input or the table's configuration is wrong and retrying does not help: fix it, then change " \
         "spec.restartNonce (with `weir run`: or start it again)"
TABLE = {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeTable", "metadata": {"name": "people"},
         "spec": {"location": "lake/people", "recordKey": ["id"], "orderingField": "ts", "buckets": 2,
                  "schema": [{"name": "id", "type": "int64"}, {"name": "name", "type": "string"},
                             {"name": "ts", "type": "int64"}]}}


def writer(name: str, source: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"tableRef": {"name": "people"}, "mode": "batch",
                            "spark": {"mode": "local", "localCores": 1, "driver": {"memory": "512m"}},
                            # should two writers rerun together conflict, they retry soon
                            "restartPolicy": {"backoff": {"initialSeconds": 1, "maxSeconds": 2}}}
    if source:
        spec["source"] = {"format": "parquet", "path": f"input/{name}"}
    return {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeWriter", "metadata": {"name": name}, "spec": spec}


def inputs(work: Path) -> None:
    tables = {"good": pa.table({"id": [1, 2, 3], "name": ["ada", "bo", "cy"], "ts": [1, 1, 1]}),
              "null-key": pa.table({"id": pa.array([4, None, 5, None], pa.int64()),
                                    "name": ["d", "e", "f", "g"], "ts": [1, 1, 1, 1]}),
              "wrong-type": pa.table({"id": [6], "name": ["h"], "ts": ["yesterday"]})}
    for name, data in tables.items():
        (work / "input" / name).mkdir(parents=True)
        pq.write_table(data, work / "input" / name / "part-0.parquet")


def status(work: Path, name: str) -> dict[str, Any]:
    return json.loads((work / ".weir-run" / "resources" / "LakeWriter" / f"default.{name}.json").read_text())


def weir_run(work: Path) -> subprocess.CompletedProcess[str]:
    return weir_process(work, "run", "-f", "m", "--timeout", "400")


def test_bad_input_is_told_by_the_jobs_own_error_and_the_good_writer_finishes(tmp_path: Path) -> None:
    inputs(tmp_path)
    (tmp_path / "m").mkdir()
    writers = [writer(n) for n in ("good", "null-key", "wrong-type")]
    docs = [TABLE, *writers, writer("no-source", source=False)]
    (tmp_path / "m" / "all.yaml").write_text("---\n".join(json.dumps(d) + "\n" for d in docs))  # JSON is YAML
    ran = weir_run(tmp_path)
    out, err = ran.stdout, ran.stderr
    assert ran.returncode == 1, out[-3000:] + err[-3000:]

    assert "LakeWriter/good: Succeeded attempts=1" in out
    written = Table.open(str(tmp_path / "lake" / "people")).read()
    assert sorted(written.column("id").to_pylist()) == [1, 2, 3]
    for name, cause in (("null-key", NULL_KEY), ("wrong-type", WRONG_TYPE)):
        said = f"the driver ended with exit code 2 (Error): {cause}; {REMEDY}"
        assert f"LakeWriter/{name}: Failed attempts=1\n  BadInput: {said}\n" in out, out
        assert f"  LakeWriter/{name} (m/all.yaml:" in err and f"BadInput: {said}" in err
        kept = status(tmp_path, name)
        conditions = {c["type"]: c for c in kept["body"]["status"]["conditions"]}
        assert conditions["Ready"]["message"] == said and conditions["Stalled"]["message"] == said
        event = kept["events"][-1]
        assert (event["type"], event["reason"], event["message"]) == ("Warning", "BadInput", said)
    assert "  LakeWriter/no-source (m/all.yaml:" in err
    assert "InvalidSpec: spec.source: needs exactly one" in err
    assert err.startswith("error: 3 resources cannot go on until their manifests change (the others ran to "
                          "completion):"), err
    assert "LakeWriter/good" not in err
    assert err.rstrip().endswith("A writer that ended Failed or Aborted runs again when `weir run` is "
                                 "started again (fix its input first), or when its manifest changes."), err

    # the null keys filled in the input; the wrong type fixed by reading another input (ids 2, 4, 5 and 8
    # are in one bucket, 9 in the other, so the two writers rerun together do not conflict)
    pq.write_table(pa.table({"id": [4, 2, 5, 8], "name": ["d", "e", "f", "g"], "ts": [1, 1, 1, 1]}),
                   tmp_path / "input" / "null-key" / "part-0.parquet")
    (tmp_path / "input" / "fixed").mkdir()
    pq.write_table(pa.table({"id": [9], "name": ["h"], "ts": [2]}), tmp_path / "input" / "fixed" / "p.parq")
    fixed = writer("wrong-type")
    fixed["spec"]["source"]["path"] = "input/fixed"
    docs = [TABLE, writer("good"), writer("null-key"), fixed, writer("no-source", source=False)]
    (tmp_path / "m" / "all.yaml").write_text("---\n".join(json.dumps(d) + "\n" for d in docs))
    again = weir_run(tmp_path)
    assert again.returncode == 1, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stderr.startswith("note: LakeWriter good succeeded in an earlier run: a batch writer (or "
                                   "a stream with availableNow) writes its input once"), again.stderr
    told = again.stderr.split("\n", 1)[1]
    assert told.startswith("error: 1 resource cannot go on until its manifest changes (the others ran to "
                           "completion):\n  LakeWriter/no-source (m/all.yaml:"), again.stderr
    assert "LakeWriter/null-key: it ended Failed (BadInput) in an earlier run: trying again (weir run was " \
           "started again)" in again.stdout
    for name in ("null-key", "wrong-type"):
        assert f"LakeWriter/{name}: Succeeded" in again.stdout, again.stdout
    assert status(tmp_path, "good")["body"]["status"]["attempts"]["total"] == 1    # not run again
    assert status(tmp_path, "null-key")["body"]["status"]["attempts"]["total"] == 2
    written = Table.open(str(tmp_path / "lake" / "people")).read()
    assert sorted(written.column("id").to_pylist()) == [1, 2, 3, 4, 5, 8, 9]
