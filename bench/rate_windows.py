"""Claims per second against a rate limit: the counting shared by bench/bench_rate_limit.py
(Jobwarden alone, from `job_executions.started_at`) and the side-by-side harness's
`ratelimit` scenario (every system, from the handlers' start stamps).

Given the instants (seconds, one clock) at which the jobs of a rate-limited type started,
it counts them per one-second window (whole seconds since the first start) and in the
busiest sliding window of one second, and summarises the windows while work still waited:
every window but the first two (the workers' start and the bucket's initial burst) and
the last, partial one. Standard library only.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable


def per_second(starts: Iterable[float]) -> list[int]:
    """Starts in each whole second since the first, empty seconds included."""
    times = sorted(starts)
    if not times:
        return []
    counts = [0] * (int(times[-1] - times[0]) + 1)
    for t in times:
        counts[int(t - times[0])] += 1
    return counts


def busiest_sliding(starts: Iterable[float]) -> int:
    """The most starts in any window [t, t + 1 s) that opens at a start."""
    times = sorted(starts)
    best, j = 0, 0
    for i, t in enumerate(times):
        while j < len(times) and times[j] < t + 1.0:
            j += 1
        best = max(best, j - i)
    return best


def figures(starts: list[float], rate: float, burst: float) -> dict:
    """The windows and their summary; the steady figures are None when the run was too
    short to have a window while work waited."""
    counts = per_second(starts)
    steady = counts[2:-1]  # not the start and its burst, not the last (partial) window
    out: dict = {
        "rate": rate, "burst": burst, "starts": len(starts), "windows": counts,
        "busiest_fixed": max(counts, default=0), "busiest_sliding": busiest_sliding(starts),
        "over_limit_plus_burst": sum(n > rate + burst for n in counts),
        "steady_windows": len(steady),
    }
    if not steady:
        return {**out, **dict.fromkeys(("steady_median", "steady_min", "steady_max",
                                        "steady_stdev", "steady_share",
                                        "steady_lowest_share"))}
    return {**out, "steady_median": statistics.median(steady), "steady_min": min(steady),
            "steady_max": max(steady), "steady_stdev": round(statistics.pstdev(steady), 2),
            "steady_share": round(statistics.mean(steady) / rate, 4),
            "steady_lowest_share": round(min(steady) / rate, 4)}
