"""A driver started as `weir run` and the process kubelet start theirs (spark-submit, the connectors on
SPARK_DIST_CLASSPATH) maps the class-data-sharing archive of `make spark-cds`, through the options the local
launcher gives it when SPARK_SUBMIT_OPTS is not set: with -Xshare:on a JVM the
archive does not fit refuses to start, so a change to the drivers' class path that would quietly make every
Spark test slower again fails here instead. A JVM the archive does not fit starts quietly without it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from lakeoperator.local import local_settings
from tests.support import spark_cds
from tests.support.fixtures import require, require_spark

pytestmark = pytest.mark.spark


def missing_archive() -> str | None:
    archive = spark_cds.archive_path()
    if archive is not None and archive.is_file():
        return None
    return f"{archive} is not there: run `make spark-cds`"


def test_a_weir_run_driver_maps_the_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_spark()
    require("The Spark drivers' class-data-sharing archive", missing_archive())
    assert spark_cds.submit_options() in os.environ["SPARK_SUBMIT_OPTS"]
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")   # as a user's shell runs `weir run`: the launcher's own options
    _, substitutions, env = local_settings()
    job = tmp_path / "job.py"
    job.write_text("from pyspark.sql import SparkSession\n"
                   "print(SparkSession.builder.getOrCreate().range(3).count())\n")
    env["SPARK_SUBMIT_OPTS"] = f"{env['SPARK_SUBMIT_OPTS']} -Xshare:on"
    done = subprocess.run([substitutions["spark-submit"], "--master", "local[1]", str(job)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "3", done.stdout + done.stderr[-3000:]


def test_weir_run_adds_only_the_archive_the_demo_also_the_fast_start_flags_and_a_users_options_win(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`weir run`'s drivers may be long-running writers: they keep the JVM's own JIT and collector (the
    archive costs nothing once a driver runs); the demo's short jobs also run C1 only with one GC thread."""
    require("The Spark drivers' class-data-sharing archive", missing_archive())
    monkeypatch.delenv("SPARK_SUBMIT_OPTS")
    archive = f"-XX:SharedArchiveFile={spark_cds.archive_path()}"
    weir_run = local_settings()[2]["SPARK_SUBMIT_OPTS"]
    assert archive in weir_run and "TieredStopAtLevel" not in weir_run and "UseSerialGC" not in weir_run
    demo = local_settings(fast_start=True)[2]["SPARK_SUBMIT_OPTS"]
    assert archive in demo and "-XX:TieredStopAtLevel=1" in demo and "-XX:+UseSerialGC" in demo
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-Xmx3g")
    assert local_settings(fast_start=True)[2]["SPARK_SUBMIT_OPTS"] == "-Xmx3g"


def test_a_jvm_the_archive_does_not_fit_starts_without_a_word(tmp_path: Path) -> None:
    require("The Spark drivers' class-data-sharing archive", missing_archive())
    java = shutil.which("java")
    assert java is not None
    done = subprocess.run([java, *spark_cds.submit_options().split(), "-cp", str(tmp_path), "-version"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout == "", done.stdout
    assert "warning" not in done.stderr.lower() and "archive" not in done.stderr.lower(), done.stderr
