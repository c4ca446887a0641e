from hypothesis import given
from hypothesis import strategies as st

from lakecore.timeline import Instant, State, Timeline, next_instant_time, parse_file_name
from lakecore.timeline.instant_time import format_ms, parse_point_in_time, to_epoch_ms


def test_format_is_17_digit_utc_milliseconds():
    assert format_ms(0) == "19700101000000000"
    assert format_ms(1_795_000_000_123) == "20261118110640123"
    assert to_epoch_ms(format_ms(1_795_000_000_123)) == 1_795_000_000_123


@given(st.lists(st.integers(1_700_000_000_000, 1_800_000_000_000), min_size=1, max_size=50))
def test_next_instant_time_is_strictly_increasing_whatever_the_clock_says(clock_readings):
    newest = None
    for now in clock_readings:
        t = next_instant_time(now, newest)
        assert newest is None or t > newest
        assert to_epoch_ms(t) >= now
        newest = t


def test_file_names_round_trip():
    for inst in (Instant("20261122101500123", "deltacommit"),
                 Instant("20261122101500123", "commit", State.INFLIGHT),
                 Instant("20261122101500123", "clean", State.COMPLETED, "20261122101501000")):
        assert parse_file_name(inst.file_name) == inst
    assert parse_file_name("20261122101500123.deltacommit.requested.tmp") is None
    assert parse_file_name("garbage") is None
    assert parse_file_name("20261122101500123.notanaction.requested") is None


def test_timeline_keeps_most_advanced_state_and_orders_completed_by_completion_time():
    a = Instant("20261122000000001", "deltacommit", State.COMPLETED, "20261122000000009")
    b = Instant("20261122000000002", "deltacommit", State.COMPLETED, "20261122000000005")
    tl = Timeline.of([Instant("20261122000000001", "deltacommit"),
                      Instant("20261122000000001", "deltacommit", State.INFLIGHT), a, b,
                      Instant("20261122000000003", "deltacommit", State.INFLIGHT)])
    assert [i.requested_time for i in tl.completed] == [b.requested_time, a.requested_time]
    assert [i.requested_time for i in tl.pending] == ["20261122000000003"]
    assert tl.newest_time() == "20261122000000009"
    # as of an instant's requested time means "including that instant"
    assert [i.requested_time for i in tl.as_of(b.requested_time).completed] == [b.requested_time]
    assert tl.completed_between("20261122000000005", "20261122000000009") == (a,)


def test_points_in_time_accept_iso_timestamps():
    assert parse_point_in_time("2026-11-22T10:15:00") == "20261122101500000"
    assert parse_point_in_time("20261122101500123") == "20261122101500123"
