"""Where a job's cost goes: server CPU µs, worker CPU µs and statements per no-op job, and
the statements that spend it, measured on a private cluster of the bench's own.

    .venv/bin/python bench/bench_cost.py --jobs 50000 --rounds 2
    .venv/bin/python bench/bench_cost.py --checkout /tmp/old --checkout . --rounds 3
    .venv/bin/python bench/bench_cost.py --workers 1,2 --rounds 3
    .venv/bin/python bench/bench_cost.py --checkout /tmp/old --checkout . --payload-bytes 8000

Each round, for each checkout in turn (alternating order): a fresh database on a private
PostgreSQL 15 cluster (tests/pgcluster.py; autovacuum off, fsync and synchronous_commit on
as on the shared server, `pg_stat_statements` with `track = all`, so statements run by
triggers and functions are counted apart from the statement that fired them), the
checkout's own `jobwarden migrate`, --jobs no-op jobs enqueued by the checkout's own
driver (bench/peers/apps/jobwarden_app.py), the statistics reset, one `jobwarden worker`
(or `--workers N`) started and timed until every job completed.

- server CPU: user + system time of every process of the cluster (the postmaster's
  children that are alive, plus what it reaped: /proc's cutime and cstime), the poller's
  own backend left out; it includes the WAL writer and checkpointer, which a job's writes
  also cost;
- worker CPU: the worker processes' user + system time;
- statements: pg_stat_statements' calls and execution time, top-level (sent by the
  worker) and nested (run inside a function or trigger), grouped by what they do.

No table of Jobwarden's is ever ANALYZEd (as in every benchmark here). Figures, not a
pass/fail test; CPU time is far less sensitive to other work on the machine than
throughput, but not immune to it (shared caches).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import defaultdict

import psycopg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from tests.pgcluster import PrivateCluster  # noqa: E402

SETTINGS = {
    "autovacuum": "off",
    "fsync": "on",
    "synchronous_commit": "on",
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "all",
    "pg_stat_statements.max": "5000",
    "max_connections": "100",
}
#: The poller's statements carry this comment: left out of the statement table.
MARK = "/* bench_cost */"
TICK = os.sysconf("SC_CLK_TCK")

#: What a statement does, by the first pattern its text matches (order matters: the
#: finish statement also names job_executions, a rollup trigger's new_rows).
CATEGORIES = [
    ("claim", r"^-- jobwarden: claim_"),
    ("finish: outcome, history row, flows' release", r"^-- jobwarden: finish_executions"),
    ("timings rollup (trigger)", r"job_timings|FROM old_rows WHERE finished_at"),
    ("count rollups (trigger)", r"job_count_deltas|job_minute_counts|new_rows|old_rows"),
    ("worker heartbeat", r"^-- jobwarden: worker_heartbeat"),
    ("duties (expiry, retention, partitions, repairs)",
     r"^-- jobwarden: (expire|retention|ensure_|drop_|flow_|batch|job_types_adopt|limits_"
     r"|schedules|rollup)"),
    ("transaction", r"^(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE|SET |SHOW |SELECT set_config)"),
    ("listen/notify", r"LISTEN|NOTIFY|pg_notify"),
]


def category(query: str) -> str:
    for name, pattern in CATEGORIES:
        if re.search(pattern, query, re.I | re.S):
            return name
    return "other"


def ticks(pid: int, children: bool = False) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[11:15] are utime, stime, cutime, cstime (stat(5), counted from field 3).
    own = int(fields[11]) + int(fields[12])
    return own + (int(fields[13]) + int(fields[14]) if children else 0)


def cluster_ticks(postmaster: int, skip: set[int]) -> int:
    """CPU ticks of the whole cluster: the postmaster with what it reaped, and every live
    child but `skip` (the poller's backend)."""
    total = ticks(postmaster, children=True)
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in skip:
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == postmaster:
                total += ticks(int(entry))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile: reaped, so counted in the postmaster's cutime
    return total


def env_for(checkout: str, url: str) -> dict[str, str]:
    env = dict(os.environ, DATABASE_URL=url, PYTHONPATH=checkout, PYTHONDONTWRITEBYTECODE="")
    env.pop("PYTHONHOME", None)
    return env


def perf_start(postmaster: int, mine: int, tag: str) -> subprocess.Popen:
    """`perf record` of the cluster's processes (but the poller's backend) from now until
    it is interrupted: where the server's CPU goes, by C function."""
    pids = _cluster_pids(postmaster, mine)
    proc = subprocess.Popen(["perf", "record", "-q", "-F", "1999", "-g", "-o",
                             f"/tmp/bench_cost_{tag}.perf", "-p", ",".join(pids)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)  # perf attaches before the window's first statements
    return proc


def _cluster_pids(postmaster: int, mine: int) -> list[str]:
    return [str(postmaster)] + [e for e in os.listdir("/proc") if e.isdigit()
                                and int(e) != mine and _parent(int(e)) == postmaster]


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


#: Where a server's sample falls, by the first of these functions on its stack (from the
#: leaf up): what a job's server CPU is spent on.
PERF_BUCKETS = [
    ("WAL insert", ("XLogInsert", "XLogInsertRecord")),
    ("commit (WAL flush, clog)", ("CommitTransaction", "RecordTransactionCommit")),
    ("index entries", ("ExecInsertIndexTuples", "btinsert", "index_insert")),
    ("trigger: timings rollup", ("jobwarden_timings_record",)),
    ("trigger functions", ("plpgsql_exec_trigger", "ExecCallTriggerFunc")),
    ("after-trigger queue, transition tables", ("AfterTriggerSaveEvent", "AfterTriggerEndQuery",
                                                "tuplestore_puttupleslot")),
    ("heap update/insert", ("heap_update", "heap_insert", "heap_multi_insert")),
    ("plan", ("pg_plan_query", "planner", "standard_planner")),
    ("parse/analyze", ("parse_analyze_fixedparams", "pg_analyze_and_rewrite_fixedparams",
                       "raw_parser", "parse_analyze_varparams")),
    ("executor (scans, joins, expressions)", ("ExecutorRun", "standard_ExecutorRun")),
    ("network, protocol", ("pq_getbyte", "secure_read", "secure_write", "pq_flush",
                           "ReadCommand")),
]


def perf_table(tag: str) -> list[tuple[str, float]]:
    """Share of the server's samples per bucket (a sample counts once, in the first
    bucket whose function is on its stack, read from the leaf up)."""
    out = subprocess.run(["perf", "script", "-i", f"/tmp/bench_cost_{tag}.perf", "-F",
                          "comm,ip,sym"], capture_output=True, text=True, timeout=600).stdout
    counts: dict[str, int] = defaultdict(int)
    total = 0
    for sample in out.split("\n\n"):
        lines = [ln.split()[-1] for ln in sample.strip().splitlines()[1:] if ln.split()]
        if not lines:
            continue
        total += 1
        stack = set(lines)
        for name, funcs in PERF_BUCKETS:
            if any(f in stack for f in funcs):
                counts[name] += 1
                break
        else:
            counts["other: kernel (syscalls, WAL flush), background processes, unnamed frames"] += 1
    return [(k, v / total) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])] \
        if total else []


