"""`weir run` names the batch writers that succeeded in an earlier run and are not run again, in the
words of their source: a Kafka writer's new messages, and what a new restartNonce reads (from the
offsets its last commit recorded), not "files it has not read"."""

from __future__ import annotations

from typing import Any

from lakeoperator.local import Resource, done_before


def writer(name: str, *, kafka: bool, phase: str = "Succeeded") -> Resource:
    source: dict[str, Any] = {"kafka": {"bootstrapServers": "b:9092", "topics": ["t"]}} if kafka \
        else {"path": "in/"}
    return Resource({"kind": "LakeWriter", "metadata": {"name": name, "generation": 1},
                     "spec": {"mode": "batch", "source": source},
                     "status": {"phase": phase, "observedGeneration": 1}})


def test_files_and_topics_are_told_apart() -> None:
    said = done_before([writer("files", kafka=False), writer("orders", kafka=True),
                        writer("events", kafka=True), writer("failed", kafka=True, phase="Failed")])
    assert said == [
        "LakeWriter files succeeded in an earlier run: a batch writer (or a stream with availableNow) "
        "writes its input once, so it is not run again (new files in its path included); a new "
        "spec.restartNonce writes it again (a stream: only the files it has not read)",
        "LakeWriter orders, events succeeded in an earlier run: a batch writer (or a stream with "
        "availableNow) writes its input once, so they are not run again (new messages in their topics "
        "included); a new spec.restartNonce reads on from the offsets their last commit recorded"]
    assert done_before([writer("failed", kafka=False, phase="Failed")]) == []
