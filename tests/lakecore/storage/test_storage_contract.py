"""One contract, run against every storage backend (local disk, file://, memory://, S3 on moto)."""

import pickle
import threading

import pyarrow as pa
import pytest

from lakecore.errors import AlreadyExists
from lakecore.formats import read_file, write_file


def test_write_read_overwrite(storage):
    storage.write("a/b.json", b"1")
    storage.write("a/b.json", b"22")
    assert storage.read("a/b.json") == b"22"
    assert storage.exists("a/b.json") and not storage.exists("a/c.json")
    with pytest.raises(FileNotFoundError):
        storage.read("a/missing")


def test_write_if_absent_has_exactly_one_winner(storage):
    storage.write_if_absent("x/once", b"first")
    with pytest.raises(AlreadyExists):
        storage.write_if_absent("x/once", b"second")
    assert storage.read("x/once") == b"first"


def test_racing_creators_one_wins(storage):
    wins, losses = [], []

    def race(i):
        try:
            storage.write_if_absent("race/lock", str(i).encode())
            wins.append(i)
        except AlreadyExists:
            losses.append(i)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(wins) == 1 and len(losses) == 7
    assert storage.read("race/lock") == str(wins[0]).encode()


def test_listing_and_delete(storage):
    for p in ("d/1", "d/2", "d/sub/3"):
        storage.write(p, b"x")
    assert sorted(f.path for f in storage.list_dir("d")) == ["d/1", "d/2"]
    assert sorted(f.path for f in storage.list_tree("d")) == ["d/1", "d/2", "d/sub/3"]
    assert storage.list_dir("nothing") == [] and storage.list_tree("nothing") == []
    assert sorted(storage.list_names("d")) == ["1", "2"] and storage.list_names("nothing") == []
    storage.delete("d/1")
    storage.delete("d/1")  # deleting a missing file is fine
    assert sorted(f.path for f in storage.list_dir("d")) == ["d/2"]


def test_parquet_round_trip_and_pickling(storage):
    t = pa.table({"k": [1, 2, 3], "s": ["a", "b", None]})
    size = write_file(storage, "p/part/file.parquet", t, compression="zstd")
    assert size > 0
    clone = pickle.loads(pickle.dumps(storage))
    assert read_file(clone, "p/part/file.parquet").equals(t)
    assert read_file(storage, "p/part/file.parquet", ["s", "missing"]).column_names == ["s"]
