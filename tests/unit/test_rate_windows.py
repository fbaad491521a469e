"""bench/rate_windows.py: the counting behind both rate-limit benchmarks (claims per whole
second, the busiest sliding second, the seconds while work waited)."""

from bench.rate_windows import busiest_sliding, figures, per_second


def test_starts_are_counted_per_whole_second_from_the_first_empty_seconds_included():
    assert per_second([10.0, 10.5, 10.99, 11.0, 13.2]) == [3, 1, 0, 1]
    assert per_second([]) == []


def test_the_busiest_sliding_second_straddles_whole_seconds():
    # 1 start in [0, 1) and 2 in [1, 2), but 3 in [0.9, 1.9).
    assert busiest_sliding([0.0, 0.9, 1.5, 1.8, 2.95]) == 3
    assert busiest_sliding([0.0, 1.0, 2.0]) == 1  # a window is [t, t + 1 s)


def test_the_steady_seconds_leave_out_the_first_two_and_the_last():
    starts = [s + k / 10 for s, n in enumerate([9, 10, 4, 6, 2]) for k in range(n)]
    out = figures(starts, rate=5, burst=5)
    assert out["windows"] == [9, 10, 4, 6, 2]
    assert (out["steady_median"], out["steady_min"], out["steady_max"]) == (5, 4, 6)
    assert out["steady_share"] == 1.0 and out["steady_lowest_share"] == 0.8
    assert out["over_limit_plus_burst"] == 0 and out["busiest_fixed"] == 10
    assert figures(starts[:19], rate=5, burst=5)["steady_median"] is None
