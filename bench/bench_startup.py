"""A worker's start-up, stage by stage: from its spawn to its first finished job.

    .venv/bin/python bench/bench_startup.py --rounds 4
    .venv/bin/python bench/bench_startup.py --rounds 4 --checkout /path/to/other/checkout

The drains of bench/peers count from the worker's spawn (scenarios.drain), so whatever a
worker does before its first claim is in their figures. Here each round spawns the
benchmark's worker (bench/peers/systems.py's argv: the io50ms scenario's, `--queues io=500`
on `io` jobs, by default) on a fresh database holding `--jobs` jobs, and reads when each
stage was reached, all on the one clock of this machine (the server's clock_timestamp and
the worker's time.time() are the same clock when both run here):

- up: the interpreter runs its first line (a `-c` wrapper around the entry point the
  `jobwarden` script runs: jobwarden/command.py, or the CLI's main in a checkout that
  has none);
- imported: the app's import begins (its module file opened): the runtime's modules
  are loaded and the command line read (an audit hook sees it, wherever the entry point
  loads them);
- connected: the worker's first connection began (pg_stat_activity.backend_start):
  the app is loaded and the WorkerProcess made;
- registered: its job_workers row was written (started_at);
- claimed: the first job was claimed (its started_at);
- finished: the first job was finished (its completed_at);
- drained: the last job was finished; and the drain's jobs/s counted from the spawn.

And the worker's cycle collector over its whole life: how many passes it made (young,
older, full) and the milliseconds they took, written by the wrapper when the worker
exits (worker/engine/heap.py says why they matter).

Each stage is in milliseconds from the spawn; then three stretches on their own (the
imports, imported to claimed, claimed to finished), whose medians say more than the
stages' on a busy machine. With `--checkout`, rounds take turns between this checkout
and each other one (its worker run by its own .venv; the schema must be the same, every
round's database being a copy of one this checkout migrated), A, B, A, B, ...; the
medians per checkout are printed last. One JSON line per round.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from urllib.parse import urlsplit

import psycopg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.peers.dbutil import fresh_database  # noqa: E402

STAGES = ("up", "imported", "connected", "registered", "claimed", "finished", "drained")

# The worker's command, with two stamps written to a file: the first line run, and the
# CLI imported. The rest is what `jobwarden ...` runs.
WRAPPER = """\
import atexit, gc, sys, time
up = time.time()
passes, spent, began = [0, 0, 0], [0.0], [0.0]


def counted(phase, info):
    if phase == "start":
        began[0] = time.perf_counter()
    else:
        passes[info["generation"]] += 1
        spent[0] += time.perf_counter() - began[0]


def written():
    with open({stamps!r} + ".gc", "w") as f:
        f.write(" ".join(map(str, [*passes, spent[0]])))


gc.callbacks.append(counted)
atexit.register(written)
APP_FILE = {app!r}.rpartition(".")[2] + "."  # its source or its byte code opened
imported = [0.0]


def audited(event, args):
    if not imported[0] and event == "open" and APP_FILE in str(args[0]):
        imported[0] = time.time()
        with open({stamps!r}, "w") as f:
            f.write(f"{{up}} {{imported[0]}}")


sys.addaudithook(audited)
try:
    from jobwarden.command import main
except ImportError:  # a checkout from before jobwarden/command.py
    from jobwarden.worker.cli import main
sys.argv = ["jobwarden", *sys.argv[1:]]
sys.exit(main())
"""


#: The benchmark's app (bench/peers/systems.py's), whose import marks the `imported` stage.
APP = "bench.peers.apps.jobwarden_app"


def worker_args(kind: str) -> list[str]:
    """bench/peers/systems.py's Jobwarden worker arguments for the scenario of `kind`."""
    argv = ["--log-level", "WARNING", "worker", "--app", APP]
    return argv + (["--queues", "io=500"] if kind == "io" else [])


def python_of(checkout: str) -> str:
    """The interpreter that runs a checkout's worker: this one for this checkout."""
    if checkout == ROOT:
        return sys.executable
    return os.path.join(checkout, ".venv", "bin", "python")


def compile_checkout(checkout: str) -> None:
    """Byte-compile the checkout as its benchmark harness does (bench/peers/systems.py,
    compile_checkout: without it, under PYTHONDONTWRITEBYTECODE=1, every start compiles
    Jobwarden's modules from source)."""
    subprocess.run([python_of(checkout), "-c",
                    "from bench.peers.systems import compile_checkout; compile_checkout()"],
                   cwd=checkout, env=dict(os.environ, PYTHONPATH=checkout), check=True)


