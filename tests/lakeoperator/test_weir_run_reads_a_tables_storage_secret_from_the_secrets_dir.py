"""`weir run --secrets-dir DIR` reads the Secret a LakeTable's `storage.secretRef` names from
DIR/<secret>/<key>, as its drivers read theirs, and opens the table on S3 with it. Before, the run used
only its own environment for the table: with no AWS_* variables it failed the table
(NoCredentialsError) and retried until stopped. A Secret the directory lacks is told by name.

The real `weir` command and a real S3 emulator (moto); the process has no AWS credentials."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from lakecore import Table
from tests.support.s3 import S3Server

pytestmark = [pytest.mark.s3]
ROOT = Path(__file__).resolve().parents[2]


def manifest(bucket: str) -> dict:
    return {"apiVersion": "weir.dev/v1alpha1", "kind": "LakeTable", "metadata": {"name": "remote"},
            "spec": {"location": f"s3://{bucket}/orders", "recordKey": ["id"], "buckets": 1,
                     "storage": {"secretRef": {"name": "s3creds", "key": "options.json"}},
                     "schema": [{"name": "id", "type": "int64", "nullable": False},
                                {"name": "v", "type": "string"}]}}


def weir_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {"HOME": str(tmp_path / "home"), "AWS_CONFIG_FILE": str(tmp_path / "none"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"), "AWS_EC2_METADATA_DISABLED": "true",
            "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'operator'}"}
    return subprocess.run([sys.executable, "-c", "from lakeoperator.cli import app; app()", "run", "-f", "m",
                           "--state", "state", "--timeout", "60", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=180, check=False)


def test_the_tables_storage_secret_comes_from_the_secrets_dir(tmp_path: Path, s3_server: S3Server) -> None:
    bucket = f"secrets-{uuid.uuid4().hex[:8]}"
    s3_server.client().create_bucket(Bucket=bucket)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "table.yaml").write_text(json.dumps(manifest(bucket)))

    missing = weir_run(tmp_path, "--secrets-dir", "secrets")
    assert missing.returncode != 0
    said = missing.stdout + missing.stderr
    assert "no Secret 's3creds' with key 'options.json'" in said, said

    (tmp_path / "secrets" / "s3creds").mkdir(parents=True)
    (tmp_path / "secrets" / "s3creds" / "options.json").write_text(json.dumps(s3_server.s3fs_options()))
    done = weir_run(tmp_path, "--secrets-dir", "secrets")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "LakeTable/remote: Ready" in done.stdout, done.stdout
    table = Table.open(f"s3://{bucket}/orders", storage_options=s3_server.s3fs_options())
    assert table.config.name == "remote" and table.config.buckets == 1
