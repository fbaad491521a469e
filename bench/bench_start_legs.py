"""Where an idle worker's enqueue→start goes, leg by leg.

    .venv/bin/python bench/bench_start_legs.py --jobs 400 --rate 20 --rounds 2

The peers harness's latency scenario (bench/peers/scenarios.py, `latency`: one worker
idling, jobs enqueued one per transaction at `--rate`, both ends stamped on the machine's
monotonic clock), its worker loading bench/legs_app.py, which stamps the steps between:

- commit → woken: the enqueue's commit (as its client saw it return) to the claim
  connection's socket becoming readable in the worker (the notification); negative
  when the notification came first;
- woken → sent: the notification read, and the claim made ready and sent;
- claim: the prepared claim's round trip, to its jobs in hand;
- claimed → begun: the job begun on the thread that claimed it, the role passed on;
- begun → handler: to the handler's first line.

Each round runs in a fresh database on DATABASE_URL's server (migrated, never
analyzed) and prints one JSON line: each leg's p50, p90 and p99 in µs over the jobs
stamped at every step, and the total's. Then a table of the rounds' medians. The
stamps cost the worker four clock reads a job; a figure, not a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from itertools import pairwise

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.peers import scenarios, systems  # noqa: E402

LEGS = ("commit → woken", "woken → sent", "claim", "claimed → begun", "begun → handler")


def percentiles(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"p50": round(statistics.median(xs)), "p90": round(xs[int(0.9 * len(xs))]),
            "p99": round(xs[min(len(xs) - 1, int(0.99 * len(xs)))])}


def legs(commit: dict[int, float], start: dict[int, float],
         steps: dict[int, list[float]]) -> dict[str, list[float]]:
    """Each leg's µs, job by job, over the jobs stamped at every step."""
    out: dict[str, list[float]] = {name: [] for name in (*LEGS, "total")}
    for i, (woke, sent, back, begun) in steps.items():
        if i not in commit or i not in start:
            continue
        points = (commit[i], woke, sent, back, begun, start[i])
        for name, (a, b) in zip(LEGS, pairwise(points), strict=True):
            out[name].append((b - a) * 1e6)
        out["total"].append((start[i] - commit[i]) * 1e6)
    return out


def read_steps(path: str) -> dict[int, list[float]]:
    """index -> (woke, sent, back, begun), as bench/legs_app.py wrote them (none: no file)."""
    steps: dict[int, list[float]] = {}
    if not os.path.exists(path):
        return steps
    with open(path) as f:
        for line in f:
            i, *times = line.split()
            steps[int(i)] = [float(t) for t in times]
    return steps


def one_round(system: systems.System, server: str, sizes: scenarios.Sizes) -> dict:
    path = os.path.join(tempfile.mkdtemp(prefix="jwbench-legs-"), "legs")
    os.environ["BENCH_LEGS_FILE"] = path  # the worker's environment is this one's
    kept: dict[str, dict[int, float]] = {}
    with scenarios.scenario_database(system, server, "legs") as url:
        scenarios.install(system, url)
        scenarios.latency(system, url, sizes, kept)
    by_leg = legs(kept["commit"], kept["start"], read_steps(path))
    if not by_leg["total"]:
        raise SystemExit("no job was stamped at every step: bench/legs_app.py's wrappers "
                         "no longer meet the methods a woken producer runs")
    return {"jobs": len(by_leg["total"]),
            **{name: percentiles(xs) for name, xs in by_leg.items() if xs}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--rate", type=float, default=20.0, help="jobs enqueued per second")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    server = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    jw = next(s for s in systems.all_systems() if s.name == "jobwarden")
    systems.prepare(jw)
    plain = jw.worker_argv
    # The same worker, with the stamps' app instead of the scenario's own.
    jw.worker_argv = lambda url, concurrency: [  # type: ignore[method-assign]
        "bench.legs_app" if a == "bench.peers.apps.jobwarden_app" else a
        for a in plain(url, concurrency)]
    sizes = scenarios.Sizes(latency_jobs=args.jobs, latency_rate=args.rate)
    rounds = []
    try:
        for n in range(1, args.rounds + 1):
            figures = one_round(jw, server, sizes)
            rounds.append(figures)
            print(json.dumps({"round": n, **figures}, ensure_ascii=False), flush=True)
    finally:
        scenarios.drop_templates()
    print("\n| leg, µs (median of the rounds) | p50 | p90 | p99 |\n|---|---|---|---|")
    for name in (*LEGS, "total"):
        cells = [round(statistics.median(r[name][q] for r in rounds))
                 for q in ("p50", "p90", "p99")]
        print(f"| {name} | " + " | ".join(f"{c:,}" for c in cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
