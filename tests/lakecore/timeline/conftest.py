"""Fixtures for the timeline tests."""

import pytest

from lakecore.timeline import checkpoint


@pytest.fixture
def small_checkpoints(monkeypatch: pytest.MonkeyPatch) -> int:
    """Checkpoints every few instants, so a small table's history files hold several row groups."""
    monkeypatch.setattr(checkpoint, "CHECKPOINT_EVERY", 3)
    return 3
