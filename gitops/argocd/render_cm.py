"""Print argocd-cm-health.yaml: the Lua health checks in health/ as argocd-cm keys (standard library only).

    python gitops/argocd/render_cm.py > gitops/argocd/argocd-cm-health.yaml

Argo CD reads a custom resource's health check from the argocd-cm key
`resource.customizations.health.<group>_<Kind>`; this renders one key per health/<group>/<Kind>/health.lua
(the layout of Argo CD's resource_customizations), so the .lua files stay the one source.
tests/gitops keeps the committed file equal to this rendering.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REGENERATE = "python gitops/argocd/render_cm.py > gitops/argocd/argocd-cm-health.yaml"


def render(health_dir: Path = HERE / "health") -> str:
    lines = [
        f"# Generated from gitops/argocd/health/*/*/health.lua by `{REGENERATE}`; do not edit.",
        "# Merge into Argo CD's argocd-cm (docs/gitops.md), e.g.:",
        "#   kubectl -n argocd patch configmap argocd-cm --type merge --patch-file argocd-cm-health.yaml",
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata:",
        "  name: argocd-cm",
        "  labels:",
        "    app.kubernetes.io/name: argocd-cm",
        "    app.kubernetes.io/part-of: argocd",
        "data:",
    ]
    for script in sorted(health_dir.glob("*/*/health.lua")):
        group, kind = script.parent.parent.name, script.parent.name
        lines.append(f"  resource.customizations.health.{group}_{kind}: |")
        lines.extend(f"    {line}" if line else "" for line in script.read_text().splitlines())
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
