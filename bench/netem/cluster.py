"""A private PostgreSQL cluster for the namespace benchmarks.

The workers in their namespaces must reach PostgreSQL over their link to the host, and
a server that listens on localhost only cannot be reached from another namespace. So the
harness initialises a cluster of its own (the machine's PostgreSQL binaries, run as the
`postgres` OS user when we are root), listening on the bridge's address on a free port,
with `trust` for the bench's subnets. Its settings are initdb's defaults (fsync,
synchronous_commit, full_page_writes on; shared_buffers 128MB) except: autovacuum off
(as on the shared development server, so no vacuum runs inside a drain),
`pg_stat_statements` loaded (statements and rows per job) and `track_wal_io_timing` on
(how long WAL flushes took). A separate cluster also keeps other workloads out of
its counters, and the shared server's configuration is never touched.

Its directory holds `owner.pid` (the harness's pid): `sweep()` stops and removes the
clusters of runs that are gone.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from bench.netem.net import stale

PREFIX = "jwnetem-pg-"
SETTINGS = {
    "autovacuum": "off",
    "shared_preload_libraries": "pg_stat_statements",
    "track_wal_io_timing": "on",
    "max_connections": "100",
}


def pg_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"))
    if not found:
        raise RuntimeError("no PostgreSQL binaries under /usr/lib/postgresql")
    return found[-1].parent


def free_port(addr: str) -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def _run_user() -> str | None:
    if os.geteuid() != 0:
        return None
    pwd.getpwnam("postgres")
    return "postgres"


class PrivateCluster:
    """`with PrivateCluster(listen) as pg:` a running cluster; `pg.url` is its postgres
    database over TCP on `listen`. Stopped and removed on exit."""

    def __init__(self, listen: str, subnets: list[str]):
        self.listen = listen
        self.subnets = subnets
        self.bin = pg_bin()
        self.user = _run_user()
        self.dir = Path(tempfile.mkdtemp(prefix=PREFIX))
        (self.dir / "owner.pid").write_text(str(os.getpid()))
        self.data = self.dir / "data"
        self.port = free_port(listen)
        self.url = f"postgresql://postgres@{listen}:{self.port}/postgres"
        self.settings = dict(SETTINGS)

    def _run(self, tool: str, *args: str, timeout: float = 120) -> None:
        cmd = [str(self.bin / tool), *args]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        done = subprocess.run(cmd, cwd=self.dir, capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"{tool}: {(done.stderr or done.stdout).strip()[-500:]}")

    def __enter__(self) -> PrivateCluster:
        try:
            if self.user:
                shutil.chown(self.dir, self.user, self.user)
            self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres",
                      "-E", "UTF8", "--no-sync")
            with open(self.data / "pg_hba.conf", "a") as f:
                for net in self.subnets:
                    f.write(f"host all all {net} trust\n")
            with open(self.data / "postgresql.conf", "a") as f:
                f.write(f"listen_addresses = '{self.listen}'\nport = {self.port}\n"
                        f"unix_socket_directories = '{self.dir}'\n")
                for key, value in self.settings.items():
                    f.write(f"{key} = '{value}'\n")
            self._run("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "server.log"),
                      "-w", "-t", "60", "start")
            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        stop(self.dir)

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def server_settings(self) -> dict[str, str]:
        names = ("server_version", "shared_buffers", "autovacuum", "synchronous_commit",
                 "fsync", "full_page_writes", "wal_level", "max_connections", "work_mem",
                 "checkpoint_timeout", "max_wal_size", "shared_preload_libraries",
                 "listen_addresses")
        with psycopg.connect(self.url, autocommit=True) as conn:
            return {n: conn.execute(f"SHOW {n}").fetchone()[0] for n in names}


def stop(directory: Path) -> None:
    """Stop the cluster in `directory` (immediate: nothing in it is worth keeping) and
    remove the directory."""
    data = directory / "data"
    if (data / "postmaster.pid").exists():
        cmd = [str(pg_bin() / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "-t",
               "30", "stop"]
        user = _run_user()
        if user:
            cmd = ["runuser", "-u", user, "--", *cmd]
        subprocess.run(cmd, capture_output=True, timeout=60)
        deadline = time.monotonic() + 10
        while (data / "postmaster.pid").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    shutil.rmtree(directory, ignore_errors=True)


def sweep() -> list[str]:
    """Stop and remove the private clusters of runs that no longer run."""
    removed = []
    for d in glob.glob(os.path.join(tempfile.gettempdir(), PREFIX + "*")):
        try:
            owner = int(Path(d, "owner.pid").read_text())
        except (OSError, ValueError):
            owner = 0
        if stale(owner):
            stop(Path(d))
            removed.append(d)
    return removed