def wait_out(conn: psycopg.Connection, since, timeout: float = 30.0) -> None:
    """Wait until no other session of this database has a transaction that began
    before `since` (a timestamp of the server's clock)."""
    deadline = time.monotonic() + timeout
    while conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = "
            f"current_database() AND pid <> pg_backend_pid() AND xact_start < %s) {MARK}",
            [since]).fetchone()[0]:
        if time.monotonic() > deadline:
            raise RuntimeError("a transaction open at the statistics' reset did not end")
        time.sleep(0.001)


#: `--payload-bytes`: each job's payload gets a `body` of random hex words of about that
#: many bytes, as an email's text or a webhook's document would be. PostgreSQL's
#: compression finds no repeats in it to shorten, so above 2 KB it is kept as it is in
#: the TOAST table. A trigger of the bench's writes it at the enqueue, whatever the
#: checkout's driver sends; it is dropped before the window opens.
PAD = """
CREATE FUNCTION bench_pad() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.payload := NEW.payload || jsonb_build_object('body', (
        SELECT string_agg(md5(random()::text), ' ') FROM generate_series(1, {words})));
    RETURN NEW;
END $$;
CREATE TRIGGER a_bench_pad BEFORE INSERT ON background_jobs
    FOR EACH ROW EXECUTE FUNCTION bench_pad();
"""
UNPAD = "DROP TRIGGER a_bench_pad ON background_jobs; DROP FUNCTION bench_pad()"


