"""What every kind's spec shares: `SpecError`, `ObjectRef`, the reader of one object of a body (`Fields`),
a reference by name, and the Spark section of LakeWriter and TableService with its rules: the driver's
memory in Spark's notation, and no `spark.conf` key the operator manages (a spec breaking either is
refused here, before anything runs; the pod builder relies on both).

Must not: talk to Kubernetes, import kopf, read storage, or decide anything (planners in `plan/` do).
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, get_args

PAUSED_ANNOTATION = "weir.dev/paused"
MANAGED_ANNOTATION = "weir.dev/managed"

SparkMode = Literal["kubernetes", "local"]
T = TypeVar("T")
R = TypeVar("R")

# Spark settings the operator owns: a spec's `spark.conf` may not set them (it would break the pod's
# wiring to its executors, its owner or its Secret).
MANAGED_CONF_PREFIXES = ("spark.master", "spark.submit.deployMode", "spark.driver.host",
                         "spark.driver.bindAddress", "spark.kubernetes.namespace",
                         "spark.kubernetes.driver.pod.name",
                         "spark.kubernetes.container.image", "spark.kubernetes.executor.podNamePrefix",
                         "spark.kubernetes.executor.label.", "spark.kubernetes.executor.secretKeyRef.",
                         "spark.kubernetes.authenticate.", "spark.app.name")
_MEMORY = re.compile(r"^(\d+)([kmgt]?)b?$", re.IGNORECASE)


class SpecError(ValueError):
    """A resource's spec is invalid: `field_path` names the field, the message ends with the fix."""

    def __init__(self, field_path: str, message: str, *, stand_in: Mapping[str, Any] | None = None) -> None:
        super().__init__(f"{field_path}: {message}")
        self.field_path = field_path
        self.message = message
        # values (by field path) that would let parsing go on past this mistake, to find the ones after
        # it (parse_spec): what a missing field would hold, of the kind it takes
        self.stand_in = dict(stand_in or {})


@dataclass(frozen=True)
class ObjectRef:
    """Who a spec belongs to: identity, the generation parsed, and the operator's annotations."""

    namespace: str
    name: str
    uid: str
    generation: int
    paused: bool = False       # weir.dev/paused: "true": reconciliation stops (ReconciliationPaused)
    managed: bool = True       # weir.dev/managed: "false": the operator leaves it and its table alone

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> ObjectRef:
        meta = body.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        return cls(namespace=str(meta.get("namespace") or "default"), name=str(meta.get("name") or ""),
                   uid=str(meta.get("uid") or ""), generation=int(meta.get("generation") or 0),
                   paused=str(annotations.get(PAUSED_ANNOTATION, "")).lower() == "true",
                   managed=str(annotations.get(MANAGED_ANNOTATION, "true")).lower() != "false")


@dataclass(frozen=True)
class NameRef:
    name: str


@dataclass(frozen=True)
class DriverResources:
    cores: int = 1
    memory: str = "1g"


@dataclass(frozen=True)
class ExecutorResources:
    instances: int = 2
    cores: int = 1
    memory: str = "2g"


@dataclass(frozen=True)
class SparkSpec:
    mode: SparkMode = "kubernetes"
    image: str | None = None
    service_account_name: str | None = None
    driver: DriverResources = DriverResources()
    executor: ExecutorResources = ExecutorResources()
    conf: Mapping[str, str] = field(default_factory=dict)
    local_cores: int = 2


# -- parsing -----------------------------------------------------------------------------------


