"""Evaluates the CRDs' CEL rules (`x-kubernetes-validations`) with cel-python, as the API server does.

Every rule runs at its schema node with `self` bound to the value there, typed by the schema
(`integer` -> int, `number` -> double, as Kubernetes types them). A transition rule (one that names
`oldSelf`) runs only when the node exists in the old object too: on an update, and for list items only
when the list is `x-kubernetes-list-type: map` (items are correlated by their keys), as in Kubernetes.
Bodies are defaulted first (`apply_defaults`), as the API server defaults before it validates.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import celpy
from celpy import celtypes

from lakeoperator.dev.crd_schema import apply_defaults

_OLD_SELF = re.compile(r"\boldSelf\b")
_MISSING: Any = object()


@dataclass(frozen=True)
class Rule:
    """One rule of a CRD, at a schema path like `spec.schema[*].type` (`[*]` list items, `{*}` map values)."""

    kind: str
    path: str
    rule: str
    message: str

    @property
    def is_transition(self) -> bool:
        return bool(_OLD_SELF.search(self.rule))


@dataclass(frozen=True)
class Outcome:
    """A rule evaluated at one place of an object: passed, failed, or raised (`error`)."""

    rule: Rule
    at: str
    passed: bool
    error: str | None = None


def rules_of(kind: str, schema: Mapping[str, Any]) -> list[Rule]:
    """Every CEL rule in `schema`, depth first."""
    return list(_rules(kind, schema, ""))


def _rules(kind: str, schema: Mapping[str, Any], path: str) -> Iterator[Rule]:
    for v in schema.get("x-kubernetes-validations", ()):
        yield Rule(kind, path or "<root>", v["rule"], v.get("message", ""))
    for name, prop in schema.get("properties", {}).items():
        yield from _rules(kind, prop, f"{path}.{name}" if path else name)
    if isinstance(schema.get("items"), Mapping):
        yield from _rules(kind, schema["items"], f"{path}[*]")
    if isinstance(schema.get("additionalProperties"), Mapping):
        yield from _rules(kind, schema["additionalProperties"], f"{path}{{*}}")


def evaluate(kind: str, schema: Mapping[str, Any], new: Any, old: Any = None) -> list[Outcome]:
    """Every rule evaluation on `new` (a create when `old` is None, else an update), after defaulting."""
    out: list[Outcome] = []
    old_value = _MISSING if old is None else apply_defaults(schema, old)
    _walk(kind, schema, apply_defaults(schema, new), old_value, "", "", out)
    return out


def evaluate_default(schema: Mapping[str, Any]) -> list[Outcome]:
    """The rules of a node and of the nodes under it on the node's `default`, as the API server checks a
    CRD's defaults: the value as written (its nested defaults NOT applied), as both self and oldSelf."""
    out: list[Outcome] = []
    _walk("default", schema, schema["default"], schema["default"], "", "", out)
    return out


def violations(outcomes: list[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if not o.passed]


def _walk(kind: str, schema: Mapping[str, Any], new: Any, old: Any, spath: str, at: str,
          out: list[Outcome]) -> None:
    for v in schema.get("x-kubernetes-validations", ()):
        rule = Rule(kind, spath or "<root>", v["rule"], v.get("message", ""))
        if rule.is_transition and old is _MISSING:
            continue
        out.append(_run(rule, schema, new, old, at or "<root>"))
    if isinstance(new, dict):
        props: Mapping[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for name, value in new.items():
            sub = props.get(name)
            sub_path = f"{spath}.{name}" if spath else name
            if sub is None and isinstance(extra, Mapping):
                sub, sub_path = extra, f"{spath}{{*}}"
            if sub is None:
                continue
            old_value = old.get(name, _MISSING) if isinstance(old, dict) else _MISSING
            _walk(kind, sub, value, old_value, sub_path, f"{at}.{name}" if at else name, out)
    elif isinstance(new, list) and isinstance(schema.get("items"), Mapping):
        keys = schema.get("x-kubernetes-list-map-keys", [])
        correlated = schema.get("x-kubernetes-list-type") == "map" and isinstance(old, list)
        old_by_key = {_key(item, keys): item for item in old} if correlated else {}
        for i, item in enumerate(new):
            old_item = old_by_key.get(_key(item, keys), _MISSING) if correlated else _MISSING
            _walk(kind, schema["items"], item, old_item, f"{spath}[*]", f"{at}[{i}]", out)


def _key(item: Any, keys: list[str]) -> tuple[Any, ...]:
    return tuple(item.get(k) for k in keys) if isinstance(item, dict) else (item,)


def _run(rule: Rule, schema: Mapping[str, Any], new: Any, old: Any, at: str) -> Outcome:
    activation = {"self": to_cel(schema, new)}
    if rule.is_transition:
        activation["oldSelf"] = to_cel(schema, old)
    try:
        result = _program(rule.rule).evaluate(activation)
    except celpy.CELEvalError as exc:
        return Outcome(rule, at, passed=False, error=str(exc))
    if not isinstance(result, celtypes.BoolType):
        return Outcome(rule, at, passed=False, error=f"rule returned {result!r}, not a bool")
    return Outcome(rule, at, passed=bool(result))


@cache
def _program(rule: str) -> celpy.Runner:
    env = celpy.Environment()
    return env.program(env.compile(rule))


def to_cel(schema: Mapping[str, Any], value: Any) -> Any:
    """`value` as the CEL value Kubernetes binds: typed by the schema node, not by its JSON spelling."""
    kind = schema.get("type")
    if value is None:
        return None
    if kind == "integer":
        return celtypes.IntType(value)
    if kind == "number":
        return celtypes.DoubleType(value)
    if kind == "string":
        return celtypes.StringType(value)
    if kind == "boolean":
        return celtypes.BoolType(value)
    if kind == "array":
        items = schema.get("items", {})
        return celtypes.ListType([to_cel(items, v) for v in value])
    if kind == "object" and isinstance(value, dict):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        return celtypes.MapType({
            celtypes.StringType(k): to_cel(props.get(k, extra if isinstance(extra, Mapping) else {}), v)
            for k, v in value.items()})
    return celpy.json_to_cel(value)
