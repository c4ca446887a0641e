"""The marker service of a write listens on the address its writer options name and gives executors
the host they name, so tasks on other machines call the driver, not themselves. Other hosts are
played by other loopback addresses (127.0.0.2): a request from another process to the advertised URL
reaches the service, and a service bound to one address is not reachable on another."""

from __future__ import annotations

import socket
import subprocess
import sys
from urllib.parse import urlsplit

import pyarrow as pa
import pytest

from lakecore import MarkerOptions, Table, WriteJob, WriterOptions
from lakecore.storage.local import LocalStorage
from lakecore.write.marker_service import MarkerService, ServiceMarkers, advertised_host

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64())])


def create_marker_from_another_process(url: str, instant: str, data_path: str) -> None:
    code = ("import sys; from lakecore.write.marker_service import MarkerClient; "
            "MarkerClient(sys.argv[1], timeout_s=20).create(sys.argv[2], sys.argv[3], 'create')")
    done = subprocess.run([sys.executable, "-c", code, url, instant, data_path], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def start_write(tmp_path, **marker_hosts: str) -> WriteJob:
    t = Table.create(str(tmp_path / "t"), schema=SCHEMA, record_key="id", ordering_field="ts")
    options = WriterOptions(markers=MarkerOptions(batched=True, batch_interval_s=0.01, **marker_hosts))
    return WriteJob.start(t.storage, t.config, t.lock, "upsert", options)


def test_executors_are_given_the_advertised_host_and_reach_the_service_there(tmp_path):
    with start_write(tmp_path, bind_host="0.0.0.0", advertise_host="127.0.0.2") as job:
        markers = job.context().markers
        assert isinstance(markers, ServiceMarkers)
        assert urlsplit(markers.client.url).hostname == "127.0.0.2"
        instant = job.instant.requested_time
        create_marker_from_another_process(markers.client.url, instant, "p/f1.parquet")
        assert job.service is not None
        assert job.service.all_markers(instant) == ["p/f1.parquet.marker.create"]


def test_the_service_listens_only_on_the_bind_address(tmp_path):
    with start_write(tmp_path, bind_host="127.0.0.2") as job:
        url = job.context().markers.client.url  # type: ignore[attr-defined]
        parts = urlsplit(url)
        assert parts.hostname == "127.0.0.2"  # no advertised host: the bind address
        create_marker_from_another_process(url, job.instant.requested_time, "p/f1.parquet")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", parts.port), timeout=5).close()


def test_library_writes_keep_the_service_on_loopback(tmp_path):
    with start_write(tmp_path) as job:
        assert urlsplit(job.context().markers.client.url).hostname == "127.0.0.1"  # type: ignore[attr-defined]


def test_the_advertised_host_defaults_to_the_bind_address_or_this_machine():
    assert advertised_host("10.1.2.3", None) == "10.1.2.3"
    assert advertised_host("0.0.0.0", "driver-svc.ns.svc") == "driver-svc.ns.svc"
    assert advertised_host("0.0.0.0", None) == socket.getfqdn()


def test_an_ipv6_bind_address_makes_a_bracketed_url(tmp_path):
    try:
        socket.create_server(("::1", 0), family=socket.AF_INET6).close()
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    with MarkerService(LocalStorage(str(tmp_path)), host="::1") as svc:
        assert svc.url.startswith("http://[::1]:")
        create_marker_from_another_process(svc.url, "20261122101500123", "p/f1.parquet")
