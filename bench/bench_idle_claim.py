"""One-job claims after an idle spell: through a cursor, as `claim()` runs them, against
the producer's prepared claim (worker/store/jobstore.py, PreparedQuery), whose
parameters were dumped once, ahead; and the prepared claim after the session's plans were
dropped (DedicatedConnection.replan, every REPLAN_SECONDS), alone and then made again by
a claim of no jobs, as the producer does before it waits (Producer._replan).

    .venv/bin/python bench/bench_idle_claim.py --claims 150 --gap-ms 50 --rounds 2

An idle worker claims once per notification, after tens of milliseconds of sleep, when
the interpreter's caches (and the CPU's) are cold; what a claim costs then is most of
the enqueue→start latency. Each claim here takes the one job committed just before it,
after `--gap-ms` of sleep; the two ways take turns, claim by claim, in a fresh database
(migrated, never analyzed) on DATABASE_URL's server. Prints one JSON line per way and
round: the claim's time from the call to its jobs in hand (median and 90th percentile,
µs), and for the cursor also the time spent building and dumping its parameters alone.
With `--gap-ms 0` the same claims run warm.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

import psycopg
from psycopg.adapt import PyFormat, Transformer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.peers.dbutil import fresh_database  # noqa: E402
from jobwarden.worker.engine.producer import (  # noqa: E402
    ClaimedJob,
    claim,
    claim_params,
    prepare_claims,
)
from jobwarden.worker.store.db import migrate  # noqa: E402
from jobwarden.worker.store.jobstore import JobStore, PreparedQuery  # noqa: E402
from jobwarden.worker.store.queries import Q  # noqa: E402

#: A benchmark's measure: (url, claims, gap in seconds) to each way's figures.
Measure = Callable[[str, int, float], dict[str, dict[str, Any]]]

SPEC = {"types": ["bench.idle"], "leases": [30.0], "queues": None, "worker_id": "bench"}


def percentiles(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"median_us": round(statistics.median(xs)), "p90_us": round(xs[int(0.9 * len(xs))])}


def measure(url: str, claims: int, gap: float) -> dict[str, dict[str, float]]:
    with psycopg.connect(url, autocommit=True) as feed, \
            psycopg.connect(url, autocommit=True) as conn, \
            psycopg.connect(url, autocommit=True) as replanned:
        # The ways that drop their plans do it on a session of their own: DISCARD PLANS
        # drops every plan of a session, the cursor's too.
        for c in (conn, replanned):
            prepare_claims(c)
        prepared = PreparedQuery(Q.claim_jobs, claim_params(**SPEC, limit=0), ("limit",),
                                 conn)
        prepared.prepare(conn)
        again = PreparedQuery(Q.claim_jobs, claim_params(**SPEC, limit=0), ("limit",),
                              replanned)
        again.prepare(replanned)

        def via_cursor() -> int:
            return len(claim(conn, **SPEC, limit=1))

        def via_prepared() -> int:
            return len(prepared.records(conn, ClaimedJob, limit=1))

        def via_replanned() -> int:
            return len(again.records(replanned, ClaimedJob, limit=1))

        def dropped() -> None:
            JobStore(replanned).rows(Q.discard_plans)

        def made_again() -> None:
            dropped()
            again.records(replanned, ClaimedJob, limit=0)

        # Each way: what runs before its idle spell (None: nothing), and its claim.
        ways = {"cursor": (None, via_cursor), "prepared": (None, via_prepared),
                "prepared_plans_dropped": (dropped, via_replanned),
                "prepared_plans_made_again": (made_again, via_replanned)}
        times: dict[str, list[float]] = {name: [] for name in ways}
        dumping: list[float] = []
        warm = 5  # each way plans and loads its code once before it is timed
        for n in range(claims + warm):
            for name, (before, run) in ways.items():
                feed.execute("INSERT INTO background_jobs (queue, type, payload) "
                             "VALUES ('default', 'bench.idle', '{\"to\": \"ops@example.com\"}')")
                if before is not None:
                    before()
                time.sleep(gap)
                started = time.perf_counter_ns()
                got = run()
                took = (time.perf_counter_ns() - started) / 1000
                if got != 1:
                    raise SystemExit(f"{name} claimed {got} jobs, not 1")
                if n >= warm:
                    times[name].append(took)
            # The cursor's own work before it sends: parameters built and dumped.
            time.sleep(gap)
            started = time.perf_counter_ns()
            params = claim_params(**SPEC, limit=1)
            Transformer(conn).dump_sequence(list(params.values()), [PyFormat.AUTO] * len(params))
            if n >= warm:
                dumping.append((time.perf_counter_ns() - started) / 1000)
    out = {name: percentiles(xs) for name, xs in times.items()}
    out["cursor"]["parameters_median_us"] = percentiles(dumping)["median_us"]
    return out


def run_rounds(doc: str, tag: str, claims: int,
               measure: Measure | Mapping[str, Measure]) -> int:
    """The command line of an idle-claim benchmark (this one, bench_claim_lookup.py):
    each round a fresh migrated database on DATABASE_URL's server, `measure(url, claims,
    gap_s)`, and one JSON line per way. Several measures by name: `--claim` chooses one
    (the first by default)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--claims", type=int, default=claims, help="claims per way and round")
    ap.add_argument("--gap-ms", type=float, default=50.0, help="idle before each claim")
    ap.add_argument("--rounds", type=int, default=2)
    measures = measure if isinstance(measure, Mapping) else {"": measure}
    if len(measures) > 1:
        ap.add_argument("--claim", choices=list(measures), default=next(iter(measures)))
    args = ap.parse_args()
    chosen = measures[getattr(args, "claim", "")]
    server = os.environ["DATABASE_URL"]
    for n in range(1, args.rounds + 1):
        with fresh_database(server, tag) as url:
            migrate(url)
            result = chosen(url, args.claims, args.gap_ms / 1000)
        for way, figures in result.items():
            print(json.dumps({"round": n, "way": way, "gap_ms": args.gap_ms,
                              "claims": args.claims, **figures}), flush=True)
    return 0


def main() -> int:
    return run_rounds(__doc__ or "", "idle_claim", 150, measure)


if __name__ == "__main__":
    sys.exit(main())
