"""Where an idle worker's one-job claim goes: the producer's prepared claim on job
tables that each lack one part of background_jobs, against the table as migrated.

    .venv/bin/python bench/bench_claim_parts.py --claims 200 --rounds 2

An idle worker's enqueue→start is mostly its claim (bench/bench_start_legs.py), and the
claim after an idle spell costs two to three times a warm one. Each arm here is a fresh
database on DATABASE_URL's server, migrated (never analyzed), then changed by its SQL:

- `as migrated`: nothing changed;
- `no checks`: the table's CHECK constraints dropped (PostgreSQL evaluates every one at
  every update of a row, whichever columns it sets);
- `no count trigger`: the count rollup's UPDATE trigger disabled (a statement trigger
  with transition tables, called for every UPDATE: for most claims it finds nothing to
  count);
- `hot indexes only`: every index dropped but the four a no-op job's enqueue, claim and
  finish write (the primary key, the claim, lease and retention indexes): the others are
  never written by such a job, but each is opened and its predicate tested at every
  update;
- `all three`: the three changes together.

And `SELECT 1`: a round trip with no work, the floor the machine sets. The arms take
turns claim by claim (the order reversed every other claim): a job committed by another
session, then `--gap-ms` of sleep (0: none), then the timed claim, from the call to the
job in hand. One JSON line per arm and round (median, p90, and the median's difference
from `as migrated`), then a table of the rounds' medians. Figures, not a pass/fail test:
the arms say what each part costs, not that it could go (each is a guard or a feature).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from contextlib import ExitStack

import psycopg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.bench_idle_claim import SPEC, percentiles  # noqa: E402
from bench.peers.dbutil import fresh_database  # noqa: E402
from jobwarden.worker.engine.producer import ClaimedJob, claim_params, prepare_claims  # noqa: E402
from jobwarden.worker.store.db import migrate  # noqa: E402
from jobwarden.worker.store.jobstore import PreparedQuery  # noqa: E402
from jobwarden.worker.store.queries import Q  # noqa: E402

#: The indexes a no-op job's enqueue, claim and finish write an entry in.
HOT_INDEXES = ("background_jobs_pkey", "background_jobs_claim_rank_idx",
               "background_jobs_lease_idx", "background_jobs_retention_idx")
DROP_CHECKS = """
DO $$ DECLARE c text; BEGIN
  FOR c IN SELECT conname FROM pg_constraint
           WHERE conrelid = 'background_jobs'::regclass AND contype = 'c' LOOP
    EXECUTE format('ALTER TABLE background_jobs DROP CONSTRAINT %I', c);
  END LOOP;
END $$"""
NO_COUNT_TRIGGER = "ALTER TABLE background_jobs DISABLE TRIGGER background_jobs_rollup_update"
DROP_INDEXES = f"""
DO $$ DECLARE i text; BEGIN
  FOR i IN SELECT indexrelid::regclass::text FROM pg_index
           WHERE indrelid = 'background_jobs'::regclass
             AND indexrelid::regclass::text <> ALL (ARRAY{list(HOT_INDEXES)!r}) LOOP
    EXECUTE format('DROP INDEX %s', i);
  END LOOP;
