"""docs/crds.md, the reference of the custom resources, rendered from the CRDs (their source of truth).

`render_crd_reference(crds)` is pure: CRD bodies in, Markdown out, the same text for the same CRDs.
`python -m lakeoperator.dev.crd_docs [CRD_DIR] > docs/crds.md` regenerates the page from the YAML files
(default: the repository's `crds/`); a test keeps the committed page equal to the rendering.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

REGENERATE = "python -m lakeoperator.dev.crd_docs > docs/crds.md"
_KIND_ORDER = ("LakeTable", "LakeWriter", "TableService")
_LIMITS = (("minimum", "min"), ("maximum", "max"), ("minLength", "min length"), ("maxLength", "max length"),
           ("minItems", "min items"), ("maxItems", "max items"), ("maxProperties", "max entries"))


def render_crd_reference(crds: Sequence[Mapping[str, Any]]) -> str:
    """The Markdown reference of `crds` (CustomResourceDefinition bodies), kinds in API order."""
    ordered = sorted(crds, key=lambda c: _order(c["spec"]["names"]["kind"]))
    groups = sorted({c["spec"]["group"] for c in ordered})
    lines = [
        "# Custom resources",
        "",
        f"<!-- Generated from crds/*.yaml by `{REGENERATE}`; do not edit by hand. -->",
        "",
        f"Group `{', '.join(groups)}`. Every kind is namespaced, has a status subresource (written by the "
        "operator only) and belongs to the category `weir` (`kubectl get weir` lists them all). Defaults "
        "are applied by the API server (`lakeoperator.dev.crd_schema.apply_defaults` applies them the same "
        "way where there is none); rules "
        "are CEL rules the API server checks on create and, for those naming `oldSelf`, on update. The "
        "annotation `weir.dev/paused: \"true\"` pauses reconciliation of a resource; "
        "`weir.dev/managed: \"false\"` detaches it. Examples: `crds/examples/`.",
        "",
    ]
    lines += [f"- [{c['spec']['names']['kind']}](#{c['spec']['names']['kind'].lower()})" for c in ordered]
    for crd in ordered:
        lines += ["", *_render_crd(crd)]
    return "\n".join(lines) + "\n"


def _order(kind: str) -> tuple[int, str]:
    return (_KIND_ORDER.index(kind) if kind in _KIND_ORDER else len(_KIND_ORDER), kind)


def _render_crd(crd: Mapping[str, Any]) -> list[str]:
    spec = crd["spec"]
    names = spec["names"]
    out: list[str] = []
    for version in spec["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        short = ", ".join(f"`{s}`" for s in names.get("shortNames", ()))
        out += [
            f"## {names['kind']}",
            "",
            _one_line(schema.get("description", "")),
            "",
            f"`{spec['group']}/{version['name']}`, plural `{names['plural']}`, short names {short}.",
            "",
            "### Columns of `kubectl get`",
            "",
            "| Column | Field | Type |",
            "|---|---|---|",
        ]
        out += [f"| {c['name']} | `{c['jsonPath']}` | {c['type']} |"
                for c in version.get("additionalPrinterColumns", ())]
        props = schema.get("properties", {})
        for part in ("spec", "status"):
            if part not in props:
                continue
            out += ["", f"### {part}", "", "| Field | Type | Default | Description |", "|---|---|---|---|"]
            out += [_field_row(path, node, required) for path, node, required in _fields(props[part], part)]
        rules = list(_rules(props.get("spec", {}), "spec"))
        if rules:
            out += ["", "### Rules", "", "| Field | Rule | Message |", "|---|---|---|"]
            out += [f"| `{path}` | `{_cell(rule)}` | {_cell(message)} |" for path, rule, message in rules]
    return out


def _fields(node: Mapping[str, Any], path: str) -> Iterator[tuple[str, Mapping[str, Any], bool]]:
    required = set(node.get("required", ()))
    for name, prop in node.get("properties", {}).items():
        sub = f"{path}.{name}"
        yield sub, prop, name in required
        yield from _children(prop, sub)


def _children(node: Mapping[str, Any], path: str) -> Iterator[tuple[str, Mapping[str, Any], bool]]:
    if node.get("type") == "object":
        yield from _fields(node, path)
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping) and "properties" in extra:
            yield from _fields(extra, f"{path}.<key>")
    elif node.get("type") == "array" and isinstance(node.get("items"), Mapping):
        yield from _fields(node["items"], f"{path}[]")


def _type(node: Mapping[str, Any]) -> str:
    kind = str(node.get("type", "any"))
    if kind == "array" and isinstance(node.get("items"), Mapping):
        kind = f"list of {_type(node['items'])}"
        if node.get("x-kubernetes-list-type") == "map":
            kind += f" (keyed by {', '.join(node.get('x-kubernetes-list-map-keys', ()))})"
    elif kind == "object" and isinstance(node.get("additionalProperties"), Mapping):
        kind = f"map of {_type(node['additionalProperties'])}"
    if node.get("format"):
        kind += f" ({node['format']})"
    return kind


def _field_row(path: str, node: Mapping[str, Any], required: bool) -> str:
    kind = _type(node) + (", required" if required else "")
    default = f"`{_json(node['default'])}`" if "default" in node else ""
    notes = [f"{label} {node[key]}" for key, label in _LIMITS if key in node]
    if "enum" in node:
        notes.insert(0, "one of " + ", ".join(f"`{v}`" for v in node["enum"]))
    if "pattern" in node:
        notes.append(f"pattern `{node['pattern']}`")
    text = _one_line(node.get("description", ""))
    if notes:
        text += f" ({'; '.join(notes)})"
    return f"| `{path}` | {kind} | {_cell(default)} | {_cell(text)} |"


def _rules(node: Mapping[str, Any], path: str) -> Iterator[tuple[str, str, str]]:
    for v in node.get("x-kubernetes-validations", ()):
        yield path, v["rule"], v.get("message", "")
    for name, prop in node.get("properties", {}).items():
        yield from _rules(prop, f"{path}.{name}")
    if isinstance(node.get("items"), Mapping):
        yield from _rules(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from _rules(node["additionalProperties"], f"{path}.<key>")


def _json(value: Any) -> str:
    if value is True or value is False:
        return str(value).lower()
    if isinstance(value, dict | list) and not value:
        return "{}" if isinstance(value, dict) else "[]"
    return str(value)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def main(argv: Sequence[str] = ()) -> int:
    """Print the reference of the CRDs in argv[0] (default: the repository's crds/)."""
    import yaml

    directory = Path(argv[0]) if argv else Path(__file__).resolve().parents[3] / "crds"
    crds = [yaml.safe_load(p.read_text()) for p in sorted(directory.glob("*.yaml"))]
    if not crds:
        sys.stderr.write(f"no CRD files (*.yaml) in {directory}; pass the directory that holds them\n")
        return 2
    sys.stdout.write(render_crd_reference(crds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
