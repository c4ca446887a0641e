"""How long a process waits for ZooKeeper unless told: WEIR_ZOOKEEPER_CONNECTION_TIMEOUT_S, else 15 s; the
lock and the writer registry take it as their default, an explicit value still wins, and a value that is
not a positive number is a one-line error naming the variable."""

from __future__ import annotations

import pytest

from lakecore.concurrency.liveness.writers import ZooKeeperWriterRegistry
from lakecore.concurrency.locks.zookeeper import ZooKeeperLockConfig
from lakecore.concurrency.zookeeper import CONNECTION_TIMEOUT_ENV, Endpoint, process_connection_timeout
from lakecore.errors import InvalidTableConfig


def test_unset_it_is_fifteen_seconds_and_set_it_is_the_default_everywhere(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert process_connection_timeout({}) == 15.0
    assert process_connection_timeout({CONNECTION_TIMEOUT_ENV: " "}) == 15.0
    monkeypatch.setenv(CONNECTION_TIMEOUT_ENV, "2.5")
    assert ZooKeeperLockConfig("127.0.0.1:2181", "t").connection_timeout_s == 2.5
    assert Endpoint("127.0.0.1:2181").connection_timeout_s == 2.5
    assert ZooKeeperWriterRegistry("127.0.0.1:2181").settings.connection_timeout_s == 2.5
    assert ZooKeeperLockConfig("127.0.0.1:2181", "t", connection_timeout_s=7).connection_timeout_s == 7
    told = ZooKeeperWriterRegistry("127.0.0.1:2181", connection_timeout_s=7)
    assert told.settings.connection_timeout_s == 7


@pytest.mark.parametrize("text", ["soon", "0", "-1", "nan", "inf"])
def test_a_value_that_is_not_a_positive_number_says_what_to_set(text: str) -> None:
    with pytest.raises(InvalidTableConfig, match=f"{CONNECTION_TIMEOUT_ENV}='{text}' is not a number of "
                                                 "seconds > 0; set it to e.g. 5"):
        process_connection_timeout({CONNECTION_TIMEOUT_ENV: text})
