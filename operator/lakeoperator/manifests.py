"""Reading manifest files for `weir run -f`: YAML documents in, Weir's resources out, every mistake named.

What `kubectl apply -f` would refuse is refused here too, all at once and before anything is applied:
YAML that does not parse, a document that is not an object, a kind or apiVersion the API does not serve
(`no matches for kind "LakeWritr" in version "weir.dev/v1alpha1"`), a missing metadata.name, the same
object twice. Each mistake is one line: file, document number, line and column, what is expected.

Objects of other APIs are the cluster's business (a Secret or ConfigMap beside the Weir objects is
legitimate there): they are skipped with a note. What looks like Weir's but is not served — a kind of
group weir.dev that does not exist, a Weir kind under another group, a group named like Weir's, a kind
one typo away from Weir's — is a mistake, never skipped silently.

Must not: apply anything or validate specs (the reconcile core reports an invalid spec in status, as on a
cluster where the API server stored it).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lakecore.cli.errors import CommandError

GROUP = "weir.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KINDS = ("LakeTable", "LakeWriter", "TableService")
SERVED = f"{API_VERSION} serves LakeTable, LakeWriter and TableService"
Key = tuple[str, str, str]   # kind, namespace, name


class ManifestError(CommandError):
    """The manifests cannot be read as Weir resources; nothing was applied."""

    @classmethod
    def of(cls, problems: Sequence[str], where: str | Path) -> ManifestError:
        if len(problems) == 1:
            return cls(f"{problems[0]}; nothing was applied")
        return cls("\n".join([f"{len(problems)} mistakes in the manifests of {where}; nothing was applied:",
                              *(f"  {p}" for p in problems)]))


@dataclass(frozen=True)
class Origin:
    """Where an object was read: its file, its document's number in the file, the line it starts on."""

    file: Path
    document: int
    line: int

    def at(self, line: int | None = None, column: int | None = None) -> str:
        spot = f"{self.file}:{line or self.line}" + (f":{column}" if column else "")
        return f"{spot}: document {self.document}"


@dataclass(frozen=True)
class Manifests:
    """What `read_manifests` found: the Weir objects (namespace defaulted), where each was read, and a note
    for each object of another API that is skipped."""

    resources: tuple[dict[str, Any], ...]
    origins: Mapping[Key, Origin] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def read_manifests(path: str | Path) -> Manifests:
    """Every Weir object in a manifest file, or in the *.yaml / *.yml files of a directory (sorted by
    name). Raises ManifestError naming every mistake found."""
    root = Path(path)
    if root.is_file():
        files = [root]
    elif root.is_dir():
        files = sorted([*root.glob("*.yaml"), *root.glob("*.yml")])
        if not files:
            raise ManifestError(f"no *.yaml files in {root}; point -f at a directory of LakeTable, "
                                "LakeWriter and TableService manifests (e.g. crds/examples/local)")
    else:
        raise ManifestError(f"{root}: no such file or directory; point -f at a manifest file or a "
                            "directory of them (e.g. crds/examples/local)")
    found: list[dict[str, Any]] = []
    origins: dict[Key, Origin] = {}
    notes: list[str] = []
    problems: list[str] = []
    for file in files:
        for origin, node, doc in _documents(file, problems):
            verdict = judge(doc, origin, node)
            if isinstance(verdict, Note):
                notes.append(verdict.text)
            elif isinstance(verdict, Problem):
                problems.append(verdict.text)
            else:
                key = (str(doc["kind"]), str(doc["metadata"]["namespace"]), str(doc["metadata"]["name"]))
                if key in origins:
                    problems.append(f"{origin.at()}: {key[0]} {key[1]}/{key[2]} is already defined at "
                                    f"{origins[key].at()}; define each object once (rename one)")
                    continue
                origins[key] = origin
                found.append(doc)
    if not found and not problems:
        problems.append(f"{root} holds no LakeTable, LakeWriter or TableService ({API_VERSION}); "
                        "nothing to run")
    if problems:
        raise ManifestError.of(problems, root)
    return Manifests(tuple(found), origins, tuple(notes))


def load_manifests(path: str | Path) -> list[dict[str, Any]]:
    """The Weir objects of `read_manifests`, alone."""
    return list(read_manifests(path).resources)


