"""What a drain costs and where it waits: CPU from /proc, the server's wait events
sampled from pg_stat_activity, its counters before and after, the statements it ran,
and the claims Jobwarden's workers made.

CPU (clock ticks of /proc/PID/stat, utime + stime) over the drain window, from the
workers' start to the poll that saw the last job finished:

- **server**: every process of the private cluster: the postmaster's children alive at
  either end (each one's ticks at the end minus at the start; one born inside the
  window counts whole) plus the postmaster's own ticks and those of the children it
  reaped in the window (cutime + cstime). Split by what each process was: a backend of
  the workload (any client backend whose application_name is not the harness's),
  one of the harness's own sessions (its polling, this sampler), or a background
  process (WAL writer, checkpointer, background writer, ...);
- **workers**: each worker process's ticks at the end (they start inside the window, so
  imports and start-up are in it);
- the delay lines and PgBouncer, when present; the harness process itself;
- **host**: all cores' busy ticks from /proc/stat (user, nice, system, irq, softirq,
  steal); what the processes above do not explain is everything else on the machine
  (other programs' work, the kernel's).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import psycopg

from bench.peers.procs import _tree as tree
from bench.peers.procs import children

CLK = os.sysconf("SC_CLK_TCK")
HARNESS_APP = "jwbench-harness"


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # fields from 3 (state) on


def ticks(pid: int) -> tuple[int, int] | None:
    """(own utime + stime, reaped children's cutime + cstime) of `pid`."""
    f = _stat(pid)
    if f is None:
        return None
    return int(f[11]) + int(f[12]), int(f[13]) + int(f[14])


def host_ticks() -> tuple[int, int]:
    """(busy, total) ticks of all cores since boot."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (values + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def all_ticks() -> dict[int, tuple[str, int]]:
    """Every process's (name, own ticks), for what else used the machine."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                text = f.read()
        except OSError:
            continue
        comm = text[text.index("(") + 1:text.rindex(")")]
        fields_ = text[text.rindex(")") + 2:].split()
        out[int(name)] = (comm, int(fields_[11]) + int(fields_[12]))
    return out


def _others(before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]],
            ours: set[int], top: int = 6) -> list[tuple[str, float]]:
    """The processes not ours that used the most CPU in the window, by name."""
    by_name: Counter[str] = Counter()
    for pid, (comm, t) in after.items():
        if pid in ours:
            continue
        start = before.get(pid)
        by_name[comm] += t - (start[1] if start and start[0] == comm else 0)
    return [(name, round(t / CLK, 2)) for name, t in by_name.most_common(top) if t]


@dataclass
class ServerTicks:
    postmaster: tuple[int, int]
    procs: dict[int, int]


def server_ticks(postmaster: int) -> ServerTicks:
    procs = {}
    for pid in children(postmaster):
        t = ticks(pid)
        if t is not None:
            procs[pid] = t[0]
    return ServerTicks(ticks(postmaster) or (0, 0), procs)


