"""What the API server checks of an apiextensions.k8s.io/v1 CRD (and what Weir adds), as lists of problems.

The structural-schema rules Kubernetes enforces on create: every node typed, `items` one schema,
`properties` and `additionalProperties` not together, no `$ref`, no `uniqueItems: true`, no
`additionalProperties: false`, the root's `metadata` only `type: object` (not even a description),
`required` names declared properties, list-type maps keyed by required or defaulted fields,
defaults valid against their own node and its rules (as written: the API server does not apply nested
defaults to a default before it checks it), transition rules only where old and new values can be
correlated (no atomic/set list above them). Weir adds: a description on every node, no free-form
nodes, rules that call only functions Kubernetes offers, and size bounds (maxItems, maxProperties,
maxLength) on everything in spec, so the API server's CEL cost estimate stays within its limits.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import celpy

from lakeoperator.dev.crd_schema import apply_defaults, validation_errors
from tests.crds.cel import evaluate_default

KEYWORDS = frozenset({
    "type", "format", "description", "title", "default", "example", "externalDocs", "enum", "nullable",
    "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "multipleOf", "maxLength", "minLength",
    "pattern", "maxItems", "minItems", "uniqueItems", "maxProperties", "minProperties", "required", "items",
    "properties", "additionalProperties", "allOf", "anyOf", "oneOf", "not",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string", "x-kubernetes-embedded-resource",
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
    "x-kubernetes-validations",
})
TYPES = frozenset({"object", "array", "string", "integer", "number", "boolean"})
RULE_KEYS = frozenset({"rule", "message", "messageExpression", "reason", "fieldPath", "optionalOldSelf"})
# CEL's standard functions and macros plus Kubernetes' libraries (strings, lists, regex, urls, quantity, ...):
# a rule may use only these (cel-python knows the standard ones; the tests evaluate every rule with it)
CEL_FUNCTIONS = frozenset({
    "has", "all", "exists", "exists_one", "map", "filter", "size", "contains", "startsWith", "endsWith",
    "matches", "int", "uint", "double", "string", "bool", "bytes", "duration", "timestamp", "dyn", "type",
    "isSorted", "sum", "min", "max", "indexOf", "lastIndexOf", "lowerAscii", "upperAscii", "replace", "split",
    "join", "substring", "trim", "charAt", "find", "findAll", "url", "isURL", "quantity", "isQuantity",
    "format", "quote", "reverse",
})
PRINTER_TYPES = frozenset({"integer", "number", "string", "boolean", "date"})
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_PY_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float),
                                          "boolean": (bool,), "object": (dict,), "array": (list,)}


def crd_problems(crd: Mapping[str, Any], *, group: str, short_name: str, category: str) -> list[str]:
    """Problems of a CRD body as a CustomResourceDefinition of Weir's API ([] when none)."""
    out: list[str] = []
    spec = crd.get("spec", {})
    names = spec.get("names", {})
    kind = names.get("kind", "")
    if crd.get("apiVersion") != "apiextensions.k8s.io/v1" or crd.get("kind") != "CustomResourceDefinition":
        out.append("not an apiextensions.k8s.io/v1 CustomResourceDefinition")
    if crd.get("metadata", {}).get("name") != f"{names.get('plural')}.{group}":
        out.append("metadata.name must be <plural>.<group>")
    if spec.get("group") != group or spec.get("scope") != "Namespaced":
        out.append(f"spec.group must be {group} and scope Namespaced")
    expected_names = {"kind": kind, "listKind": f"{kind}List", "plural": f"{kind.lower()}s",
                      "singular": kind.lower(), "shortNames": [short_name], "categories": [category]}
    if names != expected_names:
        out.append(f"spec.names {names} != {expected_names}")
    versions = spec.get("versions", [])
    storage_versions = sum(bool(v.get("storage")) for v in versions)
    if [v.get("name") for v in versions] != ["v1alpha1"] or storage_versions != 1:
        out.append("exactly one version, v1alpha1, served and the storage version")
    for v in versions:
        if not v.get("served"):
            out.append(f"version {v.get('name')} is not served")
        if v.get("subresources") != {"status": {}}:
            out.append(f"version {v.get('name')}: subresources must be {{status: {{}}}}")
        schema = v.get("schema", {}).get("openAPIV3Schema")
        if not isinstance(schema, Mapping):
            out.append(f"version {v.get('name')} has no openAPIV3Schema")
            continue
        out += schema_problems(schema)
        out += printer_column_problems(v.get("additionalPrinterColumns", []), schema)
    return out


