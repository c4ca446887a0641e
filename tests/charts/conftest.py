from __future__ import annotations

from pathlib import Path

import pytest

from tests.charts.chart import Chart


@pytest.fixture(scope="session")
def chart(kube_tools: Path) -> Chart:
    """The chart, rendered by the pinned helm; each values set is rendered once per session."""
    return Chart(kube_tools / "helm")