def _documents(file: Path, problems: list[str]) -> list[tuple[Origin, yaml.Node, Any]]:
    """(origin, node, value) of each non-empty document of a file; a YAML error ends the file's reading
    (what follows it cannot be trusted) and is added to `problems`."""
    out: list[tuple[Origin, yaml.Node, Any]] = []
    try:
        text = file.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(f"{file}: cannot be read ({exc}); fix the file or move it out of the directory")
        return out
    loader = yaml.SafeLoader(text)
    number = 0
    try:
        while loader.check_node():
            number += 1
            node = loader.get_node()
            if node is None:
                continue
            value = loader.construct_document(node)
            if value is not None:
                out.append((Origin(file, number, node.start_mark.line + 1), node, value))
    except yaml.MarkedYAMLError as exc:
        problems.append(_yaml_problem(file, max(number, 1), exc))
    except yaml.YAMLError as exc:
        problems.append(f"{file}: document {max(number, 1)} is not valid YAML ({exc}); fix the file")
    finally:
        loader.dispose()
    return out


def _yaml_problem(file: Path, document: int, exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    spot = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(file)
    context = ""
    if exc.context:
        where = f" from line {exc.context_mark.line + 1}" if exc.context_mark is not None else ""
        context = f" ({exc.context}{where})"
    problem = " ".join(str(exc.problem or "a syntax error").split())
    return f"{spot}: document {document} is not valid YAML: {problem}{context}; fix the file"


# -- judging one document ----------------------------------------------------------------------


@dataclass(frozen=True)
class Note:
    text: str


@dataclass(frozen=True)
class Problem:
    text: str


def judge(doc: Any, origin: Origin, node: yaml.Node | None = None) -> dict[str, Any] | Note | Problem:
    """One document: a Weir object to run (namespace defaulted), a Note (another API's object, skipped)
    or a Problem (a mistake). `node`: the document's YAML node, for the line and column of a field."""
    if not isinstance(doc, dict):
        what = "a list" if isinstance(doc, list) else f"the {type(doc).__name__} {doc!r:.40}"
        return Problem(f"{origin.at()} is {what}, not a Kubernetes object (a mapping with apiVersion, kind "
                       "and metadata); fix the file")
    api, kind = doc.get("apiVersion"), doc.get("kind")
    missing = [k for k, v in (("apiVersion", api), ("kind", kind)) if not isinstance(v, str) or not v]
    if missing:
        return Problem(f"{origin.at()}: {' and '.join(missing)} not set; every object needs apiVersion and "
                       f"kind ({SERVED})")
    assert isinstance(api, str) and isinstance(kind, str)
    group, _, version = api.rpartition("/")
    spot = origin.at(*_position(node, "kind"))
    api_spot = origin.at(*_position(node, "apiVersion"))
    no_match = f'no matches for kind "{kind}" in version "{api}"'
    if group == GROUP:
        if kind not in KINDS:
            return Problem(f"{spot}: {no_match}{_did_you_mean(kind)}; {SERVED}")
        if version != VERSION:
            return Problem(f"{api_spot}: {no_match}; use apiVersion: {API_VERSION}")
    elif kind in KINDS or "weir" in group.lower():
        return Problem(f"{api_spot}: {no_match}; use apiVersion: {API_VERSION} (Weir's API: LakeTable, "
                       "LakeWriter and TableService)")
    elif suggestion := _did_you_mean(kind):
        return Problem(f"{spot}: {no_match}{suggestion} (apiVersion: {API_VERSION}); {SERVED}")
    else:
        meta = doc.get("metadata")
        label = f"{kind} {meta['name']}" if isinstance(meta, dict) and meta.get("name") else kind
        secret = "; a Secret the Weir objects refer to is read from --secrets-dir DIR/<secret>/<key>" \
            if kind == "Secret" else ""
        return Note(f"{origin.at()}: {label} ({api}) skipped: weir run runs only Weir's objects, this one is "
                    f"for the cluster{secret}")
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta.get("name"):
        return Problem(f"{origin.at(*_position(node, 'metadata'))}: {kind} has no metadata.name; give it one")
    namespace = meta.get("namespace")
    if namespace is not None and (not isinstance(namespace, str) or not namespace):
        return Problem(f"{origin.at(*_position(node, 'metadata'))}: {kind} {meta['name']}: "
                       "metadata.namespace must be a name; fix it or leave it out (default)")
    meta.setdefault("namespace", "default")
    return doc


def _did_you_mean(kind: str) -> str:
    close = difflib.get_close_matches(kind, KINDS, n=1, cutoff=0.8) or \
        [k for k in KINDS if k.lower() == kind.lower()]
    return f" (did you mean {close[0]}?)" if close else ""


def _position(node: yaml.Node | None, key: str) -> tuple[int | None, int | None]:
    """The 1-based line and column of `key`'s value in a mapping node (None, None when not found)."""
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v.start_mark.line + 1, v.start_mark.column + 1
    return None, None
