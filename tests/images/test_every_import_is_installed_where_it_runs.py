"""Every module the code imports is installed where it runs. A third-party module is either a dependency
of a plain `pip install weir` (pyproject.toml's dependencies, or one of theirs) or comes with an extra
that lakecore.cli.errors.EXTRA_OF names, so a command that needs it says which `pip install
'weir[EXTRA]'` brings it instead of crashing. The Spark image installs its Dockerfile's extras, not
`operator`: lakecore and sparkjobs, which run there, import nothing only that extra brings.

Read from the sources (every import statement, also those inside functions) and from this virtualenv's
package metadata, which has every extra installed."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

from packaging.requirements import Requirement

from lakecore.cli.errors import EXTRA_OF
from tests.images.dockerfile import read

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
PACKAGES = {"lakecore": ROOT / "lakecore", "sparkjobs": ROOT / "sparkjobs",
            "lakeoperator": ROOT / "operator" / "lakeoperator"}


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def imports(package: str) -> dict[str, set[str]]:
    """Third-party top-level module -> the files of `package` that import it."""
    found: dict[str, set[str]] = {}
    for path in PACKAGES[package].rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in PACKAGES:
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


@cache
def with_dependencies(requirements: tuple[str, ...]) -> frozenset[str]:
    """The distributions `requirements` install (normalized names), their dependencies included."""
    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = normal(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            more = md.requires(req.name) or []
        except md.PackageNotFoundError:
            continue
        todo.extend(Requirement(r) for r in more)
    return frozenset(seen)


def base() -> frozenset[str]:
    return with_dependencies(tuple(PROJECT["dependencies"]))


def extra(name: str) -> frozenset[str]:
    return with_dependencies(tuple(PROJECT["optional-dependencies"][name]))


@cache
def installed_modules() -> dict[str, list[str]]:
    return dict(md.packages_distributions())


def distributions(module: str) -> set[str]:
    return {normal(d) for d in installed_modules().get(module, ())}


def test_each_module_comes_with_the_plain_install_or_an_extra_the_cli_names() -> None:
    for package in PACKAGES:
        for module, files in sorted(imports(package).items()):
            dists = distributions(module)
            assert dists, f"{module} (imported by {sorted(files)}) is not installed in this virtualenv"
            if dists & base():
                continue
            assert module in EXTRA_OF, (
                f"{module} (imported by {sorted(files)}) is not a dependency of a plain `pip install weir`: "
                "declare it in pyproject.toml's dependencies, or in an extra and in "
                "lakecore.cli.errors.EXTRA_OF")
            assert dists & extra(EXTRA_OF[module]), f"the {EXTRA_OF[module]} extra does not install {module}"


def test_each_extra_the_cli_names_installs_its_module() -> None:
    for module, name in EXTRA_OF.items():
        assert distributions(module) & extra(name), f"EXTRA_OF says {name} installs {module}; it does not"


def test_what_runs_in_the_spark_image_is_installed_there() -> None:
    build = read(ROOT / "images" / "spark" / "Dockerfile").stages[0]
    named = re.search(r'pip install "\.\[([a-z0-9_,]+)\]"', " ".join(r.args for r in build.all("RUN")))
    assert named, "the Spark image's build no longer installs the project with extras"
    extras = named.group(1).split(",")
    assert "operator" not in extras
    installed = base().union(*(extra(e) for e in extras))
    for package in ("lakecore", "sparkjobs"):
        for module, files in sorted(imports(package).items()):
            assert distributions(module) & installed, (
                f"{module} (imported by {sorted(files)}) is not installed in the Spark image (extras "
                f"{extras})")
