"""The chart under test, rendered by the real helm: one `helm template` per named values set, cached.

Owns the values matrix the chart tests share (VALUES) and running helm (template, lint) offline. Tests
take the rendered objects from `Chart.render(name)` and must not run helm for a values set themselves.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = REPO_ROOT / "charts" / "weir"
RELEASE, NAMESPACE = "lakes", "weir-system"

# name -> values; each is rendered once per session
VALUES: dict[str, dict[str, Any]] = {
    "defaults": {},
    "cluster-wide": {"rbac": {"clusterWide": True}},
    "cluster-wide-listed": {"rbac": {"clusterWide": True}, "watchNamespaces": ["lake-a", "lake-b"]},
    "several-namespaces": {"watchNamespaces": ["lake-a", "lake-b", "lake-c"]},
    "no-cluster-observation": {"rbac": {"kopfClusterObservation": False}},
    "no-crds": {"crds": {"create": False}},
    "bring-your-own": {"crds": {"create": False}, "rbac": {"create": False},
                       "serviceAccount": {"create": False, "name": "my-operator"},
                       "sparkDriver": {"serviceAccount": {"create": False, "name": "my-spark"}}},
    "zookeeper": {"zookeeper": {"enabled": True, "replicas": 3}},
    "monitoring": {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}},
                   "dashboard": {"enabled": True}},
    "json-logs": {"operator": {"logFormat": "json", "workers": 4, "supervisePeriodSeconds": 0.5},
                  "replicaCount": 2, "image": {"tag": "9.9.9"},
                  "leaderElection": {"leaseName": "weir-lease", "leaseDurationSeconds": 30,
                                     "renewSeconds": 10},
                  "sparkDriver": {"persistentVolumeClaims": True},
                  "imagePullSecrets": [{"name": "registry"}]},
}


class HelmFailed(AssertionError):
    """helm exited non-zero; the message carries its output."""


@dataclass(frozen=True)
class Rendered:
    """The objects one values set renders to (the helm test pod included)."""

    values_name: str
    objects: tuple[dict[str, Any], ...]

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [o for o in self.of_kind(kind) if name is None or o["metadata"]["name"] == name]
        assert len(found) == 1, f"{self.values_name}: expected one {kind} {name or ''}, found {len(found)}"
        return found[0]

    def pod_specs(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(where, pod spec) of every pod the chart runs: workloads' templates and bare pods."""
        for o in self.objects:
            where = f"{self.values_name}: {o['kind']} {o['metadata']['name']}"
            if o["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
                yield where, o["spec"]["template"]["spec"]
            elif o["kind"] == "Pod":
                yield where, o["spec"]


@dataclass
class Chart:
    helm: Path
    _cache: dict[str, Rendered] = field(default_factory=dict)

    def run(self, *args: str, values: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
        """helm with `values` as a values file (JSON is YAML), never touching a cluster."""
        argv = [str(self.helm), *args]
        if values is not None:
            argv += ["--values", "-"]
        return subprocess.run(argv, input=json.dumps(values) if values is not None else None,
                              capture_output=True, text=True, timeout=120, check=False)

    def template(self, values: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
        return self.run("template", RELEASE, str(CHART_DIR), "--namespace", NAMESPACE, *extra, values=values)

    def render(self, name: str) -> Rendered:
        if name not in self._cache:
            result = self.template(VALUES[name])
            if result.returncode != 0:
                raise HelmFailed(f"helm template ({name}) exited {result.returncode}:\n{result.stderr}")
            objects = tuple(o for o in yaml.safe_load_all(result.stdout) if o)
            self._cache[name] = Rendered(name, objects)
        return self._cache[name]
