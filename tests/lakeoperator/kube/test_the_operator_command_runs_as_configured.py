"""`python -m lakeoperator` / `weir operator`: --help lists the settings; the operator watches only the
namespaces it is given, logs JSON when asked, serves /healthz and /metrics; a bad setting or a missing
kubeconfig is one clear error, not a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lakeoperator.kube.manifests import table
from tests.support.kube_server import ControlPlane
from tests.support.operator import CRDS, ROOT, OperatorProcess, weir_path

pytestmark = pytest.mark.k8s
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "operator")])}


def lakeoperator(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lakeoperator", *args], env=ENV, capture_output=True,
                          text=True, timeout=60)


def test_help_lists_every_setting() -> None:
    shown = lakeoperator("--help")
    assert shown.returncode == 0, shown.stderr
    for option in ("--namespace", "--kubeconfig", "--image", "--workers", "--metrics-port", "--liveness-port",
                   "--log-format", "--peering", "WEIR_NAMESPACES"):
        assert option in shown.stdout


def test_bad_settings_are_one_clear_error(tmp_path: Path) -> None:
    bad = lakeoperator("--log-format", "xml")
    assert bad.returncode != 0 and "plain or json" in bad.stderr
    missing = lakeoperator("--kubeconfig", str(tmp_path / "absent"), "--liveness-port", "0",
                           "--metrics-port", "0")
    assert missing.returncode != 0
    assert "Traceback" not in missing.stderr, missing.stderr[-2000:]
    assert "kubeconfig" in missing.stderr


def test_it_watches_only_its_namespaces_and_logs_json(kube_server: ControlPlane, kube_namespace: str,
                                                     tmp_path: Path) -> None:
    kube_server.apply_crds(*CRDS)
    client, lake = kube_server.client(), kube_namespace
    with kube_server.namespace("other") as other:
        operator = OperatorProcess(kube_server, tmp_path, namespaces=(lake,), extra=("--log-format", "json"))
        operator.start()
        try:
            for namespace in (lake, other):
                body = table(tmp_path, name=f"t-{namespace}")
                body["metadata"]["namespace"] = namespace
                client.create(weir_path("LakeTable", namespace=namespace), body)
            client.wait_for(weir_path("LakeTable", f"t-{lake}", lake),
                            lambda o: (o.get("status") or {}).get("phase") == "Ready", timeout=30)
            assert "weir_resources" in operator.metrics()
        finally:
            operator.stop()
        assert "status" not in client.get(weir_path("LakeTable", f"t-{other}", other))
    assert not (tmp_path / "lake" / f"t-{other}").exists()
    lines = [line for line in operator.log().splitlines() if line.strip() and not line.startswith("=====")]
    assert lines
    records = [json.loads(line) for line in lines]   # every line is a JSON object
    assert any("weir operator starting" in r.get("message", "") for r in records)
