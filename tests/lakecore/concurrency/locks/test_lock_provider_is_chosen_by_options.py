"""`lock_from_options` picks the provider a table's options name, and refuses options it cannot use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lakecore.concurrency import InProcessLock, StorageLock, lock_from_options
from lakecore.errors import InvalidTableConfig
from lakecore.storage import open_storage
from tests.lakecore.concurrency.locks.test_lock_contract import REPO_ROOT


def test_storage_is_the_default_and_in_process_is_keyed_by_the_table(tmp_path: Path) -> None:
    storage = open_storage(str(tmp_path / "table"))
    assert isinstance(lock_from_options(storage, {}), StorageLock)
    assert isinstance(lock_from_options(storage, {"provider": "storage", "expiry_s": 5}), StorageLock)
    lock = lock_from_options(storage, {"provider": "in_process", "acquire_timeout_s": "0"})
    assert isinstance(lock, InProcessLock) and storage.uri in lock.describe()


def test_zookeeper_options_reach_the_lock_config(tmp_path: Path) -> None:
    pytest.importorskip("kazoo")
    from lakecore.concurrency.locks.zookeeper import ZooKeeperLock
    from lakecore.concurrency.zookeeper import table_lock_key

    storage = open_storage(str(tmp_path / "table"))
    lock = lock_from_options(storage, {"provider": "zookeeper", "connect": "127.0.0.1:1", "base_path": "/x",
                                       "session_timeout_s": 5, "connection_timeout_s": 2,
                                       "acquire_timeout_s": 7, "acquire_retries": 1})
    assert isinstance(lock, ZooKeeperLock)  # built without connecting: nothing listens on port 1
    cfg = lock.config
    assert (cfg.connect, cfg.base_path, cfg.key) == ("127.0.0.1:1", "/x", table_lock_key(storage.uri))
    assert (cfg.session_timeout_s, cfg.connection_timeout_s, cfg.acquire_timeout_s, cfg.acquire_retries) == (
        5, 2, 7, 1)
    keyed = lock_from_options(storage, {"provider": "zookeeper", "connect": "zk:2181", "key": "p/f1"})
    assert isinstance(keyed, ZooKeeperLock) and keyed.path == "/weir/locks/p%2Ff1"


@pytest.mark.parametrize(("options", "complaint"), [
    ({"provider": "etcd"}, "unknown lock provider 'etcd'; use one of 'zookeeper'"),
    ({"provider": "zookeeper"}, "needs a connect string"),
    ({"provider": "zookeeper", "connect": "  "}, "needs a connect string"),
    ({"provider": "zookeeper", "connect": "zk:port"}, "malformed"),
    ({"provider": "zookeeper", "connect": "zk:2181", "base_path": "weir/"}, "base_path"),
    ({"provider": "zookeeper", "connect": "zk:2181", "session_timeout_s": 0}, "session_timeout_s"),
    ({"provider": "storage", "timeout": 3}, "unknown lock option"),
    ({"provider": "storage", "expiry_s": "soon"}, "expiry_s must be a number"),
    ({"provider": "storage", "acquire_timeout_s": -1}, "acquire_timeout_s must be >= 0"),
    ({"provider": "in_process", "key": 3}, "key must be a string"),
])
def test_unusable_options_are_refused_with_a_reason(tmp_path: Path, options: dict[str, Any],
                                                    complaint: str) -> None:
    if options.get("connect"):
        pytest.importorskip("kazoo")
    with pytest.raises(InvalidTableConfig, match=complaint):
        lock_from_options(open_storage(str(tmp_path / "table")), options)


def test_kazoo_is_imported_only_when_zookeeper_is_asked_for(tmp_path: Path) -> None:
    script = ("import sys; from lakecore.concurrency import lock_from_options; "
              "from lakecore.storage import open_storage; "
              f"lock_from_options(open_storage({str(tmp_path)!r}), {{'provider': 'storage'}}); "
              "assert 'kazoo' not in sys.modules, 'kazoo imported'")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
