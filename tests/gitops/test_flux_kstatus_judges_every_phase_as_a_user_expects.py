"""Flux (kstatus) judges every status the operator writes as a user expects: Current when the spec is in
effect, InProgress while the operator still works towards it, Failed when it needs a change.

The oracle is kstatus' documented generic rules for custom resources (sigs.k8s.io/cli-utils,
pkg/kstatus/status: checkGenericProperties, then "Current" by default), written here in Python.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from tests.gitops.samples import Sample, all_samples


def kstatus(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(status, message) as kstatus computes them for a custom resource."""
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "Terminating", "Resource scheduled for deletion"
    generation, observed = meta.get("generation"), status.get("observedGeneration")
    if generation is not None and observed is not None and observed != generation:
        return "InProgress", f"generation is {generation}, but latest observed generation is {observed}"
    for c in status.get("conditions") or ():     # the first abnormal-true condition, in list order
        if c.get("type") == "Reconciling" and c.get("status") == "True":
            return "InProgress", c.get("message", "")
        if c.get("type") == "Stalled" and c.get("status") == "True":
            return "Failed", c.get("message", "")
    return "Current", "Resource is current"


SAMPLES = all_samples()


@pytest.mark.parametrize("sample", SAMPLES, ids=str)
def test_kstatus_reads_the_phase_as_a_user_expects(sample: Sample) -> None:
    status, message = kstatus(sample.body)
    assert status == sample.kstatus, (sample.name, sample.body.get("status"))
    if status == "Failed":
        assert message, "a stalled resource says why and what to do"


def test_reconciling_and_stalled_are_never_both_true() -> None:
    for s in SAMPLES:
        true = {c["type"] for c in s.body.get("status", {}).get("conditions", ()) if c["status"] == "True"}
        assert not {"Reconciling", "Stalled"} <= true, s.name


def test_kstatus_alone_calls_a_resource_the_operator_has_not_seen_current() -> None:
    # the generic rules' known gap (no status yet): docs/gitops.md gives Flux healthCheckExprs that close it
    assert kstatus({"metadata": {"generation": 1}}) == ("Current", "Resource is current")
