"""How the claim's UPDATE finds the rows its walk locked, one-job claims after an idle
spell while finished jobs pile up in the table, as under an idle worker: joined to a batch
the planner takes for one row, one probe of the primary key a row (claim_jobs as it is),
against joined to the batch as it comes (as it was).

    .venv/bin/python bench/bench_claim_lookup.py --claims 200 --gap-ms 50 --rounds 2
    .venv/bin/python bench/bench_claim_lookup.py --claim fair --claims 200 --rounds 2

Each claim takes the one job enqueued just before it, after `--gap-ms` of sleep, and the
job is then marked completed (its row stays, as a finished job's does until retention
deletes it). The two ways take turns claim by claim, each on a claim connection of its
own set up as a producer's (prepare_claims, the claim prepared once), in a fresh database
on DATABASE_URL's server (migrated, never analyzed). The generic plan each session makes
at its first claim, on a near-empty table, is the one it keeps: joined to the batch as it
comes, that plan hashes the whole table at every claim. Prints one JSON line per way and round: the
claim's time from the call to its job in hand, median and 90th percentile in µs, over
all claims and over each quarter of them (the table grows from one quarter to the next).

`--claim fair`: the same for the fair claim (claim_fair_jobs, jobs of one fair key), as
it is (`fair_probed`) against as it was (`fair_scanned`: its batch inlined, whose young
plan read the whole table for each row it claimed, and each key's jobs picked by
`fair_key = key`).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable

import psycopg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.bench_idle_claim import percentiles, run_rounds  # noqa: E402
from jobwarden.worker.engine.producer import (  # noqa: E402
    ClaimedJob,
    ClaimSpec,
    claim_params,
    fair_params,
    prepare_claims,
)
from jobwarden.worker.store.jobstore import PreparedQuery  # noqa: E402
from jobwarden.worker.store.queries import Q, Query  # noqa: E402

SPEC = {"types": ["bench.lookup"], "leases": [30.0], "queues": None, "worker_id": "bench"}
#: The batch claim_jobs' UPDATE joins, as it is and as it was.
PROBED = "FROM (SELECT * FROM selected LIMIT (SELECT %(limit)s::int)) AS s"
HASHED = "FROM selected s"


def hashed() -> Query:
    """claim_jobs with its UPDATE joined to the batch as it comes."""
    assert Q.claim_jobs.count(PROBED) == 1, "claim_jobs no longer joins as this bench expects"
    return Query("claim_jobs_hashed", Q.claim_jobs.replace(PROBED, HASHED))


#: claim_fair_jobs as it was: its batch inlined into the UPDATE's join, and each key's
#: jobs picked by equality (its young plan walked the claim index for them).
FAIR_WAS = (("), selected AS MATERIALIZED (", "), selected AS ("),
            ("AND j.fair_key >= k.key AND j.fair_key <= k.key", "AND j.fair_key = k.key"),
            ("ORDER BY j.fair_key, jobwarden_claim_rank(", "ORDER BY jobwarden_claim_rank("))


def fair_scanned() -> Query:
    """claim_fair_jobs as it was (FAIR_WAS)."""
    sql = str(Q.claim_fair_jobs)
    for now, was in FAIR_WAS:
        assert sql.count(now) == 1, f"claim_fair_jobs no longer has {now!r}"
        sql = sql.replace(now, was)
    return Query("claim_fair_jobs_scanned", sql)


def plain_ways(conn: psycopg.Connection, query: Query) -> PreparedQuery:
    prepared = PreparedQuery(query, claim_params(**SPEC, limit=0), ("limit",), conn)
    prepared.prepare(conn)
    return prepared


def fair_ways(conn: psycopg.Connection, query: Query) -> PreparedQuery:
    spec = ClaimSpec(types=SPEC["types"], leases=SPEC["leases"], worker_id="bench",
                     fair_types=SPEC["types"])
    params = fair_params(spec, 0, None)
    assert params is not None  # the type is fair
    prepared = PreparedQuery(query, params, ("limit", "after", "keys"), conn)
    prepared.prepare(conn)
    return prepared


def measure(url: str, claims: int, gap: float, ways: dict[str, Query],
            prepare: Callable[[psycopg.Connection, Query], PreparedQuery],
            args: dict[str, object], fair_key: str | None) -> dict[str, dict[str, object]]:
    with psycopg.connect(url, autocommit=True) as feed:
        sessions: dict[str, tuple[psycopg.Connection, PreparedQuery]] = {}
        for name, query in ways.items():
            conn = psycopg.connect(url, autocommit=True)
            prepare_claims(conn)
            sessions[name] = (conn, prepare(conn, query))
        times: dict[str, list[float]] = {name: [] for name in sessions}
        try:
            for _ in range(claims):
                for name, (conn, prepared) in sessions.items():
                    feed.execute("INSERT INTO background_jobs (queue, type, payload, fair_key) "
                                 "VALUES ('default', 'bench.lookup', '{\"i\": 1}', %s)",
                                 (fair_key,))
                    time.sleep(gap)
                    started = time.perf_counter_ns()
                    got = prepared.records(conn, ClaimedJob, **args)
                    times[name].append((time.perf_counter_ns() - started) / 1000)
                    if len(got) != 1:
                        raise SystemExit(f"{name} claimed {len(got)} jobs, not 1")
                    feed.execute("UPDATE background_jobs SET status = 'completed', "
                                 "completed_at = now(), lease_expires_at = NULL "
                                 "WHERE id = %s", (got[0].id,))
        finally:
            for conn, _ in sessions.values():
                conn.close()
    out: dict[str, dict[str, object]] = {}
    for name, xs in times.items():
        q = max(1, len(xs) // 4)
        out[name] = {**percentiles(xs), "quarters_median_us": [
            round(statistics.median(xs[k * q:(k + 1) * q])) for k in range(4)]}
    return out


def measure_plain(url: str, claims: int, gap: float) -> dict[str, dict[str, object]]:
    return measure(url, claims, gap, {"probed": Q.claim_jobs, "hashed": hashed()},
                   plain_ways, {"limit": 200}, None)


def measure_fair(url: str, claims: int, gap: float) -> dict[str, dict[str, object]]:
    return measure(url, claims, gap,
                   {"fair_probed": Q.claim_fair_jobs, "fair_scanned": fair_scanned()},
                   fair_ways, {"limit": 200, "after": None, "keys": 200}, "tenant")


def main() -> int:
    return run_rounds(__doc__ or "", "claim_lookup", 200,
                      {"plain": measure_plain, "fair": measure_fair})


if __name__ == "__main__":
    sys.exit(main())
