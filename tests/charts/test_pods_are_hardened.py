"""Every pod the chart runs — operator, ZooKeeper, the helm test — is non-root with a read-only root
filesystem, no privilege escalation, no capabilities and the runtime's seccomp profile."""

from __future__ import annotations

import pytest

from tests.charts.chart import VALUES, Chart


@pytest.mark.parametrize("values_name", sorted(VALUES))
def test_every_pod_and_container_is_hardened(chart: Chart, values_name: str) -> None:
    pods = list(chart.render(values_name).pod_specs())
    assert pods
    for where, spec in pods:
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True, where
        assert pod["runAsUser"] == 10001 and pod["runAsGroup"] == 10001, where
        assert pod["seccompProfile"] == {"type": "RuntimeDefault"}, where
        for container in spec["containers"] + spec.get("initContainers", []):
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False, (where, container["name"])
            assert context["readOnlyRootFilesystem"] is True, (where, container["name"])
            assert context["capabilities"] == {"drop": ["ALL"]}, (where, container["name"])
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, (where, container["name"])
            assert "resources" in container and container["resources"]["limits"]["memory"], where


@pytest.mark.parametrize("values_name", ["defaults", "zookeeper"])
def test_long_running_pods_get_a_writable_tmp(chart: Chart, values_name: str) -> None:
    for where, spec in chart.render(values_name).pod_specs():
        if spec.get("restartPolicy") == "Never":
            continue   # the helm test writes nothing
        empty_dirs = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
        for container in spec["containers"]:
            tmp = [m for m in container["volumeMounts"] if m["mountPath"] == "/tmp"]
            assert tmp and tmp[0]["name"] in empty_dirs, where
