"""The scenarios. Each one runs one system in a fresh database of its own and returns a
dict of raw figures; a system that fails raises SystemFailed with the reason."""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass

import psycopg

from bench import rate_windows
from bench.peers import ceiling, contention, procs, walstats
from bench.peers.apps.common import IO_SECONDS
from bench.peers.dbutil import analyze_peer, fresh_database, with_db
from bench.peers.systems import ROOT, NotMeasured, System, SystemFailed


@dataclass
class Sizes:
    jobs: int = 50_000          # bulk enqueue and the no-op drains
    sleep_jobs: int = 5_000     # the 10 ms jobs
    sleep_concurrency: int = 16
    latency_jobs: int = 200     # enqueued one per transaction...
    latency_rate: float = 20.0  # ...at this many per second
    backlog: int = 100_000
    io_jobs: int = 30_000       # the 50 ms async jobs...
    io_concurrency: int = 500   # ...this many in flight in one process
    limit_rate: float = 200.0   # the rate-limited type: jobs/s across every process...
    limit_seconds: float = 20.0  # ...a backlog of this many seconds' work at the limit...
    limit_workers: int = 3      # ...drained by this many worker processes...
    limit_concurrency: int = 8  # ...with this many jobs in flight each...
    limit_work_ms: float = 5.0  # ...of this long each
    # Safety timeouts only: at these sizes every system measured finishes well inside them,
    # so a drain runs to its end; one that does not is marked as timed out in its cell.
    drain_timeout: float = 600.0    # per no-op / sleep drain
    backlog_timeout: float = 900.0
    poll: float = 0.25


SCENARIOS = ("enqueue", "drain1", "drain2", "drain1_busy", "drain2_busy", "sleep10ms",
             "io50ms", "latency", "backlog", "ratelimit", "ceiling", "wal")
#: The no-op drains again with one core spinning (bench/peers/contention.py): worker
#: processes of each.
BUSY = {"drain1_busy": 1, "drain2_busy": 2}
#: What a run without --only measures: `wal` checkpoints the server and decodes its WAL,
#: so it runs when asked for (`--only wal`).
DEFAULT_SCENARIOS = tuple(s for s in SCENARIOS if s != "wal")


def _db_now(url: str) -> float:
    with psycopg.connect(url, autocommit=True) as conn:
        return float(conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()[0])


class Finishes:
    """A system's successful finishes, read from its own tables at each poll: the count
    (is the drain done?) and, at the end, the epoch of each.

    A system whose finished records may be pruned before the scenario ends
    (System.finish_groups_sql: awa-pg's ring) is read by groups, each kept as last seen:
    a group gone from the tables still counts, with the finish times it had."""

    def __init__(self, system: System):
        self.system = system
        self.groups: dict[str, tuple[int, float]] = {}  # key -> (finishes, epoch)

    def _poll(self, conn) -> None:
        for key, n, epoch in conn.execute(self.system.finish_groups_sql).fetchall():
            self.groups[key] = (int(n), float(epoch))

    def count(self, conn) -> int:
        if self.system.finish_groups_sql is None:
            return conn.execute(f"SELECT count(*) FROM ({self.system.finished_sql}) AS f"
                                ).fetchone()[0]
        self._poll(conn)
        return sum(n for n, _ in self.groups.values())

    def times(self, conn) -> list[float]:
        if self.system.finish_groups_sql is None:
            return [float(r[0]) for r in conn.execute(self.system.finished_sql).fetchall()]
        self._poll(conn)
        return [epoch for n, epoch in self.groups.values() for _ in range(n)]


