"""Fair share across tenants: how long a small tenant's jobs wait behind a big one's burst.

    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/bench_fair.py burst --big 100000 --keys 50 --each 10
    DATABASE_URL=... .venv/bin/python bench/bench_fair.py single --jobs 20000 --rounds 4
    DATABASE_URL=... .venv/bin/python bench/bench_fair.py claim --jobs 20000 --rounds 200

`burst`: enqueues --big jobs of tenant 'big', then --each jobs of each of --keys other
tenants (enqueued after the burst: FIFO would start them last), all of `bench.tenant`
(bench/fair_app.py, `fair_key="tenant"`), starts --workers `jobwarden worker` processes
and waits until every small tenant's jobs have started. Reports, per tenant, the p99 of
time-to-start (the job's first start less the instant the workers were started, both the
server's clock), the worst small tenant, and how much of the burst had started by then.
`--plain` runs the same with the type declared without a fair key (today's claim).

`single`: one tenant's --jobs drained by one worker, with and without a fair key,
alternating --rounds times each: the fair claim's cost when there is nothing to share
(seconds from the first start to the last end, medians and their ratio). Figures, not
a pass/fail test: the machine is shared.

`claim`: the two claims alone, on one database that holds --jobs jobs of a plain type
and --jobs of one fair key: a claim of 200 of each kind through the lane's own prepared
statement (as a worker's producer runs it), alternating --rounds times, each rolled
back so every claim meets the same backlog. Reports the median time of each and the CPU
its server session spent per claim (from /proc: the server must run on this machine).
One session takes the machine's noise for both alike, where the drains above vary by 2x
on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import psycopg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.bench_backlog import create_database, pct  # noqa: E402
from jobwarden import JobSpec, Registry, job  # noqa: E402
from jobwarden.worker.engine.producer import (  # noqa: E402
    ClaimedJob,
    ClaimSpec,
    claim_params,
    fair_params,
    prepare_claims,
)
from jobwarden.worker.jobs.enqueue import enqueue_many  # noqa: E402
from jobwarden.worker.store.db import database_url, migrate  # noqa: E402
from jobwarden.worker.store.jobstore import PreparedQuery  # noqa: E402
from jobwarden.worker.store.queries import Q  # noqa: E402

WAITS = """
SELECT fair_key_of, extract(epoch FROM started_at - %(t0)s)::float8
FROM (SELECT payload ->> 'tenant' AS fair_key_of, started_at FROM background_jobs
      WHERE started_at IS NOT NULL) s
