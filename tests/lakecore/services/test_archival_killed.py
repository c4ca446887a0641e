"""An archival killed (SIGKILL) in any phase — history file written, live files written, manifest
written, pointer created, half its active files deleted, mid level merge, mid garbage collection —
leaves the table reading exactly as before (latest and every time-travel point, no instant lost or
doubled), and the next archival finishes the job and removes the leftovers."""

import os
import signal
import subprocess
import sys

import pytest

from lakecore import Table
from lakecore.config import LockSpec
from lakecore.timeline.history import HISTORY_DIR, Manifest
from lakecore.timeline.history_store import KEPT_VERSIONS, HistoryStore, manifest_path
from tests.lakecore.services.conftest import create, rows, snapshot

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
POLICY = ("3", "5", "3")  # min, max, fanout

PHASES = {
    "after the level-0 history file": ("write_if_absent", "/history/L0-", 1),
    "after the live files": ("write_if_absent", "/history/live-", 1),
    "after the manifest": ("write_if_absent", "/history/manifest-", 1),
    "after the pointer": ("write_if_absent", "timeline/history-", 1),
    "between active file deletions": ("delete", ".weir/timeline/", 2),
    "mid level merge": ("write_if_absent", "/history/L1-", 1),
    "mid garbage collection": ("delete", "/history/", 1),
}


def _state(t: Table, instants: list[str]):
    fresh = Table.open(t.uri)
    return snapshot(fresh), [snapshot(fresh, as_of=i) for i in instants], fresh.timeline().total


def _grow(t: Table, n: int, start: int) -> list[str]:
    out = []
    for k in range(start, start + n):
        out.append(t.upsert(rows([k % 5, 10 + k], k)).instant.requested_time)
    return out


@pytest.mark.parametrize("phase", list(PHASES))
def test_a_killed_archival_changes_nothing_visible_and_the_next_one_finishes(tmp_path, phase):
    from lakecore.services import ArchivalPolicy

    policy = ArchivalPolicy(*map(int, POLICY))
    t = create(str(tmp_path / "t"), "event_time", lock=LockSpec("in_process"))  # one process at a time
    instants = []
    for round_ in range(3):  # two archivals leave two level-0 files: the next one merges (fanout 3)
        instants += _grow(t, 6, 10 * round_)
        if round_ < 2:
            assert t.maintenance.archive(policy).archived is not None
    before = _state(t, instants)
    started_from = t.timeline().archived.manifest.version
    method, part, nth = PHASES[phase]
    proc = subprocess.run([sys.executable, "-m", "tests.lakecore.services.archival_crash", t.uri, method,
                           part, str(nth), *POLICY], cwd=ROOT, capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr.decode()[-2000:])
    assert _state(t, instants) == before

    done = Table.open(t.uri).maintenance.archive(policy).archived
    assert _state(t, instants) == before
    current = t.timeline().archived.manifest
    assert current.version >= 3 and (done is not None or phase in ("after the pointer",
                                                                    "between active file deletions",
                                                                    "mid garbage collection"))
    # what is left in the history: the files of the kept versions (the newest KEPT_VERSIONS pointers,
    # the current one and the one it replaced among them)
    replaced = started_from if done is not None else current.version - 1
    kept = HistoryStore(t.storage).pointer_versions()
    assert (current.version in kept and replaced in kept and len(kept) <= KEPT_VERSIONS) or done is None
    manifests = [Manifest.loads(t.storage.read(manifest_path(v)), source="kept") for v in kept]
    named = {f.name for m in manifests for f in m.files} | {m.live for m in manifests}
    named |= {manifest_path(m.version).rsplit("/", 1)[1] for m in manifests if m.version}
    left = {n for n in t.storage.list_names(HISTORY_DIR)}
    if done is not None:
        assert left <= named, left - named
