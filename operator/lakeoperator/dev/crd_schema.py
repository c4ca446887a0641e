"""The CRDs' OpenAPI schemas as the API server uses them: defaulting and validation of a body. Pure.

Owns three things, each a function of (schema, value) that never mutates its input:
- `apply_defaults`: what the API server does before validating and storing a custom resource
  (structural defaulting): a non-nullable field that is null is dropped, an absent field with a
  `default` gets a copy of it, and defaulting recurses into the result, so the nested defaults of an
  object defaulted to `{}` apply too. Typed specs parse bodies after this, so a spec written without
  defaults means the same in `weir run -f` as in a cluster.
- `to_json_schema`: the OpenAPI v3 subset of a CRD as a JSON Schema (draft 2020-12): `nullable`,
  boolean `exclusiveMinimum/Maximum`, `x-kubernetes-preserve-unknown-fields`, `x-kubernetes-int-or-string`;
  `strict` rejects unknown fields (like `kubectl apply --validate=strict`) instead of pruning them.
- `validation_errors`: jsonschema's errors plus the list semantics JSON Schema cannot say
  (`x-kubernetes-list-type: map` keys and `set` items are unique).
CEL rules (`x-kubernetes-validations`) are not evaluated here: the API server does that, and the tests
(tests/crds/cel.py) do it with cel-python. This module does no I/O and imports nothing of kopf.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import jsonschema

Schema = Mapping[str, Any]

_DROPPED_KEYS = frozenset({"description", "default", "example", "externalDocs", "x-kubernetes-validations",
                           "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
                           "x-kubernetes-embedded-resource"})


def version_schema(crd: Mapping[str, Any], version: str = "v1alpha1") -> dict[str, Any]:
    """The openAPIV3Schema of `version` of a CustomResourceDefinition body."""
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return dict(v["schema"]["openAPIV3Schema"])
    names = [v["name"] for v in crd["spec"]["versions"]]
    raise KeyError(f"{crd['metadata']['name']} has no version {version!r}; it has {names}")


def apply_defaults(schema: Schema, value: Any) -> Any:
    """`value` with the schema's defaults applied as the API server applies them; a new object."""
    return _default(schema, copy.deepcopy(value))


def _default(schema: Schema, value: Any) -> Any:
    if isinstance(value, dict):
        props: Mapping[str, Schema] = schema.get("properties", {})
        for name, prop in props.items():
            if name in value and value[name] is None and not prop.get("nullable", False):
                del value[name]  # pruned like the API server does, then defaulted below
            if name not in value and "default" in prop:
                value[name] = copy.deepcopy(prop["default"])
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            if name in props:
                value[name] = _default(props[name], item)
            elif isinstance(extra, Mapping):
                value[name] = _default(extra, item)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_default(schema["items"], item) for item in value]
    return value


def to_json_schema(schema: Schema, *, strict: bool = True) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) that accepts what the OpenAPI v3 `schema` of a CRD accepts."""
    out: dict[str, Any] = {"$schema": "https://json-schema.org/draft/2020-12/schema"}
    out.update(_convert(schema, strict=strict))
    return out


def _convert(schema: Schema, *, strict: bool) -> dict[str, Any]:
    if schema.get("x-kubernetes-int-or-string"):
        return {"type": ["integer", "string"]}
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROPPED_KEYS or key in ("nullable", "x-kubernetes-preserve-unknown-fields"):
            continue
        if key == "properties":
            out[key] = {k: _convert(v, strict=strict) for k, v in value.items()}
        elif key == "items":
            out[key] = _convert(value, strict=strict)
        elif key == "additionalProperties":
            out[key] = _convert(value, strict=strict) if isinstance(value, Mapping) else value
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [_convert(s, strict=strict) for s in value]
        elif key == "not":
            out[key] = _convert(value, strict=strict)
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            bound = "minimum" if key == "exclusiveMinimum" else "maximum"
            if value is True and bound in schema:
                out[key] = schema[bound]
        elif key in ("minimum", "maximum"):
            exclusive = schema.get("exclusiveMinimum" if key == "minimum" else "exclusiveMaximum")
            if exclusive is not True:
                out[key] = value
        else:
            out[key] = value
    preserve = schema.get("x-kubernetes-preserve-unknown-fields", False)
    if strict and "properties" in schema and "additionalProperties" not in schema and not preserve:
        out["additionalProperties"] = False
    if schema.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    return out


def validation_errors(schema: Schema, value: Any, *, strict: bool = True) -> list[str]:
    """Why the API server would refuse `value` (CEL rules aside), as 'path: message' lines; [] if none."""
    validator = jsonschema.Draft202012Validator(to_json_schema(schema, strict=strict))
    errors = [f"{_path(e.absolute_path) or '<root>'}: {e.message}" for e in validator.iter_errors(value)]
    errors += _list_errors(schema, value, ())
    return sorted(errors)


def _list_errors(schema: Schema, value: Any, path: tuple[str | int, ...]) -> list[str]:
    errors: list[str] = []
    if isinstance(value, dict):
        props: Mapping[str, Schema] = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            sub = props.get(name, extra if isinstance(extra, Mapping) else None)
            if sub is not None:
                errors += _list_errors(sub, item, (*path, name))
    elif isinstance(value, list):
        kind = schema.get("x-kubernetes-list-type", "atomic")
        seen: set[str] = set()
        for i, item in enumerate(value):
            if kind == "map" and isinstance(item, dict):
                key = json.dumps([item.get(k) for k in schema.get("x-kubernetes-list-map-keys", [])])
            elif kind == "set":
                key = json.dumps(item, sort_keys=True)
            else:
                key = None
            if key is not None:
                if key in seen:
                    errors.append(f"{_path((*path, i))}: duplicate entry {key} in a list of unique "
                                  f"{'keys' if kind == 'map' else 'items'}")
                seen.add(key)
            if isinstance(schema.get("items"), Mapping):
                errors += _list_errors(schema["items"], item, (*path, i))
    return errors


def _path(parts: Any) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out