"""


def _registry(fair: bool) -> Registry:
    """The enqueuer's declaration of bench.tenant, as the workers' (bench/fair_app.py)."""
    reg = Registry()
    job("bench.tenant", lease=30, registry=reg,
        **({"fair_key": "tenant"} if fair else {}))(lambda ctx, p: None)
    return reg


def _workers(url: str, n: int, concurrency: int, fair: bool, work_ms: float):
    env = {**os.environ, "DATABASE_URL": url, "JOBWARDEN_BENCH_FAIR": "1" if fair else "0",
           "JOBWARDEN_BENCH_WORK_MS": str(work_ms)}
    return [subprocess.Popen(
        [sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING", "worker",
         "--app", "bench.fair_app", "--concurrency", str(concurrency)],
        cwd=ROOT, env=env) for _ in range(n)]


def _stop(procs) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(timeout=60)


def _enqueue(url: str, fair: bool, tenants: list[tuple[str, int]]) -> None:
    reg = _registry(fair)
    with psycopg.connect(url) as conn:
        conn.execute("ALTER TABLE background_jobs SET (autovacuum_enabled = false)")
        for tenant, count in tenants:
            for offset in range(0, count, 10_000):
                enqueue_many(conn, [JobSpec("bench.tenant", {"tenant": tenant, "n": i})
                                    for i in range(offset, min(count, offset + 10_000))],
                             registry=reg)
        conn.commit()


def burst(args: argparse.Namespace, server: str) -> dict:
    name, url = create_database(server)
    procs: list[subprocess.Popen] = []
    small = [(f"t{k:03d}", args.each) for k in range(args.keys)]
    try:
        migrate(url)
        _enqueue(url, not args.plain, [("big", args.big), *small])
        with psycopg.connect(url, autocommit=True) as conn:
            t0 = conn.execute("SELECT now()").fetchone()[0]
            procs = _workers(url, args.workers, args.concurrency, not args.plain, args.work_ms)
            want = args.keys * args.each
            deadline = time.monotonic() + args.timeout
            while time.monotonic() < deadline:
                started = conn.execute("SELECT count(*) FROM background_jobs "
                                       "WHERE payload ->> 'tenant' <> 'big' "
                                       "AND started_at IS NOT NULL").fetchone()[0]
                if started == want:
                    break
                time.sleep(0.2)
            else:
                print(f"only {started} of {want} small tenants' jobs started in "
                      f"{args.timeout:g} s", file=sys.stderr)
            _stop(procs)
            procs = []
            rows = conn.execute(WAITS, {"t0": t0}).fetchall()
    finally:
        _stop(procs)
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    waits: dict[str, list[float]] = {}
    for tenant, wait in rows:
        waits.setdefault(tenant, []).append(wait)
    p99 = {t: pct(w, 0.99) for t, w in waits.items()}
    smalls = {t: v for t, v in p99.items() if t != "big"}
    big_started = len(waits.get("big", []))
    return {"mode": "burst", "fair": not args.plain, "big": args.big, "keys": args.keys,
            "each": args.each, "workers": args.workers, "concurrency": args.concurrency,
            "work_ms": args.work_ms,
            "small_started": sum(len(w) for t, w in waits.items() if t != "big"),
            "small_p99_worst": max(smalls.values()) if smalls else None,
            "small_p99_median": statistics.median(smalls.values()) if smalls else None,
            "small_p50_of_first_job": statistics.median(
                min(w) for t, w in waits.items() if t != "big") if smalls else None,
            "big_started_by_then": big_started,
            "big_p99_of_started": p99.get("big"),
            "per_tenant_p99": {t: round(v, 3) for t, v in sorted(p99.items())}}


def _drain(server: str, fair: bool, jobs: int, concurrency: int) -> float:
    name, url = create_database(server)
    procs: list[subprocess.Popen] = []
    try:
        migrate(url)
        _enqueue(url, fair, [("only", jobs)])
        with psycopg.connect(url, autocommit=True) as conn:
            procs = _workers(url, 1, concurrency, fair, 0.0)
            while conn.execute("SELECT count(*) FROM background_jobs "
                               "WHERE status = 'completed'").fetchone()[0] < jobs:
                time.sleep(0.05)
            # From the first start to the last end, the server's clock: the worker's own
            # start-up (imports, connections) is not the claim's cost.
            seconds = conn.execute("SELECT extract(epoch FROM max(completed_at) "
                                   "- min(started_at))::float8 "
                                   "FROM background_jobs").fetchone()[0]
    finally:
        _stop(procs)
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return seconds


def single(args: argparse.Namespace, server: str) -> dict:
    runs: dict[str, list[float]] = {"plain": [], "fair": []}
    for i in range(args.rounds):
        for fair in ((False, True) if i % 2 == 0 else (True, False)):
            runs["fair" if fair else "plain"].append(
                round(_drain(server, fair, args.jobs, args.concurrency), 3))
    med = {k: statistics.median(v) for k, v in runs.items()}
    return {"mode": "single", "jobs": args.jobs, "concurrency": args.concurrency,
            "drain_seconds": runs, "median": med,
            "fair_over_plain": round(med["fair"] / med["plain"], 3)}


def _session_cpu(pid: int) -> float:
    """Seconds of CPU the server process `pid` has used (utime + stime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def claims(args: argparse.Namespace, server: str) -> dict:
    name, url = create_database(server)
    try:
        migrate(url)
        reg = Registry()
        job("bench.plain", lease=30, registry=reg)(lambda ctx, p: None)
        with psycopg.connect(url) as conn:
            for offset in range(0, args.jobs, 10_000):
                enqueue_many(conn, [JobSpec("bench.plain", {"tenant": "only", "n": i})
                                    for i in range(offset, min(args.jobs, offset + 10_000))],
                             registry=reg)
            conn.commit()
        _enqueue(url, True, [("only", args.jobs)])
        with psycopg.connect(url, autocommit=True) as conn:
            prepare_claims(conn)
            spec = ClaimSpec(types=["bench.tenant"], leases=[30.0], worker_id="bench",
                             fair_types=["bench.tenant"])
            plain = PreparedQuery(Q.claim_jobs, claim_params(
                types=["bench.plain"], leases=[30.0], queues=None, limit=0,
                worker_id="bench"), ("limit",), conn)
            params = fair_params(spec, 0, None)
            assert params is not None  # bench.tenant is fair
            fair = PreparedQuery(Q.claim_fair_jobs, params, ("limit", "after", "keys"), conn)
            plain.prepare(conn)
            fair.prepare(conn)
            run = {"plain": lambda: plain.records(conn, ClaimedJob, limit=200),
                   "fair": lambda: fair.records(conn, ClaimedJob, limit=200, after="only",
                                                keys=200)}
            pid = conn.info.backend_pid
            ms: dict[str, list[float]] = {"plain": [], "fair": []}
            cpu = {"plain": 0.0, "fair": 0.0}
            for i in range(args.rounds + 10):  # the first 10: warming up
                for kind in ("plain", "fair") if i % 2 else ("fair", "plain"):
                    conn.execute("BEGIN")
                    c0, t0 = _session_cpu(pid), time.perf_counter()
                    got = run[kind]()
                    t1 = time.perf_counter()
                    conn.execute("ROLLBACK")
                    c1 = _session_cpu(pid)
                    assert len(got) == 200, (kind, len(got))
                    if i >= 10:
                        ms[kind].append((t1 - t0) * 1000)
                        cpu[kind] += c1 - c0
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    med = {k: round(statistics.median(v), 3) for k, v in ms.items()}
    per = {k: round(v * 1000 / args.rounds, 3) for k, v in cpu.items()}
    return {"mode": "claim", "jobs": args.jobs, "rounds": args.rounds,
            "median_ms": med, "server_cpu_ms_per_claim": per,
            "fair_over_plain": round(med["fair"] / med["plain"], 3),
            "fair_over_plain_cpu": round(per["fair"] / per["plain"], 3) if per["plain"] else None,
            "load": os.getloadavg()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    b = sub.add_parser("burst")
    b.add_argument("--big", type=int, default=100_000)
    b.add_argument("--keys", type=int, default=50)
    b.add_argument("--each", type=int, default=10)
    b.add_argument("--workers", type=int, default=1)
    b.add_argument("--concurrency", type=int, default=8)
    b.add_argument("--work-ms", type=float, default=1.0)
    b.add_argument("--timeout", type=float, default=300.0)
    b.add_argument("--plain", action="store_true", help="no fair key: today's claim")
    s = sub.add_parser("single")
    s.add_argument("--jobs", type=int, default=20_000)
    s.add_argument("--rounds", type=int, default=4)
    s.add_argument("--concurrency", type=int, default=8)
    c = sub.add_parser("claim")
    c.add_argument("--jobs", type=int, default=20_000)
    c.add_argument("--rounds", type=int, default=200)
    for p in (b, s, c):
        p.add_argument("--json", help="write the figures here too")
    args = ap.parse_args()
    figures = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               **{"burst": burst, "single": single, "claim": claims}[args.mode](
                   args, database_url())}
    print(json.dumps(figures, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