class Fields:
    """Reads one object of a body; every error names the field's full path."""

    def __init__(self, obj: Any, path: str, known: tuple[str, ...]) -> None:
        if obj is None:
            obj = {}
        if not isinstance(obj, Mapping):
            raise SpecError(path, f"must be an object, got {type(obj).__name__}; see the CRD's schema")
        unknown = sorted(set(obj) - set(known))
        if unknown:
            def likely(name: str) -> str:
                close = [k for k in known if k.lower() == name.lower()] or \
                    difflib.get_close_matches(name, known, n=1, cutoff=0.6)
                return f" (did you mean {close[0]}?)" if close else ""

            tail = f"; the fields here are {', '.join(known)} (check the spelling: camelCase)"
            if len(unknown) == 1:
                raise SpecError(f"{path}.{unknown[0]}", f"unknown field{likely(unknown[0])}{tail}")
            listed = ", ".join(f"{name}{likely(name)}" for name in unknown)   # every one at once
            raise SpecError(path, f"unknown fields {listed}{tail}")
        self.obj = obj
        self.path = path

    def at(self, key: str) -> str:
        return f"{self.path}.{key}"

    def has(self, key: str) -> bool:
        return self.obj.get(key) is not None

    def raw(self, key: str) -> Any:
        return self.obj.get(key)

    def required(self, key: str) -> Any:
        if self.obj.get(key) is None:
            raise SpecError(self.at(key), "is required; set it")
        return self.obj[key]

    def text(self, key: str, default: T) -> str | T:
        value = self.obj.get(key)
        if value is None:
            return default
        if not isinstance(value, str) or not value:
            raise SpecError(self.at(key), f"must be a non-empty string, got {value!r}")
        return value

    def req_str(self, key: str) -> str:
        self.required(key)
        return str(self.text(key, ""))

    def integer(self, key: str, default: int, *, minimum: int = 0) -> int:
        value = self.obj.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise SpecError(self.at(key), f"must be an integer >= {minimum}, got {value!r}")
        return value

    def opt_int(self, key: str, *, minimum: int = 0) -> int | None:
        return self.integer(key, 0, minimum=minimum) if self.has(key) else None

    def number(self, key: str, default: float, *, minimum: float = 0.0, exclusive: bool = False) -> float:
        value = self.obj.get(key, default)
        ok = isinstance(value, int | float) and not isinstance(value, bool) and \
            (value > minimum if exclusive else value >= minimum)
        if not ok:
            bound = f"> {minimum}" if exclusive else f">= {minimum}"
            raise SpecError(self.at(key), f"must be a number {bound}, got {value!r}")
        return float(value)

    def opt_number(self, key: str) -> float | None:
        return self.number(key, 0.0) if self.has(key) else None

    def flag(self, key: str, default: bool) -> bool:
        value = self.obj.get(key, default)
        if not isinstance(value, bool):
            raise SpecError(self.at(key), f"must be true or false, got {value!r}")
        return value

    def enum(self, key: str, choices: Any, default: str | None = None) -> Any:
        allowed = get_args(choices)
        value = self.obj.get(key, default)
        if value is None:
            raise SpecError(self.at(key), f"is required; use one of {', '.join(allowed)}",
                            stand_in={self.at(key): allowed[0]})
        if value not in allowed:
            raise SpecError(self.at(key), f"{value!r} is not one of {', '.join(allowed)}; use one of them")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.obj.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise SpecError(self.at(key), f"must be a list of non-empty strings, got {value!r}")
        if len(set(value)) != len(value):
            raise SpecError(self.at(key), f"lists a name twice ({value!r}); list each once")
        return tuple(value)

    def string_map(self, key: str) -> dict[str, str]:
        value = self.obj.get(key) or {}
        if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
            raise SpecError(self.at(key), "must be a map of strings to strings; quote numbers and booleans")
        return {str(k): v for k, v in value.items()}

    def sub(self, key: str, known: tuple[str, ...]) -> Fields:
        return Fields(self.obj.get(key), self.at(key), known)


def told_together(first: SpecError, *others: SpecError | None) -> SpecError:
    """The mistakes found in one pass as one SpecError (the first names the field; each other is added
    with its own path), so a manifest with several is fixed in one round, not one per run."""
    more = [e for e in others if e is not None]
    if not more:
        return first
    return SpecError(first.field_path, "; also ".join([first.message, *map(str, more)]))


MAX_TOLD = 10   # mistakes told at once


def parse_spec(body: Mapping[str, Any], known: tuple[str, ...], parse: Callable[[Fields], R]) -> R:
    """`parse` the spec's fields; every mistake is told at once (up to MAX_TOLD): unknown fields (a
    misspelt one is parsed under the name it likely meant, so what it holds is checked too), then each
    other mistake, found by parsing again without the field it was in (its default standing in), or
    with a stand-in value for a required field that is missing (`_stand_in`), until none is left or one
    cannot be stepped over."""
    obj = spec_of(body)
    unknown = None
    try:
        f = Fields(obj, "spec", known)
    except SpecError as exc:
        if not isinstance(obj, Mapping):
            raise
        unknown = exc
        meant = {k: close[0] for k in obj if k not in known
                 and (close := difflib.get_close_matches(k, known, n=1, cutoff=0.6)) and close[0] not in obj}
        obj = {meant.get(k, k): v for k, v in obj.items() if k in known or k in meant}
        f = Fields(obj, "spec", known)
    told: list[SpecError] = []
    stood_in: list[str] = []   # paths given stand-in values: a mistake there is not the user's
    rest = copy.deepcopy(dict(obj))
    while True:
        try:
            parsed = parse(f)
        except SpecError as exc:
            if len(told) >= MAX_TOLD or any(_within(exc.field_path, p) for p in stood_in):
                break
            if any(t.field_path == exc.field_path for t in told):
                # told already (a field dropped for its mistake was required): its stand-in, if any
                if not exc.stand_in or set(exc.stand_in) <= set(stood_in):
                    break
            else:
                told.append(exc)
            if _put_all(rest, exc.stand_in):
                stood_in.extend(exc.stand_in)
            elif not _drop(rest, exc.field_path):
                if not _stand_in(rest, exc.field_path, parse, known):
                    break
                stood_in.append(exc.field_path)
            f = Fields(rest, "spec", known)
            continue
        if not told:
            if unknown is not None:
                raise unknown
            return parsed
        break
    first, *more = [*([unknown] if unknown is not None else []), *told]
    raise told_together(first, *more) from None