def drain(system: System, url: str, jobs: int, workers: int, concurrency: int | None,
          timeout: float, poll: float, tag: str, *,
          launch: Callable[[int], tuple[list[str], dict[str, str]]] | None = None,
          observe: Callable[[list], AbstractContextManager] | None = None) -> dict:
    """Start `workers` worker processes on `jobs` enqueued jobs; wait (at most `timeout`)
    until all have finished. Times are the database's: worker start to last finish.

    `launch(i)` gives worker i's command line and environment (default: the system's
    worker command on `url`); `observe(processes)` is a context entered once they have
    started and left when the drain is seen complete, before they are stopped."""
    fd, log = tempfile.mkstemp(prefix=f"jwbench-{tag}-{system.name}-", suffix=".log")
    os.close(fd)
    launch = launch or (lambda i: (system.worker_argv(url, concurrency), system.env(url)))
    t0 = _db_now(url)
    started = [procs.spawn(*launch(i), ROOT, log) for i in range(workers)]
    timed_out = False
    try:
        with procs.RssWatch(started) as rss, psycopg.connect(url, autocommit=True) as conn, \
                (observe or (lambda _: nullcontext()))(started):
            deadline = time.monotonic() + timeout
            finishes = Finishes(system)
            while finishes.count(conn) < jobs:
                dead = [p for p in started if p.poll() is not None]
                if dead:
                    raise SystemFailed(f"worker exited ({dead[0].returncode}): "
                                       f"{procs.tail(log)}")
                if time.monotonic() > deadline:
                    timed_out = True
                    break
                time.sleep(poll)
            times = finishes.times(conn)
            now = float(conn.execute("SELECT extract(epoch FROM clock_timestamp())")
                        .fetchone()[0])
    finally:
        for p in started:
            procs.stop(p)
    done = len(times)
    end = now if timed_out else max(times)
    seconds = end - t0
    return {"jobs": jobs, "done": done, "workers": workers, "concurrency": concurrency,
            "seconds": round(seconds, 3), "jobs_per_s": round(done / seconds, 1),
            "steady_jobs_per_s": steady(times), "timed_out": timed_out,
            "timeout_s": timeout, "peak_rss_mb": rss.peak_mb(),
            "worker_cpu_us_per_job": round(rss.cpu_seconds() * 1e6 / max(done, 1), 1),
            "t0": t0, "times": times}


def steady(times: list[float]) -> float | None:
    """The steady-state rate: jobs per second between the 10% and the 90% completion, on
    the finish times the system itself wrote (the database clock), so neither the start-up
    nor the tail is in it."""
    times = sorted(times)
    lo, hi = len(times) // 10, len(times) - len(times) // 10 - 1
    if hi - lo < 1 or times[hi] <= times[lo]:
        return None
    return round((hi - lo) / (times[hi] - times[lo]), 1)


def leave_stats(system: System, url: str, peer_stats: str) -> dict:
    """After the load, before the workers start: ANALYZE the peer's tables when asked
    (`analyzed`); Jobwarden's tables are never analyzed."""
    if system.name == "jobwarden" or peer_stats == "none":
        return {"stats": "not analyzed"}
    return {"stats": "analyzed", **analyze_peer(url, system.name)}


#: The installed database each same_install system's scenario databases are copies of, by
#: (server, system): `jobwarden migrate` took 2-3 s a scenario, a copy a tenth of that.
_TEMPLATES: dict[tuple[str, str], str] = {}
#: The URLs of the scenario databases that are such copies: installed already.
_COPIES: set[str] = set()


