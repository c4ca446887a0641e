"""Loading the timeline reads the history's manifest, not its live files: every writer loads the
timeline twice per write under the table lock, and a table many writers share gets a new history
version from every archival. The live files are read when a view first asks for them, once, and are
the same as an eager read of them."""

import pickle

import pyarrow.parquet as pq

from lakecore import Table
from lakecore.services import ArchivalPolicy
from lakecore.table import AfterCommitOptions, WriterOptions
from lakecore.timeline import TimelineStore
from lakecore.timeline.history import HISTORY_DIR, archived_files, latest_slices
from lakecore.timeline.history_store import clear_history_cache
from lakecore.timeline.store import clear_cache
from tests.lakecore.services.conftest import create, rows, snapshot

SMALL = ArchivalPolicy(min_instants=3, max_instants=5, fanout=3)


class CountingReads:
    """Wraps a storage: records the paths read."""

    def __init__(self, inner):
        self._inner = inner
        self.paths: list[str] = []

    def read(self, path: str) -> bytes:
        self.paths.append(path)
        return self._inner.read(path)

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def live_reads(self) -> list[str]:
        return [p for p in self.paths if p.rsplit("/", 1)[-1].startswith("live-")]


def archived_table(tmp_path) -> Table:
    t = create(str(tmp_path / "t"), "event_time", table_type="merge_on_read")
    t = Table.open(t.uri, options=WriterOptions(after_commit=AfterCommitOptions(archival=None)))
    for step in range(12):
        t.upsert(rows([step % 5, 10 + step], step))
        if step % 4 == 3:
            t.maintenance.compact()
    assert t.maintenance.archive(SMALL).archived is not None
    assert t.timeline().archived.count > 0
    return t


def test_a_cold_load_reads_no_live_files_and_a_view_reads_them_once(tmp_path):
    t = archived_table(tmp_path)
    expected_rows = snapshot(t)
    clear_cache()
    clear_history_cache()  # as in a writer that has not seen this history version yet
    storage = CountingReads(t.storage)
    timeline = TimelineStore(storage).load()
    assert timeline.archived.count > 0 and timeline.archived.boundary
    assert storage.live_reads() == [], storage.paths

    manifest = timeline.archived.manifest
    live = pq.read_table(t.storage.uri + "/" + HISTORY_DIR + "/" + manifest.live)
    eager = archived_files(latest_slices(live))
    assert timeline.archived.files == eager and len(eager) > 0
    assert len(storage.live_reads()) == 1
    assert timeline.archived.every_file() == archived_files(live)
    assert timeline.archived.live_table().equals(live)
    again = TimelineStore(storage).load()  # the same version: what was read is kept
    assert again.archived.files == eager
    assert len(storage.live_reads()) == 1
    assert snapshot(Table.open(t.uri)) == expected_rows


def test_a_timeline_pickles_with_its_archived_files(tmp_path):
    t = archived_table(tmp_path)
    clear_cache()
    clear_history_cache()
    timeline = TimelineStore(t.storage).load()
    copy = pickle.loads(pickle.dumps(timeline))
    assert copy.archived == timeline.archived
    assert copy.archived.files == timeline.archived.files and copy.archived.files
    assert copy.archived.live_table().equals(timeline.archived.live_table())
