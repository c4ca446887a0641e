"""`weir table create --zookeeper` records the ZooKeeper lock; `weir table set-lock` changes the recorded
lock; `describe` shows it; a bad combination of options is refused with what to do."""

from __future__ import annotations

import json

from tests.lakecore.cli.test_weir_table_commands import weir


def test_create_records_the_zookeeper_lock(tmp_path):
    uri = str(tmp_path / "t")
    code, out = weir("table", "create", uri, "--schema", "id:int64", "--record-key", "id",
                     "--zookeeper", "zk-0:2181,zk-1:2181", "--json")
    assert code == 0, out
    lock = json.loads(out)["lock"]
    assert lock["provider"] == "zookeeper" and lock["connect"] == "zk-0:2181,zk-1:2181"
    assert lock["path"].startswith("/weir/locks/")
    assert json.loads(weir("table", "describe", uri, "--json")[1])["config"]["lock"] == lock


def test_set_lock_between_storage_and_in_process(tmp_path):
    uri = str(tmp_path / "t")
    assert weir("table", "create", uri, "--schema", "id:int64", "--record-key", "id")[0] == 0
    assert json.loads(weir("table", "describe", uri, "--json")[1])["config"]["lock"] == {
        "provider": "storage"}
    code, out = weir("table", "set-lock", uri, "--lock-provider", "in_process", "--json")
    assert code == 0, out
    assert json.loads(out) == {"before": {"provider": "storage"}, "after": {"provider": "in_process"}}
    described = json.loads(weir("table", "describe", uri, "--json")[1])
    assert described["config"]["lock"] == {"provider": "in_process"}


def test_options_that_do_not_go_together_are_refused(tmp_path):
    uri = str(tmp_path / "t")
    code, out = weir("table", "create", uri, "--schema", "id:int64", "--record-key", "id",
                     "--lock-provider", "storage", "--zookeeper", "zk:2181")
    assert code == 1 and "--lock-provider zookeeper" in out, out
    code, out = weir("table", "create", uri, "--schema", "id:int64", "--record-key", "id",
                     "--lock-provider", "zookeeper")
    assert code == 1 and "needs --zookeeper" in out, out
    code, out = weir("table", "create", uri, "--schema", "id:int64", "--record-key", "id",
                     "--lock-provider", "flock")
    assert code == 1 and "unknown lock provider" in out, out