END $$"""
ARMS = {
    "as migrated": [],
    "no checks": [DROP_CHECKS],
    "no count trigger": [NO_COUNT_TRIGGER],
    "hot indexes only": [DROP_INDEXES],
    "all three": [DROP_CHECKS, NO_COUNT_TRIGGER, DROP_INDEXES],
}
FLOOR = "SELECT 1"
JOB = ("INSERT INTO background_jobs (queue, type, payload) "
       "VALUES ('default', 'bench.idle', '{\"to\": \"ops@example.com\"}')")
#: What each arm's table has: CHECK constraints, indexes, whether the count trigger fires.
PARTS = """
SELECT (SELECT count(*) FROM pg_constraint
        WHERE conrelid = 'background_jobs'::regclass AND contype = 'c') > 0,
       (SELECT count(*) FROM pg_index WHERE indrelid = 'background_jobs'::regclass),
       (SELECT tgenabled <> 'D' FROM pg_trigger
        WHERE tgname = 'background_jobs_rollup_update')"""


def expected(migrated: tuple[bool, int, bool], changes: list[str]) -> tuple[bool, int, bool]:
    """What PARTS reads after `changes` on a table that read `migrated` before them."""
    checks, indexes, trigger = migrated
    return (checks and DROP_CHECKS not in changes,
            len(HOT_INDEXES) if DROP_INDEXES in changes else indexes,
            trigger and NO_COUNT_TRIGGER not in changes)


def one_round(server: str, claims: int, gap: float) -> dict[str, dict[str, int]]:
    with ExitStack() as stack:
        runs = {}
        for name, changes in ARMS.items():
            url = stack.enter_context(fresh_database(server, "claim_parts"))
            migrate(url)
            feed = stack.enter_context(psycopg.connect(url, autocommit=True))
            migrated = feed.execute(PARTS).fetchone()
            for sql in changes:
                feed.execute(sql)
            parts, wanted = feed.execute(PARTS).fetchone(), expected(migrated, changes)
            if parts != wanted:
                raise SystemExit(f"{name}: the table has {parts} (checks, indexes, count "
                                 f"trigger on), not {wanted}")
            conn = stack.enter_context(psycopg.connect(url, autocommit=True))
            prepare_claims(conn)
            prepared = PreparedQuery(Q.claim_jobs, claim_params(**SPEC, limit=0), ("limit",),
                                     conn)
            prepared.prepare(conn)
            runs[name] = (feed, conn, prepared)
        floor = stack.enter_context(psycopg.connect(server, autocommit=True))
        times: dict[str, list[float]] = {name: [] for name in (*ARMS, FLOOR)}
        warm = 5  # each arm plans and loads its code once before it is timed
        for n in range(claims + warm):
            order = list(times) if n % 2 else list(reversed(times))
            for name in order:
                if name == FLOOR:
                    time.sleep(gap)
                    started = time.perf_counter_ns()
                    floor.execute(FLOOR).fetchone()
                else:
                    feed, conn, prepared = runs[name]
                    feed.execute(JOB)
                    time.sleep(gap)
                    started = time.perf_counter_ns()
                    got = len(prepared.records(conn, ClaimedJob, limit=1))
                    if got != 1:
                        raise SystemExit(f"{name}: claimed {got} jobs, not 1")
                took = (time.perf_counter_ns() - started) / 1000
                if n >= warm:
                    times[name].append(took)
    out = {name: percentiles(xs) for name, xs in times.items()}
    base = out["as migrated"]["median_us"]
    for figures in out.values():
        figures["vs_as_migrated_us"] = figures["median_us"] - base
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--claims", type=int, default=200, help="claims per arm and round")
    ap.add_argument("--gap-ms", type=float, default=50.0, help="idle before each claim")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    if args.claims < 1 or args.rounds < 1 or args.gap_ms < 0:
        ap.error("--claims and --rounds must be at least 1, --gap-ms at least 0")
    server = os.environ.get("DATABASE_URL")
    if not server:
        raise SystemExit("DATABASE_URL must name the PostgreSQL server to measure on")
    rounds = []
    for n in range(1, args.rounds + 1):
        result = one_round(server, args.claims, args.gap_ms / 1000)
        rounds.append(result)
        for arm, figures in result.items():
            print(json.dumps({"round": n, "arm": arm, "gap_ms": args.gap_ms,
                              "claims": args.claims, **figures}), flush=True)
    print(f"\n| arm, µs after {args.gap_ms:g} ms idle (median of the rounds) | median | p90 "
          "| median vs as migrated |\n|---|---|---|---|")
    for arm in rounds[0]:
        cells = [round(statistics.median(r[arm][k] for r in rounds))
                 for k in ("median_us", "p90_us", "vs_as_migrated_us")]
        print(f"| {arm} | {cells[0]:,} | {cells[1]:,} | {cells[2]:+,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
