"""The package layout keeps the standard library's `operator` importable next to `lakeoperator`."""

from __future__ import annotations

import importlib.util
import sys
from importlib.machinery import PathFinder
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_operator_folder_cannot_shadow_the_stdlib_module() -> None:
    # The repo root first on the path is the worst case (`python -c`, Spark workers with cwd on the path);
    # `operator` is usually imported before that can matter, so ask the path finder directly.
    spec = PathFinder.find_spec("operator", [str(REPO_ROOT), *sys.path])
    assert spec is not None and spec.origin is not None
    assert not Path(spec.origin).is_relative_to(REPO_ROOT), spec.origin


def test_lakeoperator_is_the_package_under_the_operator_folder() -> None:
    spec = importlib.util.find_spec("lakeoperator")
    assert spec is not None and spec.origin is not None
    assert Path(spec.origin) == REPO_ROOT / "operator" / "lakeoperator" / "__init__.py"
