"""Leader election's decision (pure): a replica claims a missing lease, renews its own (keeping its
acquire time), stands by while another holder's record keeps changing, and takes over a record it has
seen unchanged for a whole lease duration (one more transition). Expiry is judged by how long this
replica saw the record unchanged, never by another host's clock."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lakeoperator.leader import LeaseTerms, claim, micro_time

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
TERMS = LeaseTerms(duration_s=15, renew_every_s=5)
THEIRS = {"holderIdentity": "b", "leaseDurationSeconds": 15, "acquireTime": "2026-11-23T11:00:00.000000Z",
          "renewTime": "2030-01-01T00:00:00.000000Z", "leaseTransitions": 4}   # a clock far ahead: irrelevant


def test_a_missing_lease_is_claimed() -> None:
    spec = claim(None, "a", 0.0, NOW, TERMS)
    assert spec == {"holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": micro_time(NOW),
                    "renewTime": micro_time(NOW), "leaseTransitions": 0}


def test_the_holder_renews_and_keeps_its_acquire_time() -> None:
    mine = {**THEIRS, "holderIdentity": "a"}
    spec = claim(mine, "a", 3.0, NOW, TERMS)
    assert spec is not None
    assert (spec["acquireTime"], spec["renewTime"], spec["leaseTransitions"]) == \
        (THEIRS["acquireTime"], micro_time(NOW), 4)


@pytest.mark.parametrize("unchanged_for", [0.0, 5.0, 14.9])
def test_another_holders_live_lease_is_left_alone(unchanged_for: float) -> None:
    assert claim(THEIRS, "a", unchanged_for, NOW, TERMS) is None


def test_a_lease_seen_unchanged_for_its_duration_is_taken_over() -> None:
    spec = claim(THEIRS, "a", 15.0, NOW, TERMS)
    assert spec is not None
    assert (spec["holderIdentity"], spec["acquireTime"]) == ("a", micro_time(NOW))
    assert spec["leaseTransitions"] == 5


def test_a_leader_gives_up_before_a_standby_may_take_over() -> None:
    assert TERMS.give_up_after_s == 5.0 < TERMS.duration_s
    with pytest.raises(ValueError, match="three times"):
        LeaseTerms(duration_s=10, renew_every_s=5)
