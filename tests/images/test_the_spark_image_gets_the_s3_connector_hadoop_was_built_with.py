"""images/spark/install-s3a.sh, run against a Maven-layout repository served over HTTP on 127.0.0.1: it
takes hadoop-aws of the Hadoop release pyspark's jars are, and the AWS SDK bundle version that release's
POM names; files that do not match their published SHA-1 fail the build and are not installed."""

from __future__ import annotations

import functools
import hashlib
import http.server
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "images" / "spark" / "install-s3a.sh"
HADOOP, SDK = "3.5.0", "2.35.4"


def publish(repo: Path, path: str, body: bytes, *, sha1: str | None = None) -> None:
    target = repo / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(body)
    (repo / f"{path}.sha1").write_text(sha1 or hashlib.sha1(body).hexdigest())


@pytest.fixture
def maven(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    repo = tmp_path / "repo"
    publish(repo, f"org/apache/hadoop/hadoop-project/{HADOOP}/hadoop-project-{HADOOP}.pom",
            f"<project><properties><aws-java-sdk-v2.version>{SDK}</aws-java-sdk-v2.version>"
            "</properties></project>\n".encode())
    publish(repo, f"org/apache/hadoop/hadoop-aws/{HADOOP}/hadoop-aws-{HADOOP}.jar", b"hadoop-aws classes")
    publish(repo, f"software/amazon/awssdk/bundle/{SDK}/bundle-{SDK}.jar", b"sdk classes")
    handler = functools.partial(Quiet, directory=str(repo))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield repo, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def pyspark_jars(tmp_path: Path) -> Path:
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / f"hadoop-client-api-{HADOOP}.jar").write_bytes(b"")
    (jars / f"hadoop-client-runtime-{HADOOP}.jar").write_bytes(b"")
    return jars


def install(jars: Path, repo_url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), str(jars)],
                          env={"PATH": "/usr/bin:/bin", "MAVEN_REPO": repo_url},
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_connector_of_pysparks_hadoop_and_the_sdk_its_pom_names_are_installed(
        maven: tuple[Path, str], tmp_path: Path) -> None:
    _, url = maven
    jars = pyspark_jars(tmp_path)
    done = install(jars, url)
    assert done.returncode == 0, done.stderr
    assert (jars / f"hadoop-aws-{HADOOP}.jar").read_bytes() == b"hadoop-aws classes"
    assert (jars / f"awssdk-bundle-{SDK}.jar").read_bytes() == b"sdk classes"
    assert f"hadoop-aws {HADOOP} and AWS SDK bundle {SDK}" in done.stdout


def test_a_file_that_does_not_match_its_checksum_fails_and_is_not_installed(
        maven: tuple[Path, str], tmp_path: Path) -> None:
    repo, url = maven
    publish(repo, f"software/amazon/awssdk/bundle/{SDK}/bundle-{SDK}.jar", b"tampered", sha1="0" * 40)
    jars = pyspark_jars(tmp_path)
    done = install(jars, url)
    assert done.returncode != 0 and "does not match its published SHA-1" in done.stderr
    assert not (jars / f"awssdk-bundle-{SDK}.jar").exists()


def test_a_directory_without_pysparks_hadoop_is_refused_by_name(maven: tuple[Path, str],
                                                                 tmp_path: Path) -> None:
    _, url = maven
    done = install(tmp_path, url)
    assert done.returncode == 1 and "no hadoop-client-api-*.jar" in done.stderr
