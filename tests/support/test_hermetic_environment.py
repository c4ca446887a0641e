"""Tests never see the developer's HOME, kubeconfig or AWS credentials."""

from __future__ import annotations

import os
from pathlib import Path


def test_home_and_kubeconfig_are_throw_away_files(_hermetic_home: Path) -> None:
    assert Path(os.environ["HOME"]) == _hermetic_home
    kubeconfig = Path(os.environ["KUBECONFIG"])
    assert kubeconfig.is_relative_to(_hermetic_home)
    assert "clusters: []" in kubeconfig.read_text()
    assert "AWS_SECRET_ACCESS_KEY" not in os.environ
