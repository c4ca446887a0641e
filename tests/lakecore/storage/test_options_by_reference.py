"""Storage options by reference: a storage opened with the name of an environment variable or file
holding its options pickles with the name only, and another process that unpickles it reads the
options from its own environment. Missing or malformed sources fail with an error that names the
source and never quotes what it holds."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import uuid

import pytest

from lakecore.errors import InvalidStorageOptions, InvalidTableConfig
from lakecore.storage import OptionsRef, open_storage

SECRET = f"s3cr3t-{uuid.uuid4().hex}"


def test_options_come_from_the_file_then_the_variable_then_the_literals(tmp_path, monkeypatch):
    path = tmp_path / "options.json"
    path.write_text(json.dumps({"key": "from-file", "secret": SECRET, "client_kwargs": {"region_name": "r"}}))
    monkeypatch.setenv("WEIR_TEST_OPTIONS", json.dumps({"key": "from-env", "endpoint_url": "http://env"}))
    ref = OptionsRef(env="WEIR_TEST_OPTIONS", file=str(path), literal={"endpoint_url": "http://literal"})
    assert ref.resolve() == {"key": "from-env", "secret": SECRET, "client_kwargs": {"region_name": "r"},
                             "endpoint_url": "http://literal"}
    assert OptionsRef(literal={"endpoint_url": "e"}).resolve() == {"endpoint_url": "e"}


@pytest.mark.parametrize("held", ["", "{not json " + SECRET, json.dumps([SECRET]), None])
def test_a_missing_or_malformed_variable_fails_without_quoting_it(monkeypatch, held):
    if held is None:
        monkeypatch.delenv("WEIR_TEST_OPTIONS", raising=False)
    else:
        monkeypatch.setenv("WEIR_TEST_OPTIONS", held)
    with pytest.raises(InvalidStorageOptions, match="WEIR_TEST_OPTIONS") as err:
        OptionsRef(env="WEIR_TEST_OPTIONS").resolve()
    assert SECRET not in str(err.value) and isinstance(err.value, InvalidTableConfig)


def test_a_missing_or_malformed_file_fails_without_quoting_it(tmp_path):
    with pytest.raises(InvalidStorageOptions, match=r"cannot be read.*mount it"):
        OptionsRef(file=str(tmp_path / "absent.json")).resolve()
    bad = tmp_path / "bad.json"
    bad.write_text("secret = " + SECRET)
    with pytest.raises(InvalidStorageOptions, match="is not JSON") as err:
        OptionsRef(file=str(bad)).resolve()
    assert SECRET not in str(err.value)


def test_opening_fails_where_the_reference_does_not_resolve(monkeypatch):
    monkeypatch.delenv("WEIR_TEST_OPTIONS", raising=False)
    with pytest.raises(InvalidStorageOptions, match="not set in this process"):
        open_storage("memory://weir-tests/t", OptionsRef(env="WEIR_TEST_OPTIONS"))


def test_a_local_table_resolves_its_reference_too(tmp_path, monkeypatch):
    """A local path needs no credentials, but a reference naming a file that is not there is a mistake
    (a Secret not mounted) all the same: told where the storage is opened, not ignored."""
    import pyarrow as pa

    from lakecore import Table
    from lakecore.storage.local import LocalStorage

    where = tmp_path / "t"
    with pytest.raises(InvalidStorageOptions, match=r"absent.json cannot be read.*mount it"):
        Table.create(str(where), schema=pa.schema([("id", pa.int64())]), record_key="id",
                     storage_options=OptionsRef(file=str(tmp_path / "absent.json")))
    assert not where.exists()
    monkeypatch.delenv("WEIR_TEST_OPTIONS", raising=False)
    with pytest.raises(InvalidStorageOptions, match="not set in this process"):
        open_storage(f"file://{where}", OptionsRef(env="WEIR_TEST_OPTIONS"))
    (tmp_path / "options.json").write_text(json.dumps({"fsync": False}))
    opened = open_storage(str(where), OptionsRef(file=str(tmp_path / "options.json")))
    assert isinstance(opened, LocalStorage) and opened._fsync is False   # the file's option taken


@pytest.mark.s3
def test_a_pickled_storage_carries_the_reference_and_resolves_it_where_unpickled(s3_server, monkeypatch):
    bucket = f"weir-{uuid.uuid4().hex[:12]}"
    s3_server.client().create_bucket(Bucket=bucket)
    options = {**s3_server.s3fs_options(), "secret": SECRET}  # moto takes any secret
    monkeypatch.setenv("WEIR_TEST_OPTIONS", json.dumps(options))
    storage = open_storage(f"s3://{bucket}/t", OptionsRef(env="WEIR_TEST_OPTIONS"))
    storage.write("a.txt", b"written by the parent")
    by_value = pickle.dumps(open_storage(f"s3://{bucket}/t", options))
    assert SECRET.encode() in by_value  # what a task closure carried before
    by_reference = pickle.dumps(storage)
    assert SECRET.encode() not in by_reference
    code = ("import pickle, sys; s = pickle.loads(sys.stdin.buffer.read()); "
            "sys.stdout.write(s.read('a.txt').decode()); s.write('b.txt', b'written by the child')")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    child = subprocess.run([sys.executable, "-c", code], input=by_reference, env=env, capture_output=True,
                           timeout=60)
    assert child.returncode == 0, child.stderr.decode()[-2000:]
    assert child.stdout == b"written by the parent"
    assert storage.read("b.txt") == b"written by the child"
    env.pop("WEIR_TEST_OPTIONS")
    child = subprocess.run([sys.executable, "-c", code], input=by_reference, env=env, capture_output=True,
                           timeout=60)
    assert child.returncode != 0 and b"InvalidStorageOptions" in child.stderr
    assert b"variable WEIR_TEST_OPTIONS that should hold the storage options is not set" in child.stderr
