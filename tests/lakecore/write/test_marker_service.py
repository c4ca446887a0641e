"""The marker service batches markers into a few MARKERS files, answers only once they are durable,
and refuses an instant's markers once early conflict detection (or anyone) rejects it."""

from __future__ import annotations

import json
import pickle
import socket
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator

import pytest

from lakecore.errors import EarlyConflict, InvalidInput, InvalidTableConfig
from lakecore.storage import Storage
from lakecore.storage.local import LocalStorage
from lakecore.write.marker_service import (
    MarkerClient,
    MarkerService,
    MarkerServiceError,
    ServiceMarkers,
    marker_name,
)
from lakecore.write.markers import (
    MARKERS_DIR,
    Marker,
    create_marker,
    delete_markers,
    list_markers,
)

T = "20261122101500123"
FAST = 0.005  # flush interval for tests: the default 50 ms would make them slow, not different


@pytest.fixture
def storage(tmp_path) -> Storage:
    return LocalStorage(str(tmp_path / "t"))


@pytest.fixture
def service(storage) -> Iterator[MarkerService]:
    with MarkerService(storage, batch_interval_s=FAST) as svc:
        yield svc


def batch_files(storage: Storage, instant: str = T) -> dict[str, list[str]]:
    """MARKERS<i> file name -> its lines, as on disk now."""
    out = {}
    for f in storage.list_dir(f"{MARKERS_DIR}/{instant}"):
        name = f.path.rsplit("/", 1)[-1]
        if name.startswith("MARKERS") and name[7:].isdigit():
            out[name] = storage.read(f.path).decode().splitlines()
    return out


def on_disk(storage: Storage, instant: str = T) -> list[str]:
    return [line for lines in batch_files(storage, instant).values() for line in lines]


def run_threads(n: int, target) -> None:
    errors: list[BaseException] = []

    def guarded(k: int) -> None:
        try:
            target(k)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlowStorage(LocalStorage):
    """Writes take a while, so a reply that ran ahead of the write would be caught."""

    def write(self, path: str, data: bytes, *, durable: bool = True) -> None:
        time.sleep(0.02)
        super().write(path, data, durable=durable)


class FlakyStorage(LocalStorage):
    """MARKERS writes fail while `broken` is set."""

    broken = True

    def write(self, path: str, data: bytes, *, durable: bool = True) -> None:
        if self.broken and "/MARKERS" in path:
            raise OSError("disk on fire")
        super().write(path, data, durable=durable)


def test_many_concurrent_clients_get_every_marker_durable_exactly_once(storage, service):
    client = MarkerClient(service.url)

    def writer(k: int) -> None:
        for j in range(200):
            client.create(T, f"p{k % 3}/fg{k}-{j}_0-1-0_{T}.parquet", "create")

    run_threads(8, writer)
    expected = {f"p{k % 3}/fg{k}-{j}_0-1-0_{T}.parquet.marker.create" for k in range(8) for j in range(200)}
    lines = on_disk(storage)
    assert Counter(lines).most_common(1)[0][1] == 1, "a marker was written twice"
    assert set(lines) == expected
    assert 1 < len(batch_files(storage)) <= 20
    assert storage.read(f"{MARKERS_DIR}/{T}/MARKERS.type") == b"BATCHED"
    assert set(service.all_markers(T)) == expected == set(client.markers(T))
    assert set(list_markers(storage, T)) == {
        Marker(T, n.removesuffix(".marker.create"), "create") for n in expected}


def test_a_create_returns_only_once_its_marker_is_on_disk(tmp_path):
    storage = SlowStorage(str(tmp_path / "t"))
    with MarkerService(storage, batch_interval_s=FAST, num_files=4) as svc:
        client = MarkerClient(svc.url)

        def writer(k: int) -> None:
            for j in range(15):
                client.create(T, f"p/f{k}-{j}.parquet", "append")
                assert f"p/f{k}-{j}.parquet.marker.append" in on_disk(storage)

        run_threads(4, writer)
    assert len(batch_files(storage)) == 4


def test_list_markers_reads_direct_and_batched_markers_alike(storage, service):
    MarkerClient(service.url).create(T, "p1/a.parquet", "create")
    MarkerClient(service.url).create(T, "b.parquet", "merge")
    create_marker(storage, Marker(T, "p2/.c.log.1_0-1-0", "append"))
    assert set(list_markers(storage, T)) == {
        Marker(T, "p1/a.parquet", "create"), Marker(T, "b.parquet", "merge"),
        Marker(T, "p2/.c.log.1_0-1-0", "append")}


