"""`weir run -f` refuses a manifest mistake before anything is applied, like `kubectl apply`: a misspelled
kind or apiVersion, YAML that does not parse, a document that is not an object, an object without
kind, apiVersion or name, the same object twice. Each mistake is one line with file, document, line and
column and what is expected; the exit code is 1 and no state directory is written. Objects of other APIs
(a Secret, a ConfigMap: the cluster's) are skipped with a note, and the Weir objects beside them run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lakeoperator.local_run import TABLE, weir_run

MISTAKES = [
    pytest.param(TABLE.replace("kind: LakeTable", "kind: LakeTabel"),
                 'm/a.yaml:2:7: document 1: no matches for kind "LakeTabel" in version "weir.dev/v1alpha1" '
                 "(did you mean LakeTable?); weir.dev/v1alpha1 serves LakeTable, LakeWriter and TableService",
                 id="misspelled kind"),
    pytest.param(TABLE.replace("weir.dev/v1alpha1", "weir.dev/v1"),
                 'm/a.yaml:1:13: document 1: no matches for kind "LakeTable" in version "weir.dev/v1"; '
                 "use apiVersion: weir.dev/v1alpha1", id="unserved version"),
    pytest.param(TABLE.replace("weir.dev/v1alpha1", "weir.io/v1alpha1"),
                 'm/a.yaml:1:13: document 1: no matches for kind "LakeTable" in version "weir.io/v1alpha1"; '
                 "use apiVersion: weir.dev/v1alpha1", id="wrong group"),
    pytest.param(TABLE.replace("weir.dev/v1alpha1", "v1").replace("LakeTable", "LakeTabel"),
                 'm/a.yaml:2:7: document 1: no matches for kind "LakeTabel" in version "v1" (did you mean '
                 "LakeTable?)", id="misspelled kind in another group"),
    pytest.param(TABLE.replace("    - {name: id, type: int64}", "    - {name: id, type: int64"),
                 "m/a.yaml:9:7: document 1 is not valid YAML: expected ',' or '}', but got '{' (while "
                 "parsing a flow mapping from line 8); fix the file; nothing was applied",
                 id="yaml syntax"),
    pytest.param("- a\n- list\n", "m/a.yaml:1: document 1 is a list, not a Kubernetes object",
                 id="not an object"),
    pytest.param(TABLE.replace("apiVersion: weir.dev/v1alpha1\n", ""),
                 "m/a.yaml:1: document 1: apiVersion not set; every object needs apiVersion and kind",
                 id="no apiVersion"),
    pytest.param(TABLE.replace("  name: people\n", "  labels: {}\n"),
                 "m/a.yaml:4:3: document 1: LakeTable has no metadata.name; give it one", id="no name"),
    pytest.param(f"{TABLE}---\n{TABLE}",
                 "m/a.yaml:12: document 2: LakeTable default/people is already defined at m/a.yaml:1: "
                 "document 1; define each object once", id="twice"),
]


@pytest.mark.parametrize(("text", "expected"), MISTAKES)
def test_a_manifest_mistake_is_one_line_and_nothing_is_applied(tmp_path: Path, text: str,
                                                               expected: str) -> None:
    work = tmp_path
    code, out, err = weir_run(work, {"a.yaml": text})
    assert code == 1, out + err
    assert err.startswith(f"error: {expected}"), err
    assert err.count("\n") == 1 and "unexpected" not in err and "report it" not in err
    assert not (work / ".weir-run").exists() and not (work / "lake").exists()


def test_every_mistake_of_a_folder_is_listed_and_none_applied(tmp_path: Path) -> None:
    work = tmp_path
    code, _, err = weir_run(work, {"a.yaml": TABLE.replace("LakeTable", "LakeWritr"),
                                   "b.yaml": "kind: [unclosed\n", "c.yaml": TABLE})
    assert code == 1
    lines = err.splitlines()
    assert lines[0] == "error: 2 mistakes in the manifests of m; nothing was applied:", err
    assert lines[1].startswith('  m/a.yaml:2:7: document 1: no matches for kind "LakeWritr"')
    assert lines[2].startswith("  m/b.yaml:2:1: document 1 is not valid YAML")
    assert not (work / ".weir-run").exists()


def test_objects_of_other_apis_are_skipped_with_a_note(tmp_path: Path) -> None:
    other = ("apiVersion: v1\nkind: Secret\nmetadata: {name: s3-credentials}\n---\n"
             "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n")
    code, out, err = weir_run(tmp_path, {"a.yaml": TABLE, "b.yaml": other})
    assert code == 0, out + err
    assert "note: m/b.yaml:1: document 1: Secret s3-credentials (v1) skipped: weir run runs only Weir's " \
           "objects, this one is for the cluster; a Secret the Weir objects refer to is read from " \
           "--secrets-dir DIR/<secret>/<key>" in err
    assert "note: m/b.yaml:5: document 2: ConfigMap settings (v1) skipped" in err
    assert "LakeTable/people: Ready" in out


def test_a_folder_without_weir_objects_is_refused(tmp_path: Path) -> None:
    code, _, err = weir_run(tmp_path, {"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"})
    assert code == 1
    assert "error: m holds no LakeTable, LakeWriter or TableService (weir.dev/v1alpha1); nothing to " \
           "run" in err


WRITER = """apiVersion: weir.dev/v1alpha1
kind: LakeWriter
metadata:
  name: people-in
spec:
  tableRef: {name: people}
  mode: batch
  source: {format: csv, path: PATH}
"""


def test_a_writer_whose_input_files_are_not_there_is_refused_with_where_they_are(tmp_path: Path) -> None:
    # a copied example: its paths were written relative to the folder it came from
    work = tmp_path
    (work / "m" / "input" / "people").mkdir(parents=True)
    (work / "m" / "input" / "people" / "a.csv").write_text("id,name\n1,a\n")
    writer = WRITER.replace("PATH", "examples/m/input/people")
    code, _, err = weir_run(work, {"a.yaml": TABLE, "b.yaml": writer})
    assert code == 1
    assert err.startswith("error: m/b.yaml:1: document 1: LakeWriter people-in: spec.source.path "
                          f"'examples/m/input/people' does not exist (relative paths are taken from where "
                          f"`weir run` runs: {work}); it is at 'm/input/people' from here: write that (or an "
                          "absolute path); nothing was applied"), err
    assert not (work / ".weir-run").exists() and not (work / "lake").exists()


@pytest.mark.parametrize("path", ["/nowhere/at/all", "file:///nowhere/*.csv", "in/*.json"])
def test_missing_files_glob_or_absolute_are_refused(tmp_path: Path, path: str) -> None:
    code, _, err = weir_run(tmp_path, {"a.yaml": TABLE, "b.yaml": WRITER.replace("PATH", f"'{path}'")})
    assert code == 1
    what = "matches no file" if "*" in path else "does not exist"   # a pattern "did not exist" before
    assert f"spec.source.path {path!r} {what}" in err and "nothing was applied" in err, err
    assert "fix the path or run from the folder it is relative to" in err
    assert not (tmp_path / ".weir-run").exists()
