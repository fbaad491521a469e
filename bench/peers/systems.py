"""The systems measured, and how each one is installed, fed and run.

Every system is driven the same way: its schema is installed with its own tool, jobs are
enqueued by its driver (`apps/NAME_app.py`, its own bulk API, in its own interpreter),
its worker is its own CLI, and progress is read from its own tables on the database clock.
"""

from __future__ import annotations

import compileall
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.dirname(sys.executable)
#: oban-py needs Python >= 3.12; the harness gives it a virtualenv of its own.
OBAN_VENV = os.environ.get("BENCH_OBAN_VENV", os.path.join(ROOT, ".venv-oban"))
PY312 = os.environ.get("BENCH_PYTHON312", "/root/.pyenv/versions/3.12.1/bin/python3.12")
#: The versions measured (also pinned in pyproject.toml's `bench` extra).
PINS = {"pgqueuer": "1.6.0", "chancy": "0.26.0", "procrastinate": "3.10.0", "oban": "0.7.0",
        "awa-pg": "0.6.9"}
#: awa-pg's jobs in flight per worker process in the drains: its throughput follows it, and
#: 1,000 was its best when first measured here (docs/benchmarks.md); settable to try others.
AWA_MAX_WORKERS = int(os.environ.get("BENCH_AWA_MAX_WORKERS", "1000"))
SQL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sql")


class SystemFailed(Exception):
    """A system could not be installed or run: reported in its cell, the run goes on."""


class NotMeasured(SystemFailed):
    """A scenario that does not apply to the system (it lacks the feature measured): its
    cell gives the reason, "no rate limit in X: why", up to the colon."""


