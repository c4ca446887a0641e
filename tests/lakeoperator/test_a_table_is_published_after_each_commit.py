"""A LakeTable with spec.publish: after each commit the operator's pass (here `weir run`'s runner, the
same reconcile core the controller runs) publishes every target, registers the Iceberg table in the
catalog, and the table's status says per target what its readers see; `publishedInstant` (the
`kubectl get lt` column) is the instant every target shows. Readers of both formats and of the
catalog read exactly `Table.read()`; `weir describe` shows each target. A target that fails (a
catalog that cannot be reached) says why in its entry and an Event, the others publish, and the next
pass retries it; an operator without pyiceberg names the extra. `weir run -f` publishes a table it
adopts with commits. The spec's rules: a catalog without an Iceberg target, a merged view of column
groups, a malformed table name."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from pyiceberg.catalog import load_catalog

from lakecore import Table
from lakeoperator.builders.driver_pod import PodSettings
from lakeoperator.launch.local import LocalLauncher
from lakeoperator.local import Runner, StateDir, apply
from lakeoperator.plan.table import desired_config
from lakeoperator.specs import SpecError, parse_lake_table
from lakeoperator.views import describe_sections
from tests.lakecore.publish import readers
from tests.lakeoperator.kube.manifests import table
from tests.lakeoperator.local_run import TABLE, weir_run
from tests.lakeoperator.test_statuses_fit_the_crd_schemas import fits
from tests.support.operator import ROOT
from tests.support.zookeeper import HOST, free_port

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("amount", pa.int64()), ("ts", pa.int64())])
CATALOG = {"table": "lake.orders", "name": "local", "secretRef": {"name": "catalog", "key": "properties"}}


def put(state: StateDir, *docs: dict[str, Any]) -> None:
    for doc in docs:
        doc["metadata"].setdefault("namespace", "default")
    apply(state, list(docs), datetime.now(UTC))


def status(state: StateDir) -> dict[str, Any]:
    r = state.load("LakeTable", "default", "orders")
    assert r is not None
    return dict(r.body.get("status") or {})


def rows(ids: list[int], amount: int, ts: int) -> pa.Table:
    return pa.table({"id": ids, "amount": [amount] * len(ids), "ts": [ts] * len(ids)}, schema=SCHEMA)


def shown(state: StateDir) -> dict[str, dict[str, Any]]:
    return {e["format"]: e for e in status(state).get("published") or []}


def catalog_config(monkeypatch: pytest.MonkeyPatch, **properties: str) -> None:
    """The operator process's pyiceberg configuration (`weir run` holds no Secrets: the process's own
    names the catalog): PYICEBERG_CATALOG__LOCAL__*, which pyiceberg reads once, at import."""
    import pyiceberg.catalog
    from pyiceberg.utils.config import Config

    for key, value in properties.items():
        monkeypatch.setenv(f"PYICEBERG_CATALOG__LOCAL__{key.upper()}", value)
    monkeypatch.setattr(pyiceberg.catalog, "_ENV_CONFIG", Config())


def check_readers(location: str, catalog_uri: str) -> None:
    want = Table.open(location).read()
    for reader, target in (("iceberg", "iceberg"), ("delta", "delta")):
        readers.assert_same(readers.READERS[reader](location), readers.expected(want, target), ["id"],
                            reader=reader)
    catalog = load_catalog("local", type="sql", uri=catalog_uri)
    readers.assert_same(readers.normalized(catalog.load_table("lake.orders").scan().to_arrow()),
                        readers.expected(want, "iceberg"), ["id"], reader="catalog")


def test_each_commit_is_published_and_registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    catalog_config(monkeypatch, type="sql", uri=catalog_uri)
    state = StateDir(tmp_path / "state")
    runner = Runner(state, LocalLauncher(tmp_path / "pods"), PodSettings())   # writes from the test
    put(state, table(tmp_path, publish={"targets": ["iceberg", "delta"], "catalog": CATALOG}))
    runner.step()
    assert status(state)["phase"] == "Ready" and not status(state).get("published")  # nothing to show yet
    location = str(tmp_path / "lake" / "orders")
    t = Table.open(location)

    t.upsert(rows(list(range(10)), 1, 1))
    runner.step()
    first = t.timeline().last_completed().requested_time
    entries = shown(state)
    assert {e["instant"] for e in entries.values()} == {first} and status(state)["publishedInstant"] == first
    assert entries["iceberg"]["location"] == f"{location}/metadata/v1.metadata.json"
    assert "lake.orders registered" in entries["iceberg"]["catalog"] and "error" not in entries["iceberg"]
    assert entries["delta"]["location"] == location and entries["delta"]["snapshot"] == 0
    check_readers(location, catalog_uri)

    t.upsert(rows([1, 2], 5, 2))
    t.delete(pa.table({"id": pa.array([3, 4], pa.int64())}))
    runner.step()
    second = t.timeline().last_completed().requested_time
    assert status(state)["publishedInstant"] == second != first
    assert "lake.orders moved" in shown(state)["iceberg"]["catalog"]
    fits("laketables", status(state))
    check_readers(location, catalog_uri)
    described = describe_sections(state.load("LakeTable", "default", "orders").body, [], datetime.now(UTC))
    lines = dict(described[0].pairs)
    assert lines["Published (delta)"] == f"{second} ({location})"
    iceberg = f"{second} ({location}/metadata/v2.metadata.json); catalog 'local'"
    assert lines["Published (iceberg)"].startswith(iceberg)
    before = status(state)
    runner.step()   # nothing new: nothing published, nothing changes
    assert status(state) == before


def test_a_failing_target_says_why_and_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    catalog_config(monkeypatch, type="rest", uri=f"http://{HOST}:{free_port()}")   # nobody there
    state = StateDir(tmp_path / "state")
    runner = Runner(state, LocalLauncher(tmp_path / "pods"), PodSettings())
    put(state, table(tmp_path, publish={"targets": ["iceberg", "delta"], "catalog": CATALOG}))
    runner.step()
    location = str(tmp_path / "lake" / "orders")
    Table.open(location).upsert(rows([1, 2, 3], 1, 1))
    runner.step()
    entries = shown(state)
    instant = Table.open(location).timeline().last_completed().requested_time
    assert "error" not in entries["delta"] and entries["delta"]["instant"] == instant
    error = entries["iceberg"]["error"]
    assert "could not register lake.orders" in error and "the published files are intact" in error
    assert entries["iceberg"]["instant"] == instant   # published: readers by path see it
    fits("laketables", status(state))
    readers.assert_same(readers.iceberg(location), readers.expected(Table.open(location).read(), "iceberg"),
                        ["id"], reader="iceberg by path")
    r = state.load("LakeTable", "default", "orders")
    assert r is not None and any(e["reason"] == "PublishFailed" and e["message"].startswith("iceberg: ")
                                 for e in r.events or []), r.events
    catalog_uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    catalog_config(monkeypatch, type="sql", uri=catalog_uri)
    runner.step()   # retried: registered now
    assert "error" not in shown(state)["iceberg"] and "registered" in shown(state)["iceberg"]["catalog"]
    check_readers(location, catalog_uri)


def test_an_operator_without_pyiceberg_names_the_extra(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    state = StateDir(tmp_path / "state")
    runner = Runner(state, LocalLauncher(tmp_path / "pods"), PodSettings())
    put(state, table(tmp_path, publish={"targets": ["iceberg"], "catalog": CATALOG}))
    runner.step()
    Table.open(str(tmp_path / "lake" / "orders")).upsert(rows([1], 1, 1))
    monkeypatch.setitem(sys.modules, "pyiceberg.catalog", None)   # as if the image had no `catalog` extra
    runner.step()
    error = shown(state)["iceberg"]["error"]
    assert "needs the Python module 'pyiceberg', which weir's `catalog` extra installs" in error


def test_iceberg_format_version_3_is_published_and_a_downgrade_is_an_error(tmp_path: Path) -> None:
    state = StateDir(tmp_path / "state")
    runner = Runner(state, LocalLauncher(tmp_path / "pods"), PodSettings())
    body = table(tmp_path, publish={"targets": ["iceberg"], "iceberg": {"formatVersion": 3}})
    put(state, body)
    runner.step()
    location = str(tmp_path / "lake" / "orders")
    t = Table.open(location)
    t.upsert(rows(list(range(10)), 1, 1))
    t.upsert(rows([1, 2], 5, 2))
    runner.step()
    entry = shown(state)["iceberg"]
    assert entry["formatVersion"] == 3 and "error" not in entry, entry
    assert json.loads(Path(entry["location"]).read_text())["format-version"] == 3
    readers.assert_same(readers.iceberg(location), readers.expected(t.read(), "iceberg"), ["id"], reader="v3")
    fits("laketables", status(state))
    body["spec"]["publish"]["iceberg"]["formatVersion"] = 2   # the same instant, asked as v2: refused
    put(state, body)
    runner.step()
    entry = shown(state)["iceberg"]
    assert "cannot go back to 2" in entry["error"] and entry["formatVersion"] == 3, entry
    fits("laketables", status(state))


def lake_table(**publish: Any) -> dict[str, Any]:
    return table(Path("/tmp/lake"), publish=publish)


@pytest.mark.parametrize(("publish", "extra", "said"), [
    ({"targets": ["delta"], "catalog": CATALOG}, {}, "registers the Iceberg table: add iceberg"),
    ({"targets": ["iceberg"], "view": "snapshot"},
     {"orderingField": None, "columnGroups": [{"name": "g", "orderingField": "ts", "columns": ["amount"]}]},
     "publishes its last compacted state only"),
    ({"targets": ["iceberg"], "catalog": {**CATALOG, "table": "orders"}}, {},
     "must look like NAMESPACE.TABLE"),
    ({"targets": ["hudi"]}, {}, "'hudi' is not a format"),
    ({"targets": ["iceberg"], "iceberg": {"formatVersion": 4}}, {}, "4 is not an Iceberg format version"),
    ({"targets": ["delta"], "iceberg": {"formatVersion": 3}}, {}, "add iceberg to publish.targets"),
])
def test_publish_specs_the_crd_refuses_are_refused_by_the_parser(publish: dict[str, Any],
                                                                  extra: dict[str, Any], said: str) -> None:
    body = lake_table(**publish)
    body["spec"].update({k: v for k, v in extra.items() if v is not None})
    for k in [k for k, v in extra.items() if v is None]:
        body["spec"].pop(k)
    with pytest.raises(SpecError, match=said):
        parse_lake_table(body)


def test_the_published_instant_is_a_column_of_kubectl_get() -> None:
    crd = yaml.safe_load((ROOT / "crds" / "weir.dev_laketables.yaml").read_text())
    columns = crd["spec"]["versions"][0]["additionalPrinterColumns"]
    assert {"name": "Published", "type": "string", "jsonPath": ".status.publishedInstant"}.items() <= \
        next(c for c in columns if c["name"] == "Published").items()


def test_weir_run_publishes_a_table_that_holds_commits(tmp_path: Path) -> None:
    manifest = TABLE + "  publish: {targets: [iceberg, delta]}\n"
    body = yaml.safe_load(manifest)
    location = tmp_path / "lake" / "people"   # the manifest's relative location, from the run's directory
    t = Table.create_from_config(str(location), desired_config(parse_lake_table(body), "people"))
    t.upsert(pa.table({"id": pa.array([1, 2], pa.int64()), "name": ["Ada", "Alan"]}))
    code, out, err = weir_run(tmp_path, {"table.yaml": manifest}, "--timeout", "60")
    assert code == 0, out + err
    instant = t.timeline().last_completed().requested_time
    r = StateDir(tmp_path / ".weir-run").load("LakeTable", "default", "people")
    assert r is not None and r.body["status"]["publishedInstant"] == instant, r.body["status"]
    for target in ("iceberg", "delta"):
        readers.assert_same(readers.READERS[target](str(location)), readers.expected(t.read(), target),
                            ["id"], reader=target)