class ActivitySampler:
    """pg_stat_activity every `interval` seconds, on a connection of its own to the
    cluster's `postgres` database: what each workload backend was doing (state and wait
    event), and what kind each server process was (for the CPU split)."""

    # For a backend waiting on a heavyweight lock: its statement, the statement of the
    # first session blocking it (their opening comment names Jobwarden's statements), and
    # the table: of the tuple lock a backend holds while it waits for a row's updater, or
    # of the extension lock it waits for.
    QUERY = """
SELECT a.pid, a.backend_type, coalesce(a.application_name, ''), coalesce(a.state, ''),
       coalesce(a.wait_event_type, ''), coalesce(a.wait_event, ''),
       CASE WHEN a.wait_event_type = 'Lock' THEN
           left(regexp_replace(a.query, '\\s+', ' ', 'g'), 60) || ' <- ' || coalesce((
               SELECT left(regexp_replace(b.query, '\\s+', ' ', 'g'), 60)
               FROM pg_stat_activity b WHERE b.pid = (pg_blocking_pids(a.pid))[1]), '?')
       END,
       CASE WHEN a.wait_event_type = 'Lock' THEN
           (SELECT l.relation FROM pg_locks l WHERE l.pid = a.pid AND l.relation IS NOT NULL
              AND l.locktype IN ('tuple', 'extend') ORDER BY l.granted LIMIT 1)
       END
FROM pg_stat_activity a WHERE a.pid <> pg_backend_pid()"""

    def __init__(self, url: str, interval: float = 0.1):
        self.url, self.interval = url, interval
        self.kinds: dict[int, str] = {}
        self.workload: Counter[str] = Counter()
        self.background: Counter[str] = Counter()
        self.samples = 0
        self.lock_waits: Counter[str] = Counter()
        self.lock_queries: Counter[tuple[str, int | None, str]] = Counter()
        self.relations: dict[int, str] = {}  # oid -> name, from name_relations()
        self.max_workload_backends = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.error: str | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                while not self._stop.is_set():
                    self._sample(conn.execute(self.QUERY).fetchall())
                    self._stop.wait(self.interval)
        except psycopg.Error as exc:
            self.error = str(exc).strip()

    def _sample(self, rows) -> None:
        self.samples += 1
        n = 0
        for pid, btype, app, state, wtype, wevent, query, rel in rows:
            wait = f"{wtype}:{wevent}" if wtype else ""
            if btype == "client backend" and app != HARNESS_APP:
                self.kinds[pid] = "workload"
                n += 1
                self.workload[_category(state, wait)] += 1
                if wtype == "Lock":  # a heavyweight lock: which, who waits, who blocks
                    self.lock_waits[wevent] += 1
                    self.lock_queries[(wevent, rel, query)] += 1
            elif btype == "client backend":
                self.kinds[pid] = "harness"
            else:
                self.kinds[pid] = "background"
                self.background[f"{btype} {wait or 'on CPU'}"] += 1
        self.max_workload_backends = max(self.max_workload_backends, n)

    def name_relations(self, url: str) -> None:
        """Name the tables of the lock waits, in their database (`url`)."""
        oids = sorted({rel for _, rel, _ in self.lock_queries if rel})
        if not oids:
            return
        with psycopg.connect(url, autocommit=True) as conn:
            self.relations = dict(conn.execute(
                "SELECT oid::bigint, relname::text FROM pg_class WHERE oid = ANY(%s)",
                (oids,)).fetchall())

    def result(self) -> dict:
        total = sum(self.workload.values()) or 1
        return {
            "samples": self.samples, "interval_s": self.interval,
            "workload_backends_max": self.max_workload_backends,
            "workload_states": {k: round(v / total, 3)
                                for k, v in self.workload.most_common()},
            "lock_wait_samples": sum(self.lock_waits.values()),
            "lock_waits": dict(self.lock_waits),
            "lock_wait_statements": {
                f"{event} on {self.relations.get(rel, rel) if rel else '?'}: {query}": n
                for (event, rel, query), n in self.lock_queries.most_common(6)},
            "background": dict(self.background.most_common(8)),
            **({"error": self.error} if self.error else {}),
        }


def _category(state: str, wait: str) -> str:
    if state == "active":
        return f"active, waiting on {wait}" if wait else "active, on CPU (or waiting for one)"
    if state == "idle in transaction":
        return "in a transaction, waiting for the client"
    if state == "idle":
        return "idle, waiting for the client"
    return state or "unknown"


