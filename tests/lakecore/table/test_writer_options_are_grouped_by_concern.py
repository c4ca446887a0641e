"""`WriterOptions` holds one small value per concern, each with the defaults the flat options had, so
`WriterOptions()` is still a plain writer and changing one concern leaves the others alone."""

from __future__ import annotations

from dataclasses import fields, replace

import pyarrow as pa

from lakecore import (
    AbortWatchOptions,
    AfterCommitOptions,
    ArchivalPolicy,
    ClusteringStrategy,
    ConflictOptions,
    FileOptions,
    HeartbeatConfig,
    MarkerOptions,
    RegistrationOptions,
    Table,
    WriterOptions,
)


def test_writer_options_are_one_value_per_concern() -> None:
    concerns = {f.name: f.type for f in fields(WriterOptions)}
    assert concerns == {"heartbeat": "HeartbeatConfig", "files": "FileOptions",
                        "conflicts": "ConflictOptions", "markers": "MarkerOptions",
                        "registration": "RegistrationOptions", "after_commit": "AfterCommitOptions",
                        "abort_watch": "AbortWatchOptions"}


def test_the_defaults_are_a_plain_writer() -> None:
    options = WriterOptions()
    assert options.heartbeat == HeartbeatConfig()
    assert options.files == FileOptions(max_rows_per_file=None, evolve_schema=False)
    assert options.conflicts == ConflictOptions(early_detection=None, retries=0, retry_backoff_s=0.2)
    assert options.markers == MarkerOptions(batched=False, batch_interval_s=0.05, files=20,
                                            bind_host="127.0.0.1", advertise_host=None)
    assert options.registration == RegistrationOptions(registry=None, writer_name=None)
    assert options.after_commit == AfterCommitOptions(
        clean_failed_writes=True, compaction=None, clean=None, clustering=None,
        clustering_strategy=ClusteringStrategy(), archival=ArchivalPolicy())
    assert options.abort_watch == AbortWatchOptions(check_s=1.0, zookeeper=None, on_abort=None)


def test_changing_one_concern_leaves_the_others_alone() -> None:
    base = WriterOptions()
    retried = replace(base, conflicts=ConflictOptions(retries=3))
    assert retried.conflicts.retries == 3
    assert [getattr(retried, f.name) for f in fields(base) if f.name != "conflicts"] == \
        [getattr(base, f.name) for f in fields(base) if f.name != "conflicts"]


def test_a_table_writes_with_the_files_concern(tmp_path) -> None:
    schema = pa.schema([("id", pa.int64())])
    t = Table.create(str(tmp_path / "t"), schema=schema, record_key="id",
                     options=WriterOptions(files=FileOptions(evolve_schema=True)))
    t.upsert(pa.table({"id": pa.array([1], pa.int64()), "tier": ["gold"]}))
    assert t.read().column_names == ["id", "tier"]
