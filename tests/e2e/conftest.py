"""The kind suite runs only when asked (`make e2e` sets WEIR_E2E=1) on a machine with a Docker engine.
Asked for and impossible: the tests fail saying why. Not asked for (the default run, CI): skipped with
the reason, so a green run never hides that they did not run."""

from __future__ import annotations

import os

import pytest

from tests.e2e.kind import unavailable


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    ours = [item for item in items if "tests/e2e/" in item.nodeid.replace(os.sep, "/")]
    if not ours:
        return
    why = unavailable()
    asked = os.environ.get("WEIR_E2E") == "1"
    if asked and why is None:
        return
    if asked:   # a skip would read as success in `make e2e`
        raise pytest.UsageError(f"WEIR_E2E=1 but the kind suite cannot run on this machine: {why}")
    reason = ("kind e2e suite: runs with `make e2e` where a Docker engine exists"
              + (f" (here: {why})" if why else " (WEIR_E2E=1 not set)"))
    for item in ours:
        item.add_marker(pytest.mark.skip(reason=reason))