def test_blank_truncated_and_empty_markers_files_are_tolerated(storage):
    storage.write(f"{MARKERS_DIR}/{T}/MARKERS.type", b"BATCHED")
    storage.write(f"{MARKERS_DIR}/{T}/MARKERS0", b"p/a.parquet.marker.create\n\n  \np/b.parquet.mar")
    storage.write(f"{MARKERS_DIR}/{T}/MARKERS1", b"")
    storage.write(f"{MARKERS_DIR}/{T}/MARKERS2", b"p/a.parquet.marker.create\np/c.parquet.marker.append\n")
    assert list_markers(storage, T) == [Marker(T, "p/a.parquet", "create"),
                                        Marker(T, "p/c.parquet", "append")]


def test_delete_markers_removes_batched_and_direct_markers(storage, service):
    client = MarkerClient(service.url)
    for j in range(30):
        client.create(T, f"p/f{j}.parquet", "create")
    create_marker(storage, Marker(T, "q/g.parquet", "create"))
    delete_markers(storage, T)
    assert storage.list_tree(f"{MARKERS_DIR}/{T}") == []
    assert list_markers(storage, T) == []


def test_the_service_deletes_an_instants_markers_and_forgets_it(storage, service):
    client = MarkerClient(service.url)
    client.create(T, "p/f.parquet", "create")
    service.delete_markers(T)
    assert service.all_markers(T) == [] and storage.list_tree(f"{MARKERS_DIR}/{T}") == []


def test_a_marker_still_queued_when_its_instant_is_deleted_is_refused(storage):
    with MarkerService(storage, batch_interval_s=3600.0) as svc:
        client = MarkerClient(svc.url)
        errors: list[Exception] = []

        def create() -> None:
            try:
                client.create(T, "p/late.parquet", "create")
            except MarkerServiceError as e:
                errors.append(e)

        thread = threading.Thread(target=create)
        thread.start()
        deadline = time.monotonic() + 10
        while not svc.all_markers(T) and time.monotonic() < deadline:
            time.sleep(0.01)
        svc.delete_markers(T)
        thread.join(timeout=10)
        assert len(errors) == 1 and "instant is finished" in str(errors[0])
    assert storage.list_tree(f"{MARKERS_DIR}/{T}") == []


