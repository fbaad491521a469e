"""The PostgreSQL server side: fresh databases, the server's settings, the machine."""

from __future__ import annotations

import os
import time
import uuid
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg

SETTINGS = ("server_version", "shared_buffers", "autovacuum", "synchronous_commit", "fsync",
            "max_connections", "work_mem")


def with_db(url: str, name: str) -> str:
    p = urlsplit(url)
    return urlunsplit((p.scheme, p.netloc, "/" + name, p.query, p.fragment))


@contextmanager
def fresh_database(server: str, tag: str, template: str | None = None):
    """A new database on the server for one scenario of one system (a copy of the
    database `template` when given); dropped afterwards (WITH FORCE: a worker that would
    not stop cannot keep it alive)."""
    name = f"jwbench_{tag}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"'
                      + (f' TEMPLATE "{template}"' if template else ""))
    try:
        yield with_db(server, name)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def server_settings(server: str) -> dict[str, str]:
    with psycopg.connect(server, autocommit=True) as conn:
        out = {s: conn.execute(f"SHOW {s}").fetchone()[0] for s in SETTINGS}
        out["version"] = conn.execute("SELECT version()").fetchone()[0]
    return out


def cpu_model() -> str:
    """The CPU's name as the kernel reports it ("unknown" where it does not): the same
    kind of machine came with CPUs whose drains differed twofold, so every run says which."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() or "unknown"
    except OSError:
        pass
    return "unknown"


def machine() -> dict[str, object]:
    mem_kb = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    load = os.getloadavg()
    return {"nproc": os.cpu_count(), "cpu": cpu_model(),
            "memory_gb": round(mem_kb / 1024 / 1024, 1),
            "loadavg_at_start": [round(x, 2) for x in load]}


#: How the peers' tables are left before their workers start: `analyzed` (ANALYZE on each
#: of the peer's tables after the load, as autovacuum would do on a production server) or
#: `none` (as shipped: never analyzed, the state after a burst with autovacuum off).
PEER_STATS = ("analyzed", "none")


def analyze_peer(url: str, system_name: str) -> dict:
    """ANALYZE every table of a peer's database (each scenario's database holds one
    system's tables and nothing else); the tables and how long it took. Jobwarden is
    never analyzed: it must stay fast on tables without statistics."""
    if system_name == "jobwarden":
        raise ValueError("Jobwarden's tables are never analyzed by the harness")
    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT format('%I.%I', schemaname, relname) FROM pg_stat_user_tables "
            "ORDER BY 1").fetchall()]
        start = time.monotonic()
        for table in tables:
            conn.execute(f"ANALYZE {table}")
        seconds = time.monotonic() - start
    return {"analyzed_tables": tables, "analyze_seconds": round(seconds, 3)}
