"""The Dockerfiles agree with the project they package: what they copy exists and reaches the build
context, they run as a non-root numeric user, install the extras and pins of pyproject.toml, put the job
files where the operator's driver pods look for them, and are named as the operator's defaults say."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from lakeoperator.builders.driver_pod import PodSettings, build_service_pod, build_writer_pod
from lakeoperator.main import OperatorConfig
from lakeoperator.specs import ObjectRef, parse_lake_table, parse_lake_writer, parse_table_service
from tests.images.dockerfile import Dockerfile, Stage, read
from tests.lakeoperator.bodies import lake_table, lake_writer, table_service

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = PYPROJECT["project"]["version"]
IMAGES = {"operator": f"ghcr.io/weir-dev/weir-operator:{VERSION}", "spark": PodSettings().default_image}
EXTRAS = {"operator": ["operator", "zookeeper", "s3", "publish", "catalog"],
          "spark": ["spark", "zookeeper", "s3", "publish", "catalog"]}
VENV_PYTHON = "/opt/weir/venv/bin/python"


def pins(extra: str) -> dict[str, str]:
    out = {}
    for requirement in PYPROJECT["project"]["optional-dependencies"][extra]:
        name, _, version = requirement.partition("==")
        out[name.split("[")[0].lower()] = version
    return out


@pytest.fixture(scope="module", params=["operator", "spark"])
def image(request: pytest.FixtureRequest) -> tuple[str, Dockerfile]:
    return request.param, read(ROOT / "images" / request.param / "Dockerfile")


def ignored(path: str) -> bool:
    """Whether .dockerignore keeps `path` (relative to the root) out of the build context."""
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    parts = path.rstrip("/").split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(fnmatch.fnmatch(prefix, pattern.lstrip("/")) for pattern in patterns for prefix in prefixes)


def copies(stage: Stage) -> list[tuple[list[str], str]]:
    """(sources, destination) of the stage's COPYs from the build context."""
    out = []
    for copy in stage.all("COPY"):
        words = copy.words()
        if any(w.startswith("--from") for w in words):
            continue
        words = [w for w in words if not w.startswith("--")]
        out.append((words[:-1], words[-1]))
    return out


def test_every_copied_source_exists_and_reaches_the_build_context(image: tuple[str, Dockerfile]) -> None:
    _, dockerfile = image
    for stage in dockerfile.stages:
        for sources, _ in copies(stage):
            for source in sources:
                assert (ROOT / source).exists(), f"COPY {source}: no such path in the repository"
                assert not ignored(source), f"COPY {source}: .dockerignore leaves it out of the context"


def test_the_final_stage_runs_as_a_non_root_numeric_user(image: tuple[str, Dockerfile]) -> None:
    _, dockerfile = image
    users = dockerfile.final.all("USER")
    assert users, "the final stage sets no USER: it would run as root"
    uid, _, gid = users[-1].args.partition(":")
    assert uid.isdigit() and int(uid) != 0, f"USER {users[-1].args}: use a numeric non-root uid"
    assert not gid or (gid.isdigit() and int(gid) != 0)


def test_the_base_is_the_slim_python_pyproject_asks_for(image: tuple[str, Dockerfile]) -> None:
    _, dockerfile = image
    floor = re.fullmatch(r">=(\d+\.\d+)", PYPROJECT["project"]["requires-python"])
    assert floor is not None
    assert {s.base for s in dockerfile.stages} == {f"python:{floor.group(1)}-slim-bookworm"}
    assert len(dockerfile.stages) == 2 and dockerfile.stages[0].name == "build"


def test_the_project_is_installed_with_its_extras_at_pyprojects_pins(image: tuple[str, Dockerfile]) -> None:
    name, dockerfile = image
    build = dockerfile.stages[0]
    install = " ".join(r.args for r in build.all("RUN"))
    assert f'pip install ".[{",".join(EXTRAS[name])}]"' in install
    for extra in EXTRAS[name]:
        assert pins(extra), f"pyproject.toml has no extra {extra!r}"
    assert dockerfile.stage_args(dockerfile.final)["VERSION"] == VERSION
    if name == "spark":
        pinned = dockerfile.stage_args(build)["PYSPARK_VERSION"]
        assert pinned == pins("spark")["pyspark"]
        assert 'pyspark==${PYSPARK_VERSION}' in install
    assert any(i.args.startswith("--from=build /opt/weir/venv") for i in dockerfile.final.all("COPY"))


def test_each_image_is_built_under_the_name_the_operator_and_chart_use(image: tuple[str, Dockerfile]) -> None:
    name, _ = image
    text = (ROOT / "images" / name / "Dockerfile").read_text()
    assert f"-t {IMAGES[name]} ." in text
    labels = " ".join(i.args for i in read(ROOT / "images" / name / "Dockerfile").final.all("LABEL"))
    assert f'org.opencontainers.image.title="weir-{name}"' in labels
    assert IMAGES[name] in (ROOT / "images" / "README.md").read_text()


def test_the_operator_image_runs_weir_operator_and_exposes_its_ports() -> None:
    final = read(ROOT / "images" / "operator" / "Dockerfile").final
    assert final.all("ENTRYPOINT")[-1].words() == ["weir", "operator"]
    assert PYPROJECT["project"]["scripts"]["weir"] == "lakeoperator.console:app"
    config = OperatorConfig()
    assert final.all("EXPOSE")[-1].words() == [str(config.metrics_port), str(config.liveness_port)]
    assert final.env()["PATH"].startswith("/opt/weir/venv/bin:")


def test_the_spark_image_holds_every_job_file_a_driver_pod_names() -> None:
    final = read(ROOT / "images" / "spark" / "Dockerfile").final
    settings = PodSettings()
    copied = {f"{dest.rstrip('/')}/{Path(src).name}" for sources, dest in copies(final) for src in sources}
    table = parse_lake_table(lake_table())
    owner = ObjectRef("lake", "orders-ingest", "uid-1", 1)
    pods = [build_writer_pod(owner, parse_lake_writer(lake_writer(mode=mode, **extra)), table, "s-1")
            for mode, extra in (("streaming", {}), ("batch", {"restartPolicy": {"type": "OnFailure"}}))]
    pods.append(build_service_pod(owner, parse_table_service(table_service()), table, "r-1"))
    for pod in pods:
        container = pod["spec"]["containers"][0]
        assert container["image"] == settings.default_image
        assert container["command"] == [settings.spark_submit]
        job = next(a for a in container["args"] if a.endswith(".py"))
        assert job.startswith(settings.jobs_dir + "/") and job in copied, f"{job} is not in the image"
    env = final.env()
    assert env["PYSPARK_PYTHON"] == env["PYSPARK_DRIVER_PYTHON"] == VENV_PYTHON
    assert env["PATH"].startswith("/opt/weir/venv/bin:")       # spark-submit is pyspark's, in the venv
    assert env["SPARK_HOME"] == "/opt/weir/venv/lib/python3.11/site-packages/pyspark"
    assert final.all("ENTRYPOINT")[-1].words() == ["/usr/bin/tini", "--", "/opt/weir/entrypoint.sh"]
