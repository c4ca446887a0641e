"""`bench/scale_bench.py --quick`: the peers harness run per peer in fresh processes, each record with the
CPU time of every phase beside its wall time and the table read again in a fresh process, and issue 27's
ratios computed from the medians; a peer whose library is missing is reported as skipped with the reason,
not dropped silently."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from tests.bench.quick import ROOT, run_quick

PEERS = Path(os.environ.get("WEIR_PEERS") or ROOT.parent / "shared" / "bench" / "peers")


@pytest.mark.skipif(not (PEERS / "bench.py").exists(),
                    reason=f"the shared peers harness is not at {PEERS} (beside the checkout, or WEIR_PEERS)")
def test_the_scale_benchmark_reports_the_ratios_of_issue_27(tmp_path: Path) -> None:
    out, _ = run_quick("scale_bench.py", tmp_path)
    size = out["sizes"]["20000"]
    assert size["verified"] is True
    for peer in ("floor-pyarrow-zstd", "lakecore", "lakecore-lz4"):
        assert size["runs"][peer] == 1
        medians = size["medians"][peer]
        for phase in ("write", "read2"):
            assert medians[f"{phase}_s"] > 0
            assert medians[f"{phase}_user_s"] + medians[f"{phase}_sys_s"] > 0
    lakecore, floor = size["medians"]["lakecore"], size["medians"]["floor-pyarrow-zstd"]
    assert size["read2_vs_floor"]["wall"] == round(lakecore["read2_s"] / floor["read2_s"], 3)
    # a read of 20k rows can take less CPU than getrusage counts: the ratio is then unknown (None)
    user = round(lakecore["read2_user_s"] / floor["read2_user_s"], 3) if floor["read2_user_s"] else None
    assert size["read2_vs_floor"]["user_cpu"] == user
    assert size["read2_vs_floor"]["bar"] == 1.3
    # read2's table read again in a fresh process, every peer from the same memory state
    for medians in (lakecore, floor):
        assert medians["fresh_read_s"] > 0 and medians["fresh_read_user_s"] >= 0   # CPU may round to 0
    fresh = round(lakecore["fresh_read_s"] / floor["fresh_read_s"], 3)
    assert size["read2_vs_floor"]["fresh_process_wall"] == fresh
    assert "| lakecore |" in size["peers_table"]
    for peer, module in (("deltalake", "deltalake"), ("lance", "lance")):
        if importlib.util.find_spec(module) is None:   # not installed here: reported, with the reason
            assert peer in size["skipped"] and size["skipped"][peer]
            assert peer not in size["runs"]
        else:
            assert size["runs"].get(peer) == 1, size["skipped"]
    if "lance" in size["skipped"]:
        assert size["write_meets_bar"] is None and size["write_vs_lance"]["lakecore"]["wall"] is None
    else:
        lance = size["medians"]["lance"]["write_s"]
        assert size["write_vs_lance"]["lakecore"]["wall"] == round(lakecore["write_s"] / lance, 3)
