"""The lane loop's lag probe (worker/engine/loops.py), on a clock the test moves: the
lag it reports is how late the probe woke, never the PROBE_INTERVAL it slept."""

from __future__ import annotations

import pytest

from jobwarden.worker.engine.loops import PROBE_INTERVAL, LaneLoop


def lane_on(clock: list[float]) -> LaneLoop:
    return LaneLoop("t", sync_pool=None, max_connections=1,  # type: ignore[arg-type]
                    clock=lambda: clock[0])


def test_a_probe_waking_on_time_reports_no_lag_and_a_late_one_only_its_lateness():
    now = [100.0]
    lane = lane_on(now)
    for _ in range(3):  # on time: its own sleep is no lag
        now[0] += PROBE_INTERVAL
        lane.tick()
    assert lane.take_lag() == pytest.approx(0.0, abs=1e-9)
    now[0] += PROBE_INTERVAL + 0.3  # 0.3 s late
    lane.tick()
    now[0] += PROBE_INTERVAL + 0.1  # then 0.1 s late: the worst is kept
    lane.tick()
    assert lane.take_lag() == pytest.approx(0.3)
    assert lane.take_lag() == pytest.approx(0.0, abs=1e-9)  # read once


def test_a_loop_held_since_its_last_wake_is_stalled_for_what_passed_beyond_the_interval():
    now = [100.0]
    lane = lane_on(now)
    now[0] += PROBE_INTERVAL
    lane.tick()
    now[0] += PROBE_INTERVAL  # the probe is due, not late
    assert lane.stalled_for() == pytest.approx(0.0, abs=1e-9)
    now[0] += 0.7
    assert lane.stalled_for() == pytest.approx(0.7)
    assert lane.take_lag() == pytest.approx(0.7)  # a stall under way counts as lag
