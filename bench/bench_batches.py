"""How a worker's batch sizes move a no-op drain: `--claim-batch`, `--buffer` and
`--flush-batch` together, each size against the others, through the peers harness's own
drain (bench/peers/scenarios.py: a fresh database per drain, 50,000 jobs by default,
timed on the database clock from the workers' spawn to the last finish).

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/bench_batches.py --sizes 400,600,1000,1600 --rounds 3

Each size N runs workers with `--claim-batch N --buffer 2N --flush-batch N`, in three
drains: one process, one process with one core busy (the harness's busy loop), two
processes. Within a round every size takes its turn in each drain, in an order each
round reverses; prints one line per drain, then the medians. Figures, not a pass/fail test.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from contextlib import nullcontext

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.peers import contention, scenarios, systems  # noqa: E402

#: name -> (worker processes, one core busy)
DRAINS = {"1 process": (1, False), "1 process, one core busy": (1, True),
          "2 processes": (2, False)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="400,600,1000,1600",
                    help="claim and flush batch sizes, comma-separated (the buffer: twice)")
    ap.add_argument("--jobs", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=90.0)
    args = ap.parse_args(argv)
    server = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    sizes = [int(s) for s in args.sizes.split(",")]
    jw = next(s for s in systems.all_systems() if s.name == "jobwarden")
    systems.prepare(jw)
    rates: dict[tuple[str, int], list[float]] = {}
    try:
        for rnd in range(args.rounds):
            for drain, (workers, busy) in DRAINS.items():
                # Each round reverses the order, as the peers harness does: a size is
                # not always the first (or the last) drain of its round.
                for size in (sizes if rnd % 2 == 0 else sizes[::-1]):
                    extra = ["--claim-batch", str(size), "--buffer", str(2 * size),
                             "--flush-batch", str(size)]
                    with scenarios.scenario_database(jw, server, f"batch{size}") as url:
                        scenarios.install(jw, url)
                        jw.enqueue(url, args.jobs)
                        with contention.cpu_load() if busy else nullcontext():
                            out = scenarios.drain(
                                jw, url, args.jobs, workers, None, args.timeout, 0.05,
                                "batches",
                                launch=lambda i, url=url, extra=extra: (
                                    jw.worker_argv(url, None) + extra, jw.env(url)))
                    rates.setdefault((drain, size), []).append(out["jobs_per_s"])
                    print(json.dumps({"round": rnd, "drain": drain, "size": size,
                                      "jobs_per_s": out["jobs_per_s"],
                                      "steady_jobs_per_s": out["steady_jobs_per_s"],
                                      "timed_out": out["timed_out"]}),
                          flush=True)
    finally:
        scenarios.drop_templates()
    print("\n| claim / buffer / flush | " + " | ".join(DRAINS) + " |")
    print("|---|" + "---|" * len(DRAINS))
    for size in sizes:
        cells = [f"{statistics.median(rates[(d, size)]):,.0f}" for d in DRAINS]
        print(f"| {size} / {2 * size} / {size} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