@dataclass
class System:
    name: str
    package: str | None          # the PyPI distribution (None: this checkout)
    python: str                  # interpreter that runs the driver (and the worker's code)
    app: str                     # module under bench.peers.apps
    finished_sql: str            # epoch seconds (database clock) of each successful finish
    settings: str                # how its worker is run, for the report
    drain_concurrency: int | None = None   # None: the worker's own default
    #: Why the ratelimit scenario does not run it (None: it limits a type's rate across
    #: worker processes through its database, and is measured).
    no_rate_limit: str | None = None
    version: str = ""
    extra_env: dict[str, str] = field(default_factory=dict)
    #: Whether install and install_limited make the same schema whatever the scenario
    #: asks: then each scenario's database is a copy of one installed database
    #: (scenarios.run), not installed anew.
    same_install: bool = False
    #: For a system whose records of finished jobs may be pruned while a scenario runs:
    #: rows of (key, finishes, epoch), one a group of finishes written together, which the
    #: harness keeps as it sees them (scenarios.Finishes). None: finished_sql is read.
    finish_groups_sql: str | None = None

    # -- commands -------------------------------------------------------------------------
    def bin(self, name: str) -> str:
        return os.path.join(os.path.dirname(self.python), name)

    def env(self, url: str, **extra: str) -> dict[str, str]:
        env = dict(os.environ, DATABASE_URL=url, PYTHONPATH=ROOT, **self.extra_env, **extra)
        env.pop("PYTHONHOME", None)
        return env

    def run(self, argv: list[str], url: str, timeout: float) -> str:
        """Run a short command of this system; its stdout, or SystemFailed with the reason."""
        try:
            done = subprocess.run(argv, env=self.env(url), cwd=ROOT, capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            name = os.path.basename(argv[0])
            raise SystemFailed(f"{name} timed out after {timeout:.0f}s") from None
        except OSError as exc:
            raise SystemFailed(str(exc)) from None
        if done.returncode != 0:
            lines = (done.stderr or done.stdout).strip().splitlines()
            raise SystemFailed(" | ".join(lines[-3:]) or f"exit {done.returncode}")
        return done.stdout

    def driver(self, url: str, *args: str, timeout: float = 600) -> str:
        return self.run([self.python, "-m", f"bench.peers.apps.{self.app}", *args], url, timeout)

    def install(self, url: str, concurrency: int | None) -> None:
        raise NotImplementedError

    def enqueue(self, url: str, jobs: int, kind: str = "noop", timeout: float = 600) -> float:
        """Bulk-enqueue `jobs` jobs of `kind`; the seconds it took (inside the driver)."""
        out = self.driver(url, "enqueue", "--jobs", str(jobs), "--kind", kind, timeout=timeout)
        return float(json.loads(out.strip().splitlines()[-1])["seconds"])

    def worker_argv(self, url: str, concurrency: int | None) -> list[str]:
        raise NotImplementedError

    def install_limited(self, url: str, concurrency: int, rate: float) -> None:
        """The schema, and the `limited` kind at `rate` jobs/s across every process (a
        type declared in code needs nothing more: its app reads BENCH_RATE)."""
        self.install(url, concurrency)

    def limit_burst(self, rate: float) -> float:
        """Starts allowed above the rate in one second: a token bucket's capacity (Jobwarden's
        default, one second's worth)."""
        return max(1.0, rate)

    def io_worker_argv(self, url: str, concurrency: int) -> list[str]:
        """The worker of the I/O-bound scenario: async handlers, `concurrency` in flight."""
        return self.worker_argv(url, concurrency)

    def limited_worker_argv(self, url: str, concurrency: int) -> list[str]:
        """A worker of the ratelimit scenario (which handles the `limited` kind)."""
        return self.worker_argv(url, concurrency)


class Jobwarden(System):
    def install(self, url, concurrency):
        self.run([self.bin("jobwarden"), "migrate"], url, 120)

    def worker_argv(self, url, concurrency):
        argv = [self.bin("jobwarden"), "--log-level", "WARNING", "worker",
                "--app", "bench.peers.apps.jobwarden_app"]
        return argv + (["--concurrency", str(concurrency)] if concurrency else [])

    def io_worker_argv(self, url, concurrency):
        # The async handler's queue in a lane of its own (bench/peers/apps/jobwarden_app.py).
        return self.worker_argv(url, None) + ["--queues", f"io={concurrency}"]

    def limited_worker_argv(self, url, concurrency):
        # The limited type only (bench/peers/apps/jobwarden_limited_app.py says why).
        return [self.bin("jobwarden"), "--log-level", "WARNING", "worker",
                "--app", "bench.peers.apps.jobwarden_limited_app",
                "--concurrency", str(concurrency)]


class PgQueuer(System):
    def install(self, url, concurrency):
        self.run([self.bin("pgq"), "--pg-dsn", url, "install"], url, 120)

    def worker_argv(self, url, concurrency):
        # Not --log-level: pgqueuer 1.6's CLI fails on it (a str where it wants a level).
        argv = [self.bin("pgq"), "--pg-dsn", url, "run", "bench.peers.apps.pgqueuer_app:main"]
        if not concurrency:
            return argv
        # pgqueuer requires the concurrency cap to be at least twice its batch size.
        return argv + ["--max-concurrent-tasks", str(concurrency),
                       "--batch-size", str(max(1, min(10, concurrency // 2)))]


class ChancySystem(System):
    def install(self, url, concurrency):
        # The queue's concurrency lives in the database: declared here, per scenario.
        args = ["install"] + (["--concurrency", str(concurrency)] if concurrency else [])
        self.driver(url, *args, timeout=120)

    def install_limited(self, url, concurrency, rate):
        self.driver(url, "install", "--concurrency", str(concurrency), "--rate", str(rate),
                    timeout=120)

    def limit_burst(self, rate):
        # A fixed window: at most `rate` in each whole second of the workers' clock, so a
        # second that straddles two windows (as the harness's, counted from the first
        # start, do) may hold up to 2 × rate: the same ceiling as a bucket of one second.
        return rate

    def worker_argv(self, url, concurrency):
        return [self.bin("chancy"), "--app", "bench.peers.apps.chancy_app.app",
                "worker", "start"]


class Procrastinate(System):
    def install(self, url, concurrency):
        self.run([self.bin("procrastinate"), "--app", "bench.peers.apps.procrastinate_app.app",
                  "schema", "--apply"], url, 120)

    def worker_argv(self, url, concurrency):
        return [self.bin("procrastinate"), "--log-level", "warning",
                "--app", "bench.peers.apps.procrastinate_app.app", "worker",
                "--concurrency", str(concurrency or self.drain_concurrency)]


class Oban(System):
    def install(self, url, concurrency):
        self.run([self.bin("oban"), "install", "--dsn", url], url, 120)

    def io_worker_argv(self, url, concurrency):
        raise SystemFailed("its app has no async I/O handler (not driven in async mode)")

    def worker_argv(self, url, concurrency):
        # --cron-modules names our module, so the CLI does not scan the checkout for workers.
        return [self.bin("oban"), "start", "--dsn", url, "--log-level", "warning",
                "--queues", f"default:{concurrency or self.drain_concurrency}",
                "--cron-modules", "bench.peers.apps.oban_app"]


class Awa(System):
    """awa-pg: no worker CLI, so its driver's `worker` subcommand is the worker process
    (bench/peers/apps/awa_app.py), and its install is the driver's too: `migrate`, then
    the first worker start that puts a new database on its queue-storage engine."""

    def install(self, url, concurrency):
        self.driver(url, "install", timeout=120)

    def worker_argv(self, url, concurrency):
        return [self.python, "-m", f"bench.peers.apps.{self.app}", "worker",
                "--concurrency", str(concurrency or self.drain_concurrency)]


def _sql(name: str) -> str:
    with open(os.path.join(SQL_DIR, name)) as f:
        return "\n".join(line for line in f.read().splitlines()
                         if not line.lstrip().startswith("--"))


def all_systems() -> list[System]:
    """Every system, Jobwarden first; whether each can run is checked by `prepare`."""
    return [
        Jobwarden(
            "jobwarden", None, sys.executable, "jobwarden_app",
            "SELECT extract(epoch FROM completed_at) FROM background_jobs "
            "WHERE status = 'completed'",
            "`jobwarden worker` defaults (threads, LISTEN/NOTIFY + polling)",
            same_install=True),
        PgQueuer(
            "pgqueuer", "pgqueuer", sys.executable, "pgqueuer_app",
            "SELECT extract(epoch FROM created) FROM pgqueuer_log "
            "WHERE status = 'successful'",
            "`pgq run` defaults (asyncpg driver, batch size 10, no concurrency cap)",
            no_rate_limit="no rate limit in pgqueuer 1.6.0: an entrypoint takes "
            "concurrency_limit (jobs in flight, held in the database), not a rate"),
        ChancySystem(
            "chancy", "chancy", sys.executable, "chancy_app",
            "SELECT extract(epoch FROM completed_at) FROM chancy_jobs "
            "WHERE state = 'succeeded'",
            "`chancy worker start`; queue on AsyncExecutor (default concurrency 100), "
            "eager polling, NOTIFY on push"),
        Procrastinate(
            "procrastinate", "procrastinate", sys.executable, "procrastinate_app",
            "SELECT extract(epoch FROM at) FROM procrastinate_events "
            "WHERE type = 'succeeded'",
            "`procrastinate worker --concurrency 10` (async tasks, LISTEN/NOTIFY)",
            drain_concurrency=10,
            no_rate_limit="no rate limit in procrastinate 3.10.0: a task's lock and "
            "queueing_lock serialise or deduplicate jobs; nothing limits a rate"),
        Oban(
            "oban", "oban", os.path.join(OBAN_VENV, "bin", "python"), "oban_app",
            "SELECT extract(epoch FROM completed_at) FROM oban_jobs "
            "WHERE state = 'completed'",
            "`oban start --queues default:10` (Python 3.12 venv, insert triggers)",
            drain_concurrency=10,
            no_rate_limit="no rate limit in oban-py 0.7.0: global limits and rate limits "
            "are Oban Pro's (queue meta for extensions)"),
        Awa(
            "awa", "awa-pg", sys.executable, "awa_app", _sql("awa_finished.sql"),
            f"`AsyncClient.start([(\"default\", {AWA_MAX_WORKERS})])` (queue-storage engine, "
            f"{AWA_MAX_WORKERS:,} in flight, async handlers)",
            drain_concurrency=AWA_MAX_WORKERS, same_install=True,
            finish_groups_sql=_sql("awa_finish_batches.sql"),
            no_rate_limit="no rate limit across processes in awa-pg 0.6.9: a queue's "
            "rate_limit is a token bucket in each worker process (its ADR-010)"),
    ]


def compile_checkout() -> None:
    """Byte-compile the checkout's packages, as pip does for an installed wheel (and did
    for every peer here). Without it, under PYTHONDONTWRITEBYTECODE=1 (set on the bench
    machines) each Jobwarden process compiled its 55 modules from source at start, about
    90 ms of a 0.3 s start that the peers never paid (bench/README.md, "Bytecode")."""
    for package in ("worker", os.path.join("bench", "peers", "apps")):
        compileall.compile_dir(os.path.join(ROOT, package), quiet=1)


def prepare(system: System) -> None:
    """Make sure the system can run here (oban gets its virtualenv made); its version is
    recorded, or SystemFailed says why it cannot run."""
    if system.package is None:
        system.version = "this checkout"
        compile_checkout()
        return
    if system.name == "oban" and not os.path.exists(system.python):
        if not os.path.exists(PY312):
            raise SystemFailed(f"needs Python 3.12; none at {PY312} (set BENCH_PYTHON312)")
        for argv in ([PY312, "-m", "venv", OBAN_VENV],
                     [system.bin("pip"), "install", "--quiet", f"oban=={PINS['oban']}"]):
            system.run(argv, "", 600)
    if not os.path.exists(system.python):
        raise SystemFailed(f"no interpreter at {system.python}")
    try:
        system.version = system.run(
            [system.python, "-c", "import importlib.metadata as m, sys; "
             "print(m.version(sys.argv[1]))", system.package], "", 60).strip()
    except SystemFailed as exc:
        raise SystemFailed(f"not installed (pip install -e '.[bench]'): {exc}") from None
