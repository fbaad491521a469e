"""How late an event loop's timers fire: asyncio's own selector against the lane loops'
PreciseSelector (worker/engine/loops.py), with no database and no worker around them.

    .venv/bin/python bench/bench_loop_timers.py --jobs 30000 --in-flight 500 --rounds 3

`--in-flight` coroutines each await `asyncio.sleep(--sleep-ms)` over and over until
`--jobs` sleeps are done, on a fresh loop of each kind in turn (alternating, `--rounds`
times). Prints one JSON line per loop: sleeps per second, against the bound of
in-flight / sleep, and how far past its due time each sleep ended (median, mean and
99th percentile, ms). epoll waits whole milliseconds, rounded up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from jobwarden.worker.engine.loops import PreciseSelector  # noqa: E402

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "precise": lambda: asyncio.SelectorEventLoop(PreciseSelector()),
}


async def sleeps(jobs: int, in_flight: int, seconds: float) -> tuple[float, list[float]]:
    """Sleeps per second, and each sleep's lateness in seconds."""
    late: list[float] = []
    left = iter(range(jobs))

    async def slot() -> None:
        for _ in left:
            due = time.monotonic() + seconds
            await asyncio.sleep(seconds)
            late.append(time.monotonic() - due)

    started = time.monotonic()
    await asyncio.gather(*(slot() for _ in range(in_flight)))
    return jobs / (time.monotonic() - started), late


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=30_000)
    ap.add_argument("--in-flight", type=int, default=500)
    ap.add_argument("--sleep-ms", type=float, default=50.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    seconds = args.sleep_ms / 1000
    for n in range(1, args.rounds + 1):
        for name, make in LOOPS.items():
            loop = make()
            try:
                rate, late = loop.run_until_complete(sleeps(args.jobs, args.in_flight, seconds))
            finally:
                loop.close()
            late_ms = sorted(x * 1000 for x in late)
            print(json.dumps({
                "round": n, "loop": name, "sleeps": len(late), "per_s": round(rate),
                "bound_per_s": round(args.in_flight / seconds),
                "late_ms_median": round(statistics.median(late_ms), 3),
                "late_ms_mean": round(statistics.fmean(late_ms), 3),
                "late_ms_p99": round(late_ms[int(len(late_ms) * 0.99)], 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
