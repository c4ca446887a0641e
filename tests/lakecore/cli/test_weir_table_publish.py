"""`weir table publish URI --format iceberg|delta`: publishes the table's latest instant, says what
readers see and where they open it (--json: the same as an object); a second run says it is up to date;
an unknown format or view is one line saying what to use, and writes nothing."""

import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
from typer.testing import CliRunner

import lakecore.publish
from lakecore.cli.main import app
from tests.lakecore.publish import readers

runner = CliRunner()


def weir(*args):
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def _table(tmp_path, schema="id:int64,ts:int64,name:string"):
    uri = str(tmp_path / "t")
    assert weir("table", "create", uri, "--schema", schema, "--record-key", "id", "--buckets", "2")[0] == 0
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "ts": [1, 1, 1], "name": ["a", "b", "c"]}), src)
    assert weir("table", "upsert", uri, "--input", str(src))[0] == 0
    return uri


def test_publish_both_formats_and_readers_see_the_table(tmp_path):
    uri = _table(tmp_path)
    code, out = weir("table", "publish", uri, "--format", "iceberg")
    assert code == 0, out
    assert "iceberg: snapshot" in out and "full rebuild, 2 data files" in out
    assert f"readers open: {uri}/metadata/v1.metadata.json" in out
    code, out = weir("table", "publish", uri, "--format", "delta", "--json")
    result = json.loads(out)
    assert code == 0 and result["format"] == "delta" and result["location"] == uri
    assert result["snapshot"]["view"] == "snapshot" and result["full"] is True
    assert sorted(readers.delta(uri).column("name").to_pylist()) == ["a", "b", "c"]
    assert sorted(readers.iceberg(uri).column("id").to_pylist()) == [1, 2, 3]
    code, out = weir("table", "publish", uri, "--format", "iceberg")
    assert code == 0 and "iceberg: already shows instant" in out


def test_iceberg_format_version_3_is_asked_for_and_kept(tmp_path):
    uri = _table(tmp_path)
    code, out = weir("table", "publish", uri, "--format", "iceberg", "--iceberg-format-version", "3",
                     "--json")
    assert code == 0 and json.loads(out)["format_version"] == 3, out
    assert json.loads((tmp_path / "t" / "metadata" / "v1.metadata.json").read_text())["format-version"] == 3
    code, out = weir("table", "publish", uri, "--format", "iceberg")
    assert code == 0 and "iceberg v3: already shows instant" in out, out
    code, out = weir("table", "publish", uri, "--format", "iceberg", "--iceberg-format-version", "2")
    assert code == 1 and "is published as format version 3, which cannot go back to 2" in out, out
    assert out.count("\n") == 1, out
    code, out = weir("table", "publish", uri, "--format", "delta", "--iceberg-format-version", "3")
    assert code == 1 and "format version 3 is Iceberg's" in out, out
    assert not (tmp_path / "t" / "_delta_log").exists()


def test_bad_requests_are_one_line_and_write_nothing(tmp_path):
    uri = _table(tmp_path)
    code, out = weir("table", "publish", uri, "--format", "hudi")
    assert code == 1 and "unknown publish format 'hudi'; use one of iceberg, delta" in out
    assert out.count("\n") == 1, out
    code, out = weir("table", "publish", uri, "--format", "iceberg", "--view", "merged")
    assert code == 1 and "unknown view 'merged'; use one of snapshot, read_optimized" in out
    assert not (tmp_path / "t" / "metadata").exists() and not (tmp_path / "t" / "_delta_log").exists()
    grouped = str(tmp_path / "g")
    assert weir("table", "create", grouped, "--schema", "id:int64,a:string,a_ts:int64", "--record-key", "id",
                "--group", "ga:a_ts:a")[0] == 0
    code, out = weir("table", "publish", grouped, "--format", "delta", "--view", "snapshot")
    said = " ".join(out.split())
    assert code == 1 and "publish its compacted view, read_optimized (`--view read_optimized`; in Python " \
        'view="read_optimized"; a LakeTable\'s spec.publish.view)' in said, out
    assert not (tmp_path / "g" / "_delta_log").exists()


def test_without_the_publish_extra_the_command_names_it(tmp_path, monkeypatch):
    uri = _table(tmp_path)
    monkeypatch.setitem(sys.modules, "fastavro", None)  # as if `pip install weir` had no `publish` extra
    for name in ("lakecore.publish.iceberg", "lakecore.publish.iceberg_avro"):  # imported afresh
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delattr(lakecore.publish, "iceberg", raising=False)
    monkeypatch.delattr(lakecore.publish, "iceberg_avro", raising=False)
    code, out = weir("table", "publish", uri, "--format", "iceberg")
    assert code == 1 and "pip install 'weir[publish]'" in out and out.count("\n") == 1, out
    assert not (tmp_path / "t" / "metadata").exists()


def test_catalog_options_register_the_table_and_bad_ones_are_one_line(tmp_path):
    uri = _table(tmp_path)
    db = f"sqlite:///{tmp_path / 'catalog.db'}"
    catalog = ["--catalog", "local", "--catalog-property", "type=sql", "--catalog-property", f"uri={db}"]
    code, out = weir("table", "publish", uri, "--format", "iceberg", "--catalog-table", "lake.t", *catalog)
    assert code == 0, out
    assert f"catalog 'local' ({db}): lake.t registered -> {uri}/metadata/v1.metadata.json" in out
    from pyiceberg.catalog import load_catalog

    shown = load_catalog("local", type="sql", uri=db).load_table("lake.t").scan().to_arrow()
    assert sorted(shown.column("id").to_pylist()) == [1, 2, 3]
    code, out = weir("table", "publish", uri, "--format", "iceberg", "--catalog-table", "lake.t", *catalog,
                     "--json")
    shown_by = json.loads(out)["catalog"]
    assert code == 0 and shown_by.endswith(f"lake.t up to date -> {uri}/metadata/v1.metadata.json"), out
    for args, said in [(["--catalog-table", "t"], "--catalog-table 't' must look like NAMESPACE.TABLE"),
                       (["--catalog-table", "lake.t", "--catalog-property", "uri"],
                        "--catalog-property 'uri' must look like KEY=VALUE"),
                       (["--catalog-property", "type=sql"], "--catalog-property needs --catalog-table")]:
        code, out = weir("table", "publish", uri, "--format", "delta", *args)
        assert code == 1 and said in out and out.count("\n") == 1, out
    assert not (tmp_path / "t" / "_delta_log").exists()
    code, out = weir("table", "publish", uri, "--format", "delta", "--catalog-table", "lake.t", *catalog)
    assert code == 1 and "a catalog registers Iceberg tables" in out and out.count("\n") == 1, out
    assert not (tmp_path / "t" / "_delta_log").exists()