def printer_column_problems(columns: list[Mapping[str, Any]], schema: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for c in columns:
        where = f"printer column {c.get('name')!r}"
        if set(c) - {"name", "type", "jsonPath", "description", "format", "priority"}:
            out.append(f"{where}: unknown keys {sorted(set(c) - {'name', 'type', 'jsonPath'})}")
        if c.get("type") not in PRINTER_TYPES or not c.get("description"):
            out.append(f"{where}: type must be one of {sorted(PRINTER_TYPES)}, and it needs a description")
        path = str(c.get("jsonPath", ""))
        if path.startswith(".metadata."):
            continue
        node: Mapping[str, Any] | None = schema
        # a field per step; `name[?(@.type=="Ready")]` steps into a list and picks items of it
        steps = re.findall(r"\.([A-Za-z0-9_]+)(\[\?\(@\.[A-Za-z]+==\"[A-Za-z]+\"\)\])?", path)
        if "".join(f".{name}{pick}" for name, pick in steps) != path:
            out.append(f"{where}: {path} is not a plain field path (a list filter [?(@.f==\"v\")] at most)")
            continue
        for part, pick in steps:
            node = node.get("properties", {}).get(part) if node is not None else None
            if pick and node is not None:
                node = node.get("items") if node.get("type") == "array" else None
        if node is None:
            out.append(f"{where}: {path} is not a field of the schema")
        elif c.get("type") == "date" and node.get("format") != "date-time":
            out.append(f"{where}: type date needs a date-time field")
    return out


def schema_problems(root: Mapping[str, Any]) -> list[str]:
    """Structural-schema problems of an openAPIV3Schema, each as 'path: what'."""
    out: list[str] = []
    if root.get("type") != "object":
        out.append("<root>: the root must be an object")
    meta = root.get("properties", {}).get("metadata")
    if meta is not None and meta != {"type": "object"}:
        out.append("metadata: the API server refuses anything but `type: object` (even a description)")
    _node(root, "", out, in_spec=False, correlatable=True, env=celpy.Environment())
    return out


def _node(s: Mapping[str, Any], path: str, out: list[str], *, in_spec: bool, correlatable: bool,
          env: celpy.Environment) -> None:
    where = path or "<root>"
    unknown = set(s) - KEYWORDS
    if unknown:
        out.append(f"{where}: keywords Kubernetes does not accept: {sorted(unknown)}")
    kind = s.get("type")
    if kind not in TYPES and not s.get("x-kubernetes-int-or-string"):
        out.append(f"{where}: every node needs a type, got {kind!r}")
    if s.get("x-kubernetes-preserve-unknown-fields"):
        out.append(f"{where}: free-form (x-kubernetes-preserve-unknown-fields); declare its fields")
    if not str(s.get("description", "")).strip() and path != "metadata":
        out.append(f"{where}: no description")
    if "$ref" in s or s.get("uniqueItems") is True:
        out.append(f"{where}: $ref and uniqueItems: true are not allowed")
    if "properties" in s and "additionalProperties" in s:
        out.append(f"{where}: properties and additionalProperties are mutually exclusive")
    if "additionalProperties" in s and not isinstance(s["additionalProperties"], Mapping):
        out.append(f"{where}: additionalProperties must be a schema (false is not allowed)")
    if kind == "object" and "properties" not in s and "additionalProperties" not in s and path != "metadata":
        out.append(f"{where}: an object without properties would be pruned empty")
    for name in s.get("required", ()):
        if name not in s.get("properties", {}):
            out.append(f"{where}: required field {name!r} is not a property")
    for value in s.get("enum", ()):
        if kind in _PY_TYPES and (not isinstance(value, _PY_TYPES[kind]) or
                                  (kind != "boolean" and isinstance(value, bool))):
            out.append(f"{where}: enum value {value!r} is not a {kind}")
    if "default" in s:
        if path.startswith("metadata"):
            out.append(f"{where}: no defaults under metadata")
        errors = validation_errors(s, apply_defaults(s, s["default"]))
        if errors:
            out.append(f"{where}: default {s['default']!r} is invalid: {errors}")
        failed = [o.rule.message for o in evaluate_default(s) if not o.passed]
        if failed:
            out.append(f"{where}: default {s['default']!r} fails {failed}: the API server checks a default "
                       "as written, without its nested defaults; spell out the fields the rules read")
    if in_spec:
        bounds = {"array": "maxItems", "string": "maxLength"}
        bound = bounds.get(str(kind)) or ("maxProperties" if "additionalProperties" in s else None)
        if bound and bound not in s and "enum" not in s:
            out.append(f"{where}: no {bound}: CEL cost estimates need bounded lists, maps and strings")
    _list_type(s, where, out)
    _rules(s, where, out, correlatable=correlatable, env=env)
    for name, prop in s.get("properties", {}).items():
        sub = f"{path}.{name}" if path else name
        _node(prop, sub, out, in_spec=in_spec or sub == "spec", correlatable=correlatable, env=env)
    if kind == "array":
        items = s.get("items")
        if not isinstance(items, Mapping):
            out.append(f"{where}: items must be one schema")
        else:
            keep = correlatable and s.get("x-kubernetes-list-type") == "map"
            _node(items, f"{path}[*]", out, in_spec=in_spec, correlatable=keep, env=env)
    if isinstance(s.get("additionalProperties"), Mapping):
        _node(s["additionalProperties"], f"{path}{{*}}", out, in_spec=in_spec, correlatable=correlatable,
              env=env)


def _list_type(s: Mapping[str, Any], where: str, out: list[str]) -> None:
    list_type = s.get("x-kubernetes-list-type")
    if list_type is None:
        return
    if s.get("type") != "array" or list_type not in ("atomic", "set", "map"):
        out.append(f"{where}: x-kubernetes-list-type must be atomic, set or map, on an array")
        return
    items = s.get("items", {})
    if list_type == "map":
        keys = s.get("x-kubernetes-list-map-keys") or []
        if not keys or items.get("type") != "object":
            out.append(f"{where}: a list-type map needs object items and x-kubernetes-list-map-keys")
        for k in keys:
            prop = items.get("properties", {}).get(k)
            if prop is None or (k not in items.get("required", ()) and "default" not in prop):
                out.append(f"{where}: map key {k!r} must be a required or defaulted field of the items")
    elif list_type == "set" and items.get("type") in ("object", "array"):
        out.append(f"{where}: a list-type set needs scalar items")


def _rules(s: Mapping[str, Any], where: str, out: list[str], *, correlatable: bool,
           env: celpy.Environment) -> None:
    for v in s.get("x-kubernetes-validations", ()):
        if set(v) - RULE_KEYS:
            out.append(f"{where}: unknown rule keys {sorted(set(v) - RULE_KEYS)}")
        rule = str(v.get("rule", ""))
        message = str(v.get("message", ""))
        if not message.strip() or "\n" in message:
            out.append(f"{where}: rule {rule!r} needs a one-line message")
        try:
            env.compile(rule)
        except celpy.CELParseError as exc:
            out.append(f"{where}: rule {rule!r} does not compile: {exc}")
        unknown_calls = sorted(set(_CALL.findall(rule)) - CEL_FUNCTIONS)
        if unknown_calls:
            out.append(f"{where}: rule {rule!r} calls {unknown_calls}, which Kubernetes' CEL does not offer")
        if "oldSelf" in rule and not correlatable:
            out.append(f"{where}: transition rule {rule!r} under a list that is not a list-type map: "
                       "Kubernetes cannot correlate old and new values there")