@dataclass
class Observer:
    """Entered when the workers have started, left when the drain is seen complete;
    `extra` names other processes whose CPU counts (delay lines, PgBouncer)."""

    admin_url: str
    postmaster: int
    extra: dict[str, int] = field(default_factory=dict)
    figures: dict = field(default_factory=dict)

    def __call__(self, workers):
        self._workers = list(workers)
        return self

    def __enter__(self) -> Observer:
        self._t = time.monotonic()
        self._server = server_ticks(self.postmaster)
        self._host = host_ticks()
        self._self = os.times()
        self._extra = {name: (ticks(pid) or (0, 0))[0] for name, pid in self.extra.items()}
        self._all = all_ticks()
        self.sampler = ActivitySampler(self.admin_url)
        self.sampler.start()
        return self

    def __exit__(self, *exc) -> None:
        seconds = time.monotonic() - self._t
        server = server_ticks(self.postmaster)
        host = host_ticks()
        me = os.times()
        everyone = all_ticks()
        worker_pids = {p for w in self._workers for p in tree(w.pid)}
        workers = sum((ticks(p) or (0, 0))[0] for p in worker_pids)
        extra = {name: (ticks(pid) or (0, 0))[0] - self._extra[name]
                 for name, pid in self.extra.items()}
        self.sampler.stop()
        kinds = self.sampler.kinds
        split: Counter[str] = Counter()
        for pid, end in server.procs.items():
            split[kinds.get(pid, "background")] += end - self._server.procs.get(pid, 0)
        # A child that exited in the window is not in server.procs: the postmaster reaped
        # it, and its ticks are in the postmaster's cutime + cstime.
        reaped = server.postmaster[1] - self._server.postmaster[1]
        own = server.postmaster[0] - self._server.postmaster[0]
        split["exited in the window"] += reaped
        split["postmaster"] += own
        busy, total = host[0] - self._host[0], host[1] - self._host[1]
        server_total = sum(split.values())
        harness = (me.user + me.system) - (self._self.user + self._self.system)
        known = (server_total + workers + sum(extra.values())) / CLK + harness
        self.figures = {
            "window_s": round(seconds, 3),
            "server_cpu_s": round(server_total / CLK, 3),
            "server_cpu_split_s": {k: round(v / CLK, 3) for k, v in split.items() if v},
            "workers_cpu_s": round(workers / CLK, 3),
            **{f"{name}_cpu_s": round(v / CLK, 3) for name, v in extra.items()},
            "harness_cpu_s": round(harness, 3),
            "host_busy_s": round(busy / CLK, 3),
            "host_capacity_s": round(total / CLK, 3),
            "host_busy_share": round(busy / total, 3) if total else None,
            "other_cpu_s": round(busy / CLK - known, 3),
            # Processes never seen by the sampler are not in server.procs: those started
            # and ended inside the window are in the postmaster's cutime instead.
            "other_top": _others(self._all, everyone, {
                os.getpid(), self.postmaster, *server.procs, *self._server.procs,
                *worker_pids, *self.extra.values()}),
            "activity": self.sampler.result(),
        }


# -- the server's counters ----------------------------------------------------------------

_COUNTERS = """
SELECT d.xact_commit, d.xact_rollback, d.tup_inserted, d.tup_updated, d.tup_deleted,
       d.blks_hit, d.blks_read,
       w.wal_records, w.wal_fpi, w.wal_bytes, w.wal_write, w.wal_sync,
       w.wal_write_time, w.wal_sync_time,
       pg_current_wal_lsn() - '0/0'::pg_lsn,
       b.checkpoints_timed + b.checkpoints_req
FROM pg_stat_database d, pg_stat_wal w, pg_stat_bgwriter b
WHERE d.datname = current_database()"""
_NAMES = ("commits", "rollbacks", "tup_inserted", "tup_updated", "tup_deleted", "blks_hit",
          "blks_read", "wal_records", "wal_fpi", "wal_stat_bytes", "wal_write", "wal_sync",
          "wal_write_ms", "wal_sync_ms", "wal_bytes", "checkpoints")