def _drop(spec: dict[str, Any], path: str) -> bool:
    """Remove the field at `path` (`spec.a.b`; a list element's field stays) from `spec`: False when it
    is not there to remove (a required one missing) or is the whole spec."""
    found = _holder(spec, path)
    if found is None or found[1] not in found[0]:
        return False
    del found[0][found[1]]
    return True


def _holder(spec: dict[str, Any], path: str, *, make: bool = False) -> tuple[dict[str, Any], str] | None:
    """The object in `spec` that holds the field at `path` (`spec.a.b`), and the field's key (`make`:
    absent objects on the way made empty ones); None for the whole spec, a list element's field, or a
    path through a field that is no object."""
    keys = path.split(".")[1:]
    if not keys or any("[" in k for k in keys):
        return None
    node: Any = spec
    for k in keys[:-1]:
        if make and isinstance(node, dict) and node.get(k) is None:
            node[k] = {}
        node = node.get(k) if isinstance(node, dict) else None
    return (node, keys[-1]) if isinstance(node, dict) else None


def _put_all(spec: dict[str, Any], values: Mapping[str, Any]) -> bool:
    """Set each field path of `values` (`spec.a.b`, objects made on the way) in `spec`: False when
    there is none, or one cannot be set (a list element's, or under a field that is no object)."""
    if not values:
        return False
    for path, value in values.items():
        found = _holder(spec, path, make=True)
        if found is None:
            return False
        found[0][found[1]] = copy.deepcopy(value)
    return True


_STAND_INS: tuple[Any, ...] = ("missing", {}, [], 1)


def _stand_in(spec: dict[str, Any], path: str, parse: Callable[[Fields], Any],
              known: tuple[str, ...]) -> bool:
    """Put a stand-in value at `path`, a required field that is missing, so that parsing goes on to the
    mistakes after it: the first of a string, an object, a list and a number that the parse takes (its
    next mistake, if any, is neither at `path` nor inside it; an object's own missing fields get stand-ins
    in turn). False when none does, or `path` is not a field of an object there."""
    found = _holder(spec, path)
    if found is None or found[0].get(found[1]) is not None:
        return False
    node, key = found
    for value in _STAND_INS:
        node[key] = copy.deepcopy(value)
        try:
            parse(Fields(spec, "spec", known))
        except SpecError as exc:   # at the stand-in or inside it: not taken, unless its own fields can be
            if _within(exc.field_path, path) and not (
                    isinstance(value, dict) and _stand_in(spec, exc.field_path, parse, known)):
                continue
        return True
    del node[key]
    return False


def _within(path: str, field: str) -> bool:
    """Whether `path` is the field `field` or lies inside it."""
    return path == field or path.startswith((f"{field}.", f"{field}["))


def spec_of(body: Mapping[str, Any]) -> Any:
    spec = body.get("spec")
    if spec is None:
        raise SpecError("spec", "is missing; a resource needs a spec")
    return spec


def name_ref(f: Fields, key: str) -> NameRef:
    f.required(key)
    return NameRef(name=f.sub(key, ("name",)).req_str("name"))


SPARK_FIELDS = ("mode", "image", "serviceAccountName", "driver", "executor", "conf", "localCores")


def spark_memory_mib(value: str) -> int | None:
    """Spark's memory notation ("512m", "2g") in MiB; None when `value` is not in it."""
    m = _MEMORY.fullmatch(value.strip())
    if not m:
        return None
    n, unit = int(m.group(1)), m.group(2).lower()
    return {"": n // (1024 * 1024), "k": n // 1024, "m": n, "g": n * 1024, "t": n * 1024 * 1024}[unit]


def parse_spark(f: Fields) -> SparkSpec:
    d = f.sub("driver", ("cores", "memory"))
    e = f.sub("executor", ("instances", "cores", "memory"))
    driver_memory = str(d.text("memory", "1g"))
    if spark_memory_mib(driver_memory) is None:   # the driver pod's memory is computed from it
        raise SpecError(d.at("memory"), f"memory {driver_memory!r} is not Spark's notation; use e.g. 512m "
                        "or 2g")
    conf = f.string_map("conf")
    other = sorted(k for k in conf if not k.startswith("spark."))
    if other:
        raise SpecError(f.at("conf"), f"{', '.join(other)} is not a Spark property (their names start with "
                        "'spark.'); write its full name, e.g. spark.sql.shuffle.partitions")
    managed = sorted(k for k in conf if k.startswith(MANAGED_CONF_PREFIXES))
    if managed:
        raise SpecError(f.at("conf"), f"{', '.join(managed)} is set by the operator (it wires the driver to "
                        "its pod, executors and Secret); remove it from spark.conf")
    return SparkSpec(
        mode=f.enum("mode", SparkMode, "kubernetes"), image=f.text("image", None),
        service_account_name=f.text("serviceAccountName", None),
        driver=DriverResources(cores=d.integer("cores", 1, minimum=1), memory=driver_memory),
        executor=ExecutorResources(instances=e.integer("instances", 2),
                                   cores=e.integer("cores", 1, minimum=1),
                                   memory=str(e.text("memory", "2g"))),
        conf=conf, local_cores=f.integer("localCores", 2, minimum=1))
