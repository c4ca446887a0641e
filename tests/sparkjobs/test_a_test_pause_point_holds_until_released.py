"""The pause point tests use to hold a write with its files written (WEIR_TEST_PAUSE_DIR): a directory a
test made holds while its `hold` exists; one that does not exist yet (a pod's own file system, where a
kind e2e test cannot reach beforehand) is made with its `hold`, so concurrent tasks all hold until the
test releases them."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from sparkjobs.write import PAUSE_ENV, hold_if_asked


def held(instants: list[str]) -> list[threading.Thread]:
    threads = [threading.Thread(target=hold_if_asked, args=(PAUSE_ENV, i), daemon=True) for i in instants]
    for t in threads:
        t.start()
    return threads


def test_tasks_hold_in_a_pause_dir_they_make_until_it_is_released(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    pause = tmp_path / "pod-tmp" / "pause"
    monkeypatch.setenv(PAUSE_ENV, str(pause))
    threads = held(["t1", "t2", "t3", "t4"])
    for t in threads:
        t.join(timeout=0.5)
    assert all(t.is_alive() for t in threads)            # none slipped through while the dir was made
    assert sorted(p.name for p in pause.iterdir()) == ["hold", "reached-t1", "reached-t2", "reached-t3",
                                                       "reached-t4"]
    assert [p.name for p in pause.parent.iterdir()] == ["pause"]   # no staging dirs left behind
    (pause / "hold").unlink()
    for t in threads:
        t.join(timeout=10)
        assert not t.is_alive()


def test_a_pause_dir_the_test_made_without_hold_lets_tasks_through(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pause").mkdir()
    monkeypatch.setenv(PAUSE_ENV, str(tmp_path / "pause"))
    hold_if_asked(PAUSE_ENV, "t1")   # returns at once
    assert [p.name for p in (tmp_path / "pause").iterdir()] == ["reached-t1"]