def one_run(cluster: PrivateCluster, arm: tuple[str, str, str, int], jobs: int, tag: str,
            perf: bool = False, profile: bool = False, payload_bytes: int = 0) -> dict:
    label, checkout, after_migrate, processes = arm
    name = f"cost_{tag}"
    with psycopg.connect(cluster.url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name}")
    url = cluster.url.rsplit("/", 1)[0] + "/" + name
    env = env_for(checkout, url)
    bin_dir = os.path.dirname(sys.executable)
    subprocess.run([os.path.join(bin_dir, "jobwarden"), "migrate"], env=env, cwd=checkout,
                   check=True, capture_output=True, timeout=300)
    if after_migrate or payload_bytes:
        with psycopg.connect(url, autocommit=True) as conn:
            if after_migrate:
                conn.execute(after_migrate)
            if payload_bytes:
                conn.execute(PAD.format(words=max(1, payload_bytes // 33)))  # 32 hex + a space
    subprocess.run([sys.executable, "-m", "bench.peers.apps.jobwarden_app", "enqueue",
                    "--jobs", str(jobs), "--kind", "noop"], env=env, cwd=checkout,
                   check=True, capture_output=True, timeout=600)
    postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])
    with psycopg.connect(url, autocommit=True) as conn:
        if payload_bytes:
            conn.execute(UNPAD)
        # What a payload takes on disk (compressed, in the row or the TOAST table).
        stored = conn.execute("SELECT avg(pg_column_size(payload))::int "
                              "FROM background_jobs").fetchone()[0]
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        conn.execute("CHECKPOINT")
        mine = conn.execute(f"SELECT pg_backend_pid() {MARK}").fetchone()[0]
        count = f"SELECT count(*) FROM background_jobs WHERE status = 'completed' {MARK}"
        log = open(f"/tmp/bench_cost_{tag}.log", "w")
        workers = [subprocess.Popen(
            [os.path.join(bin_dir, "jobwarden"), "--log-level", "WARNING", "worker",
             "--app", "bench.peers.apps.jobwarden_app"],
            env=env, cwd=checkout, stdout=log, stderr=subprocess.STDOUT)
            for _ in range(processes)]
        started = time.monotonic()

        def done() -> int:
            for w in workers:
                if w.poll() is not None:
                    raise RuntimeError(f"a worker exited ({w.returncode}): "
                                       f"see /tmp/bench_cost_{tag}.log")
            if time.monotonic() - started > 600:
                raise RuntimeError("the drain took over 600 s")
            return conn.execute(count).fetchone()[0]

        def finishers() -> int:
            return conn.execute(
                "SELECT count(DISTINCT worker_id) FROM background_jobs "
                f"WHERE status = 'completed' {MARK}").fetchone()[0]

        recorder = spy = None
        try:
            # The window opens once the worker has started and finished its first
            # jobs (each worker, when there are several): its start (imports,
            # registration) is not a job's cost.
            while True:
                finished = done()
                if finished >= min(jobs // 20, 2_000) and (
                        processes == 1 or finishers() == processes):
                    break
                if finished >= jobs:
                    raise RuntimeError(
                        f"every job was done before all {processes} workers finished one: "
                        "run it with more --jobs")
                time.sleep(0.005)
            reset_at = conn.execute(
                f"SELECT pg_stat_statements_reset(), clock_timestamp() {MARK}").fetchone()[1]
            opened = time.monotonic()
            server0 = cluster_ticks(postmaster, {mine})
            worker0 = sum(ticks(w.pid) for w in workers)
            # Counted after the reset, and after every transaction open at the reset has
            # ended: a finish's statistics are recorded before its commit, so one that
            # ended its statement before the reset and committed after `first` would be
            # a job of the window with no statement. So the window's jobs are never more
            # than the statements it recorded finished.
            wait_out(conn, reset_at)
            first = done()
            recorder = perf_start(postmaster, mine, tag) if perf else None
            spy = subprocess.Popen(
                [shutil.which("py-spy") or os.path.join(bin_dir, "py-spy"), "record",
                 "--nonblocking", "-r", "400", "-f", "raw", "-o",
                 f"/tmp/bench_cost_{tag}.spy", "-p", str(workers[0].pid)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) if profile else None
            while done() < jobs:
                time.sleep(0.05)
            seconds = time.monotonic() - opened
            server = cluster_ticks(postmaster, {mine}) - server0
            worker_ticks = sum(ticks(w.pid) for w in workers) - worker0
        finally:
            for proc in (recorder, spy):
                if proc is not None:
                    proc.send_signal(signal.SIGINT)
                    proc.wait(60)
            for w in workers:
                w.terminate()
            for w in workers:
                w.wait(30)
            log.close()
        jobs -= first
        if jobs <= 0:
            raise RuntimeError(f"the drain ended before its window opened ({first} jobs "
                               "done by then): run it with more --jobs")
        finished_by = finishers()  # each of the workers, as the window waited for
        rows = conn.execute(
            "SELECT query, toplevel, calls, total_exec_time, total_plan_time, rows "
            "FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database "
            "WHERE datname = current_database()) AND query NOT LIKE %s",
            (f"%{MARK}%",)).fetchall()
    with psycopg.connect(cluster.url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {name}")
    statements = [{"query": " ".join(q.split()), "toplevel": top, "calls": calls,
                   "ms": exec_ms + (plan_ms or 0), "rows": n, "category": category(q)}
                  for q, top, calls, exec_ms, plan_ms, n in rows]
    return {
        "checkout": label, "processes": processes, "finishers": finished_by,
        "payload_bytes": payload_bytes, "payload_stored_bytes": stored,
        "jobs": jobs, "seconds": round(seconds, 3),
        "jobs_per_s": round(jobs / seconds, 1),
        "server_us_per_job": round(server / TICK / jobs * 1e6, 2),
        "worker_us_per_job": round(worker_ticks / TICK / jobs * 1e6, 2),
        "statements_per_job": round(sum(s["calls"] for s in statements if s["toplevel"])
                                    / jobs, 3),
        "nested_per_job": round(sum(s["calls"] for s in statements if not s["toplevel"])
                                / jobs, 3),
        "exec_us_per_job": round(sum(s["ms"] for s in statements if s["toplevel"])
                                 * 1000 / jobs, 2),
        "statements": statements,
        "perf": perf_table(tag) if perf else [],
    }


def by_category(run: dict) -> dict[str, dict[str, float]]:
    """Top-level statements' time and calls per job by category, and nested statements'
    apart (their time is already inside the top-level statement that ran them)."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: {"us": 0.0, "calls": 0.0})
    for s in run["statements"]:
        what = category(s["query"])
        key = what if s["toplevel"] else f"  inside: {what}"
        out[key]["us"] += s["ms"] * 1000 / run["jobs"]
        out[key]["calls"] += s["calls"] / run["jobs"]
    return dict(out)


def report(runs: list[dict], top: int) -> str:
    lines = []
    checkouts = list(dict.fromkeys(r["checkout"] for r in runs))
    figures = ("jobs_per_s", "server_us_per_job", "worker_us_per_job",
               "exec_us_per_job",
               "statements_per_job", "nested_per_job")
    lines.append("| figure (median of rounds) | " + " | ".join(checkouts) + " |")
    lines.append("|---|" + "---|" * len(checkouts))
    for fig in figures:
        values = [[r[fig] for r in runs if r["checkout"] == c and fig in r]
                  for c in checkouts]
        if not all(values):
            continue
        cells = [statistics.median(v) for v in values]
        lines.append(f"| {fig} | " + " | ".join(f"{v:,.2f}" for v in cells) + " |")
    for c in checkouts:
        last = [r for r in runs if r["checkout"] == c][-1]
        lines.append("")
        lines.append(f"{c}: µs and calls per job by what the statement does (last round)")
        lines.append("| what | µs/job | calls/job |")
        lines.append("|---|---|---|")
        for key, v in sorted(by_category(last).items(), key=lambda kv: -kv[1]["us"]):
            lines.append(f"| {key} | {v['us']:.2f} | {v['calls']:.3f} |")
        if last["perf"]:
            lines.append("")
            lines.append("| where the server's CPU goes (perf samples) | share | µs/job |")
            lines.append("|---|---|---|")
            for name, share in last["perf"]:
                lines.append(f"| {name} | {share:.1%} | "
                             f"{share * last['server_us_per_job']:.2f} |")
        lines.append("")
        lines.append(f"top {top} statements (µs/job, calls/job, level, text)")
        for s in sorted(last["statements"], key=lambda s: -s["ms"])[:top]:
            lines.append(f"  {s['ms'] * 1000 / last['jobs']:7.2f} "
                         f"{s['calls'] / last['jobs']:7.3f} "
                         f"{'top' if s['toplevel'] else 'nest'} {s['query'][:150]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--checkout", action="append",
                    help="a checkout of Jobwarden to measure (repeat to compare; "
                         "default this one)")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL:SQL",
                    help="another arm: the first checkout with SQL run after its migrate "
                         "(an ablation: e.g. 'no-timings:ALTER TABLE job_executions "
                         "DISABLE TRIGGER job_executions_timings_insert')")
    ap.add_argument("--top", type=int, default=15, help="statements listed per checkout")
    ap.add_argument("--json", help="write every figure here too")
    ap.add_argument("--profile-worker", action="store_true",
                    help="also sample the (first) worker with py-spy (collapsed stacks in "
                         "/tmp/bench_cost_ROUND_ARM.spy, for a flame graph or a diff)")
    ap.add_argument("--perf", action="store_true",
                    help="also sample the server with `perf record` and say where its CPU "
                         "goes (needs perf and the right to attach to the server)")
    ap.add_argument("--workers", default="1", metavar="N[,N...]",
                    help="worker processes draining together (a list: each arm with each "
                         "count; worker CPU is theirs summed)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a server setting of the private cluster (repeat)")
    ap.add_argument("--payload-bytes", type=int, default=0, metavar="N",
                    help="pad each job's payload with about N bytes of random hex words "
                         "(0: the no-op job's own, a few bytes)")
    ap.add_argument("--keep-log", action="store_true",
                    help="print the private cluster's server log before it is removed")
    args = ap.parse_args(argv)
    base = [(os.path.abspath(c), os.path.abspath(c), "")
            for c in (args.checkout or [ROOT])]
    for item in args.variant:
        label, sep, sql = item.partition(":")
        if not sep or not sql.strip():
            ap.error(f"--variant wants LABEL:SQL, not {item!r}")
        base.append((label, base[0][1], sql))
    try:
        counts = [int(n) for n in args.workers.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1 or max(counts) > 8:
        ap.error(f"--workers wants counts from 1 to 8, comma-separated, not {args.workers!r}")
    if not 0 <= args.payload_bytes <= 1_000_000:
        ap.error(f"--payload-bytes wants 0 to 1000000, not {args.payload_bytes}")
    # Each arm with each number of worker processes; a count other than 1 names itself.
    arms = [(label if len(counts) == 1 and n == 1 else f"{label} ×{n}", checkout, sql, n)
            for label, checkout, sql in base for n in counts]
    settings = dict(SETTINGS)
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--set wants NAME=VALUE, not {item!r}")
        settings[name] = value
    # Stopped by a signal, unwind through `finally`: the cluster is removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cluster = PrivateCluster(settings=settings)
    runs: list[dict] = []
    try:
        cluster.start()
        for r in range(args.rounds):
            order = arms if r % 2 == 0 else arms[::-1]
            for i, arm in enumerate(order):
                run = one_run(cluster, arm, args.jobs, f"{r}_{i}", args.perf,
                              args.profile_worker, args.payload_bytes)
                runs.append(run)
                print(json.dumps({k: v for k, v in run.items() if k != "statements"},
                                 ensure_ascii=False),
                      flush=True)
    finally:
        try:
            if args.keep_log:
                log = cluster.dir / "server.log"
                print(log.read_text() if log.exists() else "(no server log)")
        finally:
            cluster.destroy()
    print()
    print(report(runs, args.top))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