def counters(url: str) -> dict[str, float]:
    """This database's and the cluster's counters, once no other session is in the
    database (a backend sends its last statistics as it exits) and two reads agree."""
    from bench.peers.walstats import _wait_alone

    with psycopg.connect(url, autocommit=True) as conn:
        _wait_alone(conn)
        last = None
        for _ in range(20):
            conn.execute("SELECT pg_stat_clear_snapshot()")
            row = conn.execute(_COUNTERS).fetchone()
            now = dict(zip(_NAMES, (float(v) for v in row), strict=True))
            if last is not None and {k: v for k, v in now.items() if k != "wal_bytes"} == \
                    {k: v for k, v in last.items() if k != "wal_bytes"}:
                return now
            last = now
            time.sleep(0.3)
        return last or {}


def close_pooled(url: str) -> int:
    """End the server sessions PgBouncer keeps open in this database after its clients
    left (they are idle; a backend sends its statistics as it exits), so counters() can
    read them; how many there were."""
    with psycopg.connect(url, autocommit=True) as conn:
        return len(conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = "
            "current_database() AND pid <> pg_backend_pid() AND application_name <> %s",
            (HARNESS_APP,)).fetchall())


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: after[k] - before[k] for k in after if k in before}


_STATEMENTS = """
SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 90), calls, rows, total_exec_time,
       shared_blks_hit + shared_blks_read
FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
WHERE d.datname = %s AND s.query NOT LIKE '%%pg_stat%%'
ORDER BY calls DESC"""


def reset_statements(admin_url: str) -> None:
    """Forget every statement (the extension lives in the cluster's `postgres` database,
    `admin_url`, and sees them all)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")


def statements(admin_url: str, database: str, done: int, top: int = 8) -> dict:
    """The statements run in `database` since the reset: per job, and the most frequent
    ones (the harness's own polling included)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        rows = conn.execute(_STATEMENTS, (database,)).fetchall()
    calls = sum(r[1] for r in rows)
    exec_ms = sum(r[3] for r in rows)
    per = max(done, 1)
    return {
        "calls_per_job": round(calls / per, 3),
        "exec_ms_per_1000_jobs": round(exec_ms / per * 1000, 1),
        "top": [{"query": q, "calls": c, "rows": r, "rows_per_call": round(r / c, 1),
                 "mean_ms": round(t / c, 3), "blocks_per_call": round(b / c, 1)}
                for q, c, r, t, b in rows[:top]],
    }


# -- Jobwarden's claims (bench/netem/jw_worker.py writes them) ----------------------------

def claims(paths: list[str]) -> dict:
    """Claims of all workers of a drain: how many, rows each, and how many came back
    short (fewer rows than asked) while jobs were still pending: a short claim counts
    when any worker's claim that started after it had returned still got a job. Every
    job was enqueued before the drain, so that job was pending when the short claim
    ran; it was skipped because another claim held it locked (SKIP LOCKED)."""
    rows = []
    for path in paths:
        with open(path) as f:
            for line in f:
                t0, t1, asked, got = line.split()
                rows.append((float(t0), float(t1), int(asked), int(got)))
    if not rows:
        return {"claims": 0}
    # The latest start of a claim that got something: a short claim that returned before
    # it was short while jobs were pending.
    last_fruitful = max((t0 for t0, _t1, _a, got in rows if got), default=0.0)
    short = [r for r in rows if r[3] < r[2]]
    conflicts = [r for r in short if r[1] < last_fruitful]
    fruitful = [r for r in rows if r[3]]
    return {
        "claims": len(rows), "with_rows": len(fruitful),
        "rows_per_claim": round(sum(r[3] for r in fruitful) / max(len(fruitful), 1), 1),
        "asked_per_claim": round(sum(r[2] for r in fruitful) / max(len(fruitful), 1), 1),
        "short": len(short), "short_while_pending": len(conflicts),
        "rows_missed_while_pending": sum(r[2] - r[3] for r in conflicts),
        "claim_ms_mean": round(sum(r[1] - r[0] for r in fruitful) / max(len(fruitful), 1)
                               * 1000, 2),
    }
