"""A longer chaos run by hand (not collected by pytest): a private PostgreSQL cluster, a
mixed backlog, several workers, and a loop that keeps hurting them — kill -9, SIGSTOP
past the lease then SIGCONT, SIGTERM (graceful, then replaced) and PostgreSQL restarts —
until every job is terminal. Prints the figures and the invariants.

    .venv/bin/python -m tests.chaos.soak --jobs 20000 --workers 4 --chaos-seconds 90
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path

import psycopg

from jobwarden.worker.store import db as dbmod
from tests.apps.chaos_app import create_tables
from tests.chaos.conftest import Workers
from tests.chaos.support import add_many
from tests.helpers import scalar, status_counts, wait_for
from tests.pgcluster import PrivateCluster
from tests.pgcluster import accepts as _accepts


def enqueue_backlog(url: str, jobs: int, rng: random.Random) -> Counter:
    mix: Counter = Counter()
    batch: dict[str, list[dict]] = {}
    for i in range(jobs):
        r = rng.random()
        if i < 5:
            kind, payload = "chaos.poison", {}
        elif r < 0.85:
            kind, payload = "chaos.quick", {"seconds": 0.01}
        elif r < 0.91:
            kind, payload = "chaos.sleep", {"first_seconds": 0.5, "seconds": 0.2}
        elif r < 0.97:
            kind, payload = "chaos.charge", {"amount": i, "provider_idempotent": True}
        else:
            kind, payload = "chaos.checkpointed", {"items": 40, "first_delay": 0.02}
        batch.setdefault(kind, []).append(payload)
        mix[kind] += 1
    for kind, payloads in batch.items():
        for start in range(0, len(payloads), 1000):
            add_many(url, kind, payloads[start:start + 1000])
    return mix


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--chaos-seconds", type=float, default=90)
    ap.add_argument("--grace", type=float, default=0.3,
                    help="short, so that SIGTERM hands jobs back")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    cluster = PrivateCluster()
    tmp = Path(tempfile.mkdtemp(prefix="jobwarden-soak-"))
    pool = Workers(cluster.url, tmp)
    faults: Counter = Counter()
    try:
        cluster.start()
        wait_for(lambda: _accepts(cluster.url), message="the cluster")
        dbmod.migrate(cluster.url)
        url = cluster.url
        with psycopg.connect(url) as conn:
            create_tables(conn)
        mix = enqueue_backlog(url, args.jobs, rng)
        live = [pool.start(concurrency=args.concurrency, grace=args.grace) for _ in range(args.workers)]
        started = time.monotonic()
        chaos_until = started + args.chaos_seconds
        next_db_restart = started + args.chaos_seconds / 2

        def replace_dead() -> None:
            for i, w in enumerate(live):
                if not w.alive():
                    live[i] = pool.start(concurrency=args.concurrency, grace=args.grace)

        while time.monotonic() < chaos_until:
            replace_dead()
            if time.monotonic() >= next_db_restart:
                cluster.stop("immediate")
                faults["postgresql_restart"] += 1
                time.sleep(3)  # an outage longer than the 1-2 s leases
                cluster.start()
                next_db_restart = float("inf")
                continue
            victim = rng.choice(live)
            if not victim.alive():
                continue
            action = rng.choice(["kill9", "kill9", "stop", "term"])
            if action == "kill9":
                victim.kill()
                faults["kill -9"] += 1
            elif action == "stop":
                victim.signal(signal.SIGSTOP)
                time.sleep(rng.uniform(1.5, 3.0))  # longer than the 1 s lease
                victim.signal(signal.SIGCONT)
                faults["SIGSTOP/SIGCONT"] += 1
            else:
                victim.signal(signal.SIGTERM)
                faults["SIGTERM"] += 1
            time.sleep(rng.uniform(1.0, 2.5))
        chaos_ended = time.monotonic()

        def settled() -> bool:
            replace_dead()
            counts = status_counts(url)
            return not counts.get("pending") and not counts.get("running")

        wait_for(settled, timeout=600, interval=1, message="every job to settle")
        settled_after = time.monotonic() - chaos_ended
        for w in live:
            w.signal(signal.SIGTERM)
        for w in live:
            w.proc.wait(timeout=30)

        counts = status_counts(url)
        with psycopg.connect(url) as conn:
            outcomes = dict(conn.execute(
                "SELECT coalesce(outcome, 'unfinished'), count(*) FROM job_executions "
                "GROUP BY 1").fetchall())
            by_type = conn.execute(
                "SELECT type, status, last_error_code, count(*) FROM background_jobs "
                "WHERE status <> 'completed' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3").fetchall()
        logs = "\n".join(w.log.read_text(errors="replace") for w in pool.all)
        report = {
            "jobs_enqueued": args.jobs, "mix": dict(mix),
            "jobs_in_table": sum(counts.values()), "final_states": counts,
            "workers": args.workers, "concurrency": args.concurrency,
            "worker_processes_started": len(pool.all), "faults": dict(faults),
            "execution_outcomes": outcomes,
            "not_completed": [list(r) for r in by_type],
            "log_lines": {
                "poison_or_kill_deaths_seen_by_supervisor": len(pool.all) - args.workers,
                "lease_lost (zombie heartbeat refused)": logs.count("lease lost"),
                "result discarded (zombie/late result refused)": logs.count("discarded"),
                "handed back at shutdown": logs.count("handed back to pending"),
                "commit uncertain -> retry": logs.count("went away while committing"),
                "worker self-restarts": logs.count("restarting:"),
            },
            "stuck_running": counts.get("running", 0),
            "completed_quick_without_order": scalar(
                url, "SELECT count(*) FROM background_jobs j WHERE type IN "
                     "('chaos.quick', 'chaos.sleep', 'chaos.charge') AND status = 'completed' "
                     "AND NOT EXISTS (SELECT 1 FROM chaos_orders o WHERE o.job_id = j.id)"),
            "orders_written_twice": scalar(
                url, "SELECT count(*) FROM (SELECT job_id FROM chaos_orders GROUP BY job_id "
                     "HAVING count(*) > 1) d"),
            "provider_objects_per_charge_max": scalar(
                url, "SELECT coalesce(max(n), 0) FROM (SELECT job_id, count(*) AS n "
                     "FROM chaos_provider GROUP BY job_id) d"),
            "checkpointed_jobs_missing_items": scalar(
                url, "SELECT count(*) FROM background_jobs j WHERE type = 'chaos.checkpointed' "
                     "AND status = 'completed' AND (SELECT count(DISTINCT item) FROM chaos_items i "
                     "WHERE i.job_id = j.id) <> 40"),
            "chaos_seconds": args.chaos_seconds,
            "settled_seconds_after_chaos": round(settled_after, 1),
            "logs": str(tmp),
        }
        print(json.dumps(report, indent=2))
        return 0
    finally:
        pool.close()
        cluster.destroy()


if __name__ == "__main__":
    raise SystemExit(main())
