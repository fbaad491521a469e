"""The claim's deadline test, alone: claim_jobs as it is against the same statement without
`expires_at IS NULL OR expires_at > now()`, alternated on one backlog of jobs without a
deadline (docs/benchmarks.md, "A deadline on the claim").

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python -m bench.bench_claim_deadline [--jobs 50000] [--rounds 20]

Each claim takes 10 jobs and rolls back, so every one walks the same head of the backlog;
the session plans generically, as a worker's claim connection does. Prints the median
time of a claim of each form per round and the ratio of their medians.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import psycopg

from jobwarden.worker.engine.producer import claim_params
from jobwarden.worker.store import db as dbmod
from jobwarden.worker.store.queries import Q

PREDICATE = "AND (j.expires_at IS NULL OR j.expires_at > now())"


def without_predicate() -> str:
    """claim_jobs as sent (compacted), less its deadline test's line."""
    text = "\n".join(line for line in Q.claim_jobs.splitlines() if line.strip() != PREDICATE)
    assert text != str(Q.claim_jobs), "the claim has no deadline test to leave out"
    return text


def timed(conn: psycopg.Connection, query: str, params: dict, calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        start = time.perf_counter()
        rows = conn.execute(query, params, prepare=True).fetchall()
        out.append(time.perf_counter() - start)
        assert len(rows) == 10
        conn.rollback()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    server = dbmod.database_url()
    name = f"jwbench_deadline_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = server.rsplit("/", 1)[0] + "/" + name
    try:
        dbmod.migrate(url)
        with psycopg.connect(url) as conn:
            conn.execute("INSERT INTO background_jobs (type, payload) "
                         "SELECT 't', '{}'::jsonb FROM generate_series(1, %s)", [args.jobs])
            conn.commit()
            conn.execute(str(Q.claim_plans_generic))
            params = claim_params(types=["t"], leases=[60.0], queues=None, limit=10,
                                  worker_id="bench")
            forms = {"with": str(Q.claim_jobs), "without": without_predicate()}
            for form in forms.values():  # plan and warm both
                timed(conn, form, params, 10)
            medians: dict[str, list[float]] = {"with": [], "without": []}
            for r in range(args.rounds):
                order = ["without", "with"] if r % 2 == 0 else ["with", "without"]
                for form in order:
                    medians[form].append(statistics.median(
                        timed(conn, forms[form], params, args.calls)) * 1000)
            for form, values in medians.items():
                print(f"{form:8} per-round medians (ms): "
                      + " ".join(f"{v:.3f}" for v in values))
            a, b = statistics.median(medians["without"]), statistics.median(medians["with"])
            print(f"median claim: without {a:.3f} ms, with {b:.3f} ms; "
                  f"with/without {b / a:.3f}")
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    main()