def one_round(checkout: str, server: str, template: str, jobs: int, kind: str,
              timeout: float) -> dict:
    python = python_of(checkout)
    env = dict(os.environ, PYTHONPATH=checkout)
    env.pop("PYTHONHOME", None)
    with fresh_database(server, "startup", template) as url:
        env["DATABASE_URL"] = url
        subprocess.run([python, "-m", "bench.peers.apps.jobwarden_app", "enqueue",
                        "--jobs", str(jobs), "--kind", kind], env=env, cwd=checkout,
                       check=True, capture_output=True)
        fd, stamps = tempfile.mkstemp(prefix="jwstartup-")
        os.close(fd)
        with psycopg.connect(url, autocommit=True) as conn, \
                tempfile.TemporaryFile() as log:
            t0 = float(conn.execute("SELECT extract(epoch FROM clock_timestamp())")
                       .fetchone()[0])
            proc = subprocess.Popen(
                [python, "-c", WRAPPER.format(stamps=stamps, app=APP), *worker_args(kind)],
                env=env, cwd=checkout, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                deadline = time.monotonic() + timeout
                while conn.execute("SELECT count(*) FROM background_jobs "
                                   "WHERE status = 'completed'").fetchone()[0] < jobs:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        log.seek(0)
                        raise SystemExit(f"worker ended or timed out: {log.read()[-2000:]}")
                    time.sleep(0.05)
                connected = conn.execute(
                    "SELECT extract(epoch FROM min(backend_start)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                    "AND backend_type = 'client backend'").fetchone()[0]
                registered = conn.execute(
                    "SELECT extract(epoch FROM min(started_at)) FROM job_workers"
                ).fetchone()[0]
                claimed, finished, drained = conn.execute(
                    "SELECT extract(epoch FROM min(started_at)), "
                    "extract(epoch FROM min(completed_at)), "
                    "extract(epoch FROM max(completed_at)) FROM background_jobs").fetchone()
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(30)
        with open(stamps) as f:
            up, imported = (float(x) for x in f.read().split())
        os.unlink(stamps)
        with open(stamps + ".gc") as f:
            *passes, gc_seconds = (float(x) for x in f.read().split())
        os.unlink(stamps + ".gc")
    at = dict(zip(STAGES, (up, imported, float(connected), float(registered), float(claimed),
                           float(finished), float(drained)), strict=True))
    out = {stage: round((t - t0) * 1000, 1) for stage, t in at.items()}
    # The stretches, each less noisy than the sums: the imports (the most of a start,
    # and the most sensitive to what else the machine runs), then the rest.
    out["import_ms"] = round((at["imported"] - at["up"]) * 1000, 1)
    out["imported_to_claimed_ms"] = round((at["claimed"] - at["imported"]) * 1000, 1)
    out["claimed_to_finished_ms"] = round((at["finished"] - at["claimed"]) * 1000, 1)
    out["jobs_per_s"] = round(jobs / (at["drained"] - t0), 1)
    out["gc_passes"] = "/".join(str(int(n)) for n in passes)  # young/older/full
    out["gc_ms"] = round(gc_seconds * 1000, 1)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=30_000)
    ap.add_argument("--kind", choices=("io", "noop"), default="io")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--checkout", action="append", default=[],
                    help="another checkout to take turns with (its .venv runs its worker)")
    ap.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args()
    server = os.environ["DATABASE_URL"]
    checkouts = [ROOT, *[os.path.abspath(c) for c in args.checkout]]
    results: dict[str, list[dict]] = {c: [] for c in checkouts}
    for checkout in checkouts:
        compile_checkout(checkout)
    # Every round's database is a copy of one migrated here (migrating takes seconds).
    with fresh_database(server, "startup_template") as template_url:
        subprocess.run([sys.executable, "-m", "jobwarden.worker.cli", "migrate"],
                       env=dict(os.environ, DATABASE_URL=template_url, PYTHONPATH=ROOT),
                       cwd=ROOT, check=True, capture_output=True)
        template = urlsplit(template_url).path.lstrip("/")
        for n in range(args.rounds):
            for checkout in checkouts:
                out = one_round(checkout, server, template, args.jobs, args.kind,
                                args.timeout)
                results[checkout].append(out)
                print(json.dumps({"round": n, "checkout": checkout, **out}), flush=True)
    for checkout, rows in results.items():
        medians = {k: round(statistics.median(r[k] for r in rows), 1) for k in rows[0]
                   if k != "gc_passes"}
        print(json.dumps({"checkout": checkout, "median_of": len(rows), **medians}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