def _template(system: System, server: str) -> str:
    """The name of `system`'s installed database on `server`, installed on first use."""
    key = (server, system.name)
    if key not in _TEMPLATES:
        name = f"jwbench_template_{system.name}_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        try:
            system.install(with_db(server, name), None)
        except BaseException:
            with psycopg.connect(server, autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            raise
        _TEMPLATES[key] = name
    return _TEMPLATES[key]


def drop_templates() -> None:
    """Drop the installed databases the scenarios' databases were copied from."""
    while _TEMPLATES:
        (server, _), name = _TEMPLATES.popitem()
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def scenario_database(system: System, server: str, tag: str) -> Iterator[str]:
    """A fresh database for one scenario of `system`: a copy of its installed database
    when its install is the same for every scenario (System.same_install), else empty."""
    if not system.same_install:
        with fresh_database(server, tag) as url:
            yield url
        return
    with fresh_database(server, tag, _template(system, server)) as url:
        _COPIES.add(url)
        try:
            yield url
        finally:
            _COPIES.discard(url)


def install(system: System, url: str, concurrency: int | None = None) -> None:
    """Install `system` in a scenario's database, unless it is a copy of an installed one."""
    if url not in _COPIES:
        system.install(url, concurrency)


def run(scenario: str, system: System, server: str, sizes: Sizes,
        peer_stats: str = "analyzed") -> dict:
    """Run one scenario for one system in a database created (and dropped) for it."""
    with scenario_database(system, server, f"{scenario}_{system.name}") as url:
        if scenario == "enqueue":
            install(system, url)
            seconds = system.enqueue(url, sizes.jobs)
            return {"jobs": sizes.jobs, "seconds": round(seconds, 3),
                    "jobs_per_s": round(sizes.jobs / seconds, 1)}
        if scenario in ("drain1", "drain2"):
            install(system, url)
            seconds = system.enqueue(url, sizes.jobs)
            stats = leave_stats(system, url, peer_stats)
            out = drain(system, url, sizes.jobs, 1 if scenario == "drain1" else 2,
                        system.drain_concurrency, sizes.drain_timeout, sizes.poll, scenario)
            out.pop("times"), out.pop("t0")
            out["enqueue_seconds"] = round(seconds, 3)
            return {**out, **stats}
        if scenario in BUSY:
            install(system, url)
            seconds = system.enqueue(url, sizes.jobs)
            stats = leave_stats(system, url, peer_stats)
            # The load starts after the enqueue and the ANALYZE, before the workers, and
            # stops once they have: the same for every system.
            with contention.cpu_load() as load:
                out = drain(system, url, sizes.jobs, BUSY[scenario], system.drain_concurrency,
                            sizes.drain_timeout, sizes.poll, scenario)
            out.pop("times"), out.pop("t0")
            out["enqueue_seconds"] = round(seconds, 3)
            return {**out, **load, **stats}
        if scenario == "sleep10ms":
            install(system, url, sizes.sleep_concurrency)
            system.enqueue(url, sizes.sleep_jobs, "sleep")
            stats = leave_stats(system, url, peer_stats)
            out = drain(system, url, sizes.sleep_jobs, 1, sizes.sleep_concurrency,
                        sizes.drain_timeout, sizes.poll, scenario)
            out.pop("times"), out.pop("t0")
            out.update(stats)
            out["ideal_jobs_per_s"] = round(sizes.sleep_concurrency / 0.010)
            out["share_of_ideal"] = round(out["jobs_per_s"] / out["ideal_jobs_per_s"], 3)
            return out
        if scenario == "io50ms":
            return io_bound(system, url, sizes, peer_stats)
        if scenario == "latency":
            install(system, url)
            return latency(system, url, sizes)
        if scenario == "backlog":
            install(system, url)
            system.enqueue(url, sizes.backlog)
            stats = leave_stats(system, url, peer_stats)
            out = drain(system, url, sizes.backlog, 1, system.drain_concurrency,
                        sizes.backlog_timeout, max(sizes.poll, 1.0), scenario)
            out.update(tenths(out.pop("times")))
            out.pop("t0")
            return {**out, **stats}
        if scenario == "ratelimit":
            return rate_limit(system, url, sizes)
        if scenario == "ceiling":
            if system.name != "jobwarden":
                raise SystemFailed("the ceiling runs on Jobwarden's schema only")
            install(system, url)
            system.enqueue(url, sizes.jobs)
            return ceiling.raw_loop(url, sizes.jobs, timeout=sizes.drain_timeout)
        if scenario == "wal":
            install(system, url)
            return wal(system, url, sizes, peer_stats)
    raise ValueError(f"unknown scenario {scenario!r}")


def io_bound(system: System, url: str, sizes: Sizes, peer_stats: str) -> dict:
    """I/O-bound jobs: each awaits IO_SECONDS in an async handler, `io_concurrency` in
    flight in one worker process. The bound is io_concurrency / IO_SECONDS jobs/s (what
    the waits allow); the database's own limit is the ceiling scenario's figure."""
    argv = system.io_worker_argv(url, sizes.io_concurrency)  # SystemFailed: not driven
    install(system, url, sizes.io_concurrency)
    system.enqueue(url, sizes.io_jobs, "io")
    stats = leave_stats(system, url, peer_stats)
    out = drain(system, url, sizes.io_jobs, 1, sizes.io_concurrency, sizes.drain_timeout,
                sizes.poll, "io50ms", launch=lambda i: (argv, system.env(url)))
    out.pop("times"), out.pop("t0")
    out.update(stats)
    out["bound_jobs_per_s"] = round(sizes.io_concurrency / IO_SECONDS)
    out["share_of_bound"] = round(out["jobs_per_s"] / out["bound_jobs_per_s"], 3)
    if out["steady_jobs_per_s"]:
        out["steady_share_of_bound"] = round(
            out["steady_jobs_per_s"] / out["bound_jobs_per_s"], 3)
    return out


def tenths(times: list[float]) -> dict:
    """Drain rate over the first and the last tenth of the jobs finished (their finish times
    on the database clock; the first tenth counted from the first finish, so the worker's
    start-up is not in it). When the drain timed out these are tenths of the jobs done."""
    times = sorted(times)
    k = len(times) // 10
    if k < 1:
        return {"first_tenth_jobs_per_s": None, "last_tenth_jobs_per_s": None,
                "last_over_first": None}
    first = round(k / max(times[k] - times[0], 1e-6), 1)
    last = round(k / max(times[-1] - times[-k - 1], 1e-6), 1)
    return {"first_tenth_jobs_per_s": first, "last_tenth_jobs_per_s": last,
            "last_over_first": round(last / first, 3)}


def latency(system: System, url: str, sizes: Sizes,
            kept: dict[str, dict[int, float]] | None = None) -> dict:
    """Enqueue-commit to handler-start at low load: one worker idling, jobs enqueued one
    per transaction at a steady rate; both ends stamped on the machine's monotonic clock.
    `kept`: given, it gets both ends of each job, job by job ("commit", "start")."""
    tmp = tempfile.mkdtemp(prefix="jwbench-latency-")
    stamps, commits = os.path.join(tmp, "stamps"), os.path.join(tmp, "commits")
    log = os.path.join(tmp, "worker.log")
    env = system.env(url, BENCH_STAMP_FILE=stamps)
    worker = procs.spawn(system.worker_argv(url, None), env, ROOT, log)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            # Warm up: the worker is idle and listening once one job has gone through.
            system.driver(url, "trickle", "--jobs", "1", "--rate", "1", "--out", commits,
                          timeout=60)
            finishes = Finishes(system)
            _wait(conn, finishes, 1, 60, worker, log)
            os.unlink(stamps)
            trickle = _Background(lambda: system.driver(
                url, "trickle", "--jobs", str(sizes.latency_jobs),
                "--rate", str(sizes.latency_rate), "--out", commits,
                timeout=sizes.latency_jobs / sizes.latency_rate + 60))
            while not trickle.done(1.0):
                if system.finish_groups_sql is not None:
                    finishes.count(conn)  # seen before the ring prunes them
            trickle.result()
            _wait(conn, finishes, sizes.latency_jobs + 1, 60, worker, log)
    finally:
        procs.stop(worker)
    start = _read(stamps)
    commit = _read(commits)
    if kept is not None:
        kept.update(commit=commit, start=start)
    ms = sorted((start[i] - commit[i]) * 1000 for i in commit if i in start)
    if len(ms) < sizes.latency_jobs:
        raise SystemFailed(f"only {len(ms)} of {sizes.latency_jobs} handlers stamped")
    return {"jobs": len(ms), "rate_per_s": sizes.latency_rate,
            "p50_ms": round(statistics.median(ms), 2),
            "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 2),
            "max_ms": round(ms[-1], 2)}


def rate_limit(system: System, url: str, sizes: Sizes) -> dict:
    """A type limited to `limit_rate` jobs/s across `limit_workers` worker processes,
    through the system's database: a backlog of limit_rate × limit_seconds jobs of
    `limit_work_ms`, drained to its end. Each handler stamps its start (apps/common.py's
    write_stamp, the latency scenario's clock), so every system is counted the same way,
    by bench/rate_windows.py (bench/bench_rate_limit.py's counting)."""
    if system.no_rate_limit:
        raise NotMeasured(system.no_rate_limit)
    rate, concurrency = sizes.limit_rate, sizes.limit_concurrency
    jobs = int(rate * sizes.limit_seconds)
    if url not in _COPIES:
        system.install_limited(url, concurrency, rate)
    system.enqueue(url, jobs, "limited")
    stamps = os.path.join(tempfile.mkdtemp(prefix="jwbench-ratelimit-"), "stamps")
    env = system.env(url, BENCH_STAMP_FILE=stamps, BENCH_RATE=f"{rate:g}",
                     BENCH_WORK_MS=f"{sizes.limit_work_ms:g}")
    argv = system.limited_worker_argv(url, concurrency)
    out = drain(system, url, jobs, sizes.limit_workers, concurrency,
                3 * sizes.limit_seconds + 60, sizes.poll, "ratelimit",
                launch=lambda i: (argv, env))
    out.pop("times"), out.pop("t0")
    try:
        with open(stamps) as f:
            started = [line.split() for line in f]
    except FileNotFoundError:
        raise SystemFailed("no handler started") from None
    counted = rate_windows.figures([float(t) for _, t in started], rate,
                                   system.limit_burst(rate))
    return {**out, **counted, "work_ms": sizes.limit_work_ms,
            "distinct_started": len({i for i, _ in started}),
            "limit_plus_burst": rate + counted["burst"],
            "steady_percent_of_limit": None if counted["steady_share"] is None
            else round(100 * counted["steady_share"], 1)}


class _Background:
    """A call run on a thread of its own: the harness goes on reading the database."""

    def __init__(self, call: Callable[[], object]):
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], object]) -> None:
        try:
            call()
        except BaseException as exc:  # re-raised on the harness's thread by result()
            self._error = exc

    def done(self, wait: float) -> bool:
        self._thread.join(wait)
        return not self._thread.is_alive()

    def result(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def _wait(conn, finishes: Finishes, n: int, timeout: float, worker, log: str) -> None:
    deadline = time.monotonic() + timeout
    while finishes.count(conn) < n:
        if worker.poll() is not None:
            raise SystemFailed(f"worker exited ({worker.returncode}): {procs.tail(log)}")
        if time.monotonic() > deadline:
            raise SystemFailed(f"timed out after {timeout:.0f}s waiting for {n} jobs")
        time.sleep(0.05)


def _read(path: str) -> dict[int, float]:
    out = {}
    with open(path) as f:
        for line in f:
            i, t = line.split()
            out[int(i)] = float(t)
    return out


def wal(system: System, url: str, sizes: Sizes, peer_stats: str) -> dict:
    """WAL, heap tuples and index entries per job over the enqueue and the drain of
    `sizes.jobs` no-op jobs (bench/peers/walstats.py says how each is counted). A
    CHECKPOINT first, so no checkpoint falls inside the window (none is due for
    checkpoint_timeout) and full-page images are only those of pages that existed
    before it; the ANALYZE of a peer is between the two phases and in neither. The
    window's WAL segments are copied as each completes, so a checkpoint of another
    session cannot recycle them before they are decoded."""
    checkpoint = "done"
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CHECKPOINT")
    except psycopg.Error as exc:
        checkpoint = f"failed: {exc}".strip()
    source = walstats.wal_source(url)
    s0 = walstats.snapshot(url)
    copy = None if isinstance(source, str) else walstats.WalCopy(url, source[1], s0.lsn)
    try:
        enqueue_seconds = system.enqueue(url, sizes.jobs)
        s1 = walstats.snapshot(url)
        stats = leave_stats(system, url, peer_stats)
        s1b = walstats.snapshot(url) if stats["stats"] == "analyzed" else s1
        out = drain(system, url, sizes.jobs, 1, system.drain_concurrency,
                    sizes.drain_timeout, sizes.poll, "wal")
        out.pop("t0"), out.pop("times")
        s2 = walstats.snapshot(url)
        done = out["done"]
        if done == 0:
            raise SystemFailed("no job finished")
        decoded: list[walstats.Decoded | None] = [None, None]
        if copy is not None and not isinstance(source, str):
            try:
                wal_dir = copy.finish(s2.lsn)
                names = walstats.relation_names(url)
                decoded = [walstats.decode(source[0], wal_dir, source[2], names, a.lsn, b.lsn)
                           for a, b in ((s0, s1), (s1b, s2))]
            except RuntimeError as exc:
                source = str(exc)
    finally:
        if copy is not None:
            copy.close()
    enqueue = walstats.phase(s0, s1, done, decoded[0])
    drained = walstats.phase(s1b, s2, done, decoded[1])
    total = walstats.combine(enqueue, drained)
    figures = {"jobs": sizes.jobs, "done": done, "timed_out": out["timed_out"],
               "drain": drained, "enqueue": enqueue, "total": total,
               "checkpoint": checkpoint, "enqueue_seconds": round(enqueue_seconds, 3),
               "drain_seconds": out["seconds"], "jobs_per_s": out["jobs_per_s"], **stats}
    for key in ("wal_bytes_per_job", "cluster_wal_bytes_per_job",
                "heap_tuples_written_per_job", "non_hot_updates_per_job",
                "index_entries_per_job"):
        if key in total:
            figures[key] = round(total[key], 2)
    if isinstance(source, str):
        figures["waldump"] = source
    return figures