def test_stop_writes_pending_markers_and_answers_their_requests(storage):
    svc = MarkerService(storage, batch_interval_s=3600.0)  # the flusher never ticks on its own
    client = MarkerClient(svc.start())
    threads = [threading.Thread(target=client.create, args=(T, f"p/f{k}.parquet", "create"))
               for k in range(6)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while len(svc.all_markers(T)) < 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert on_disk(storage) == [] and len(svc.all_markers(T)) == 6  # queued, not yet written
    svc.stop()
    for t in threads:
        t.join(timeout=10)
        assert not t.is_alive()
    assert sorted(on_disk(storage)) == [f"p/f{k}.parquet.marker.create" for k in range(6)]
    with pytest.raises(MarkerServiceError):
        MarkerClient(svc.url, timeout_s=1.0).create(T, "p/late.parquet", "create")


def test_an_unreachable_service_fails_fast_with_a_clear_error():
    client = MarkerClient(f"http://127.0.0.1:{free_port()}")
    started = time.monotonic()
    with pytest.raises(MarkerServiceError, match=r"did not answer.*driver is running"):
        client.create(T, "p/f.parquet", "create")
    assert time.monotonic() - started < 5  # refused connections are retried briefly, not for timeout_s


def test_a_service_that_never_answers_does_not_hang_the_client():
    with socket.socket() as silent:  # accepts connections (backlog), never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        client = MarkerClient(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=0.5)
        with pytest.raises(MarkerServiceError):
            client.create(T, "p/f.parquet", "create")


def test_a_marker_that_cannot_be_written_fails_its_request_and_a_retry_succeeds(tmp_path):
    storage = FlakyStorage(str(tmp_path / "t"))
    with MarkerService(storage, batch_interval_s=FAST) as svc:
        client = MarkerClient(svc.url, attempts=2)
        with pytest.raises(MarkerServiceError, match="disk on fire"):
            client.create(T, "p/f.parquet", "create")
        assert svc.all_markers(T) == []
        storage.broken = False
        client.create(T, "p/f.parquet", "create")
    assert on_disk(storage) == ["p/f.parquet.marker.create"]


def test_creating_the_same_marker_twice_is_idempotent(storage, service):
    client = MarkerClient(service.url)
    run_threads(4, lambda k: client.create(T, "p/f.parquet", "create"))
    client.create(T, "p/f.parquet", "create")
    assert on_disk(storage) == ["p/f.parquet.marker.create"]


def test_a_restarted_service_keeps_the_markers_already_on_disk(storage):
    with MarkerService(storage, batch_interval_s=FAST, num_files=3) as first:
        client = MarkerClient(first.url)
        for j in range(10):
            client.create(T, f"p/a{j}.parquet", "create")
    with MarkerService(storage, batch_interval_s=FAST, num_files=3) as second:
        client = MarkerClient(second.url)
        for j in range(10):
            client.create(T, f"p/b{j}.parquet", "create")
        assert len(second.all_markers(T)) == 20
    assert len(list_markers(storage, T)) == 20 and len(batch_files(storage)) == 3


def test_the_conflict_checker_makes_later_requests_of_that_instant_fail(storage, service):
    other = "20261122101500999"
    seen: dict[str, list[str]] = {}
    fired = threading.Event()

    def checker(instant: str, markers: list[str]) -> str | None:
        seen[instant] = markers
        if instant == T and "p/fg7_0-1-0.parquet.marker.create" in markers:
            fired.set()
            return f"write {T} overlaps the older write 20261122101500001 in file group fg7 of p; retry later"
        return None

    client = MarkerClient(service.url)
    client.create(T, "p/fg1_0-1-0.parquet", "create")
    client.create(other, "p/fg1_0-1-0.parquet", "create")
    service.set_conflict_checker(checker, 0.01)
    client.create(T, "p/fg7_0-1-0.parquet", "create")
    assert fired.wait(10)
    deadline = time.monotonic() + 10
    while service.conflict(T) is None and time.monotonic() < deadline:  # recorded just after fn returns
        time.sleep(0.005)
    assert service.conflict(other) is None
    with pytest.raises(EarlyConflict, match="older write 20261122101500001") as caught:
        client.create(T, "p/fg8_0-1-0.parquet", "create")
    assert caught.value.instant == T
    client.create(other, "p/fg8_0-1-0.parquet", "create")  # other instants are unaffected
    assert "p/fg8_0-1-0.parquet.marker.create" not in service.all_markers(T)
    assert "p/fg1_0-1-0.parquet.marker.create" in seen[other]  # every active instant is checked


def test_a_failing_conflict_checker_does_not_stop_marker_creation(storage, service):
    calls = threading.Event()

    def broken(instant: str, markers: list[str]) -> str | None:
        calls.set()
        raise RuntimeError("cannot read the timeline")

    client = MarkerClient(service.url)
    client.create(T, "p/a.parquet", "create")
    service.set_conflict_checker(broken, 0.01)
    assert calls.wait(10)
    client.create(T, "p/b.parquet", "create")
    assert len(on_disk(storage)) == 2


def test_reject_refuses_every_later_marker_of_the_instant(storage, service):
    client = MarkerClient(service.url)
    client.create(T, "p/a.parquet", "create")
    service.reject(T, "operator aborted this write; it restarts after the winner commits")
    service.reject(T, "a second reason is ignored")
    for path in ("p/b.parquet", "p/a.parquet"):
        with pytest.raises(EarlyConflict, match="operator aborted this write"):
            client.create(T, path, "create")
    assert on_disk(storage) == ["p/a.parquet.marker.create"]


def test_the_client_pickles_into_tasks_and_its_conflict_error_back(storage, service):
    client = pickle.loads(pickle.dumps(MarkerClient(service.url)))
    writer = pickle.loads(pickle.dumps(ServiceMarkers(client)))
    writer.create(storage, Marker(T, "p/f_0-1-0.parquet", "create"), "p", "f")
    assert list_markers(storage, T) == [Marker(T, "p/f_0-1-0.parquet", "create")]
    service.reject(T, "stop")
    with pytest.raises(EarlyConflict) as caught:
        client.create(T, "p/g.parquet", "create")
    assert pickle.loads(pickle.dumps(caught.value)).instant == T


def test_bad_marker_requests_are_refused(service):
    client = MarkerClient(service.url)
    with pytest.raises(InvalidInput, match="IO type"):
        client.create(T, "p/f.parquet", "upsert")
    with pytest.raises(InvalidInput, match="data file path"):
        client.create(T, "p/f\n.parquet", "create")
    with pytest.raises(InvalidInput, match="instant time"):
        marker_name("../x", "p/f.parquet", "create")
    request = urllib.request.Request(f"{service.url}/v1/markers/{T}", data=json.dumps({"io_type": "create"})
                                     .encode(), method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=5)
    assert caught.value.code == 400
    caught.value.close()


def test_service_options_are_validated(storage):
    with pytest.raises(InvalidTableConfig):
        MarkerService(storage, num_files=0)
    with pytest.raises(InvalidTableConfig):
        MarkerService(storage).set_conflict_checker(lambda t, m: None, 0)
