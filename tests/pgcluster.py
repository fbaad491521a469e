"""A PostgreSQL cluster of the tests' own, on a private port: for the chaos tier, which
stops and starts it at will, for the plan tests, which need auto_explain (a contrib
module the embedded server does not ship), and for the read replica's tests, which need a
primary and a streaming standby of it (`PrivateCluster.standby()`)."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import psycopg

_SYSTEM = Path("/usr/lib/postgresql")


def _pg_bin() -> Path:
    """The machine's PostgreSQL binaries (Debian layout), else the ones pgserver ships, so
    the chaos tier runs where only `make test`'s virtualenv provides PostgreSQL."""
    system = sorted(_SYSTEM.glob("*/bin/pg_ctl"))
    if system:
        return system[-1].parent
    from pgserver._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def contrib_bin() -> Path | None:
    """The binaries of a machine's PostgreSQL that ships auto_explain, if any."""
    found = sorted(_SYSTEM.glob("*/lib/auto_explain.so"))
    return found[-1].parent.parent / "bin" if found else None


def _server_user() -> str:
    """PostgreSQL refuses to run as root: the OS user to run it as."""
    for name in ("postgres", "pgserver"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root with no 'postgres' or 'pgserver' user to run "
                       "the private PostgreSQL cluster as")


PG_BIN = _pg_bin()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepts(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2):
            return True
    except psycopg.OperationalError:
        return False


class PrivateCluster:
    """A PostgreSQL cluster of our own, run as the `postgres` OS user (the server refuses
    to run as root), that a test may stop and start at will. `settings` are server
    settings (`{"autovacuum": "off"}`); `standby_of` makes it a streaming standby of that
    running cluster instead of a new one (pg_basebackup -R)."""

    def __init__(self, bin_dir: Path = PG_BIN, *, settings: Mapping[str, str] | None = None,
                 standby_of: PrivateCluster | None = None):
        self.bin = bin_dir
        self.settings = dict(settings or {})
        self.dir = Path(tempfile.mkdtemp(prefix="jobwarden-chaos-pg-"))
        self.user = _server_user() if os.geteuid() == 0 else None
        if self.user:
            shutil.chown(self.dir, self.user, self.user)
        self.data = self.dir / "data"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        if standby_of is None:
            self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres",
                      "--no-sync", "-E", "UTF8")
        else:
            # -R writes primary_conninfo and standby.signal: started, it streams from there.
            self._run("pg_basebackup", "-D", str(self.data), "-h", "127.0.0.1",
                      "-p", str(standby_of.port), "-U", "postgres", "-R", "-X", "stream",
                      "-c", "fast", "--no-sync")

    def standby(self, timeout: float = 30.0) -> PrivateCluster:
        """A hot standby of this running cluster on another port, started, once this
        cluster reports it streaming."""
        standby = PrivateCluster(self.bin, settings=self.settings, standby_of=self)
        try:
            standby.start()
            deadline = time.monotonic() + timeout
            with psycopg.connect(self.url, autocommit=True) as conn:
                while not conn.execute("SELECT count(*) FROM pg_stat_replication "
                                       "WHERE state = 'streaming'").fetchone()[0]:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"the standby on port {standby.port} is not "
                                           f"streaming after {timeout:g} s")
                    time.sleep(0.02)
        except BaseException:
            standby.destroy()
            raise
        return standby

    def _run(self, tool: str, *args: str) -> None:
        cmd = [str(self.bin / tool), *args]
        if self.user:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        subprocess.run(cmd, check=True, cwd=self.dir, capture_output=True, timeout=60)

    def _options(self) -> tuple[str, ...]:
        """pg_ctl's options to (re)start the server; the log goes to a file, so no server
        process holds the pipes _run reads to their end."""
        return ("-D", str(self.data), "-l", str(self.dir / "server.log"), "-w", "-t", "30",
                "-o", f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                "-c fsync=off -c max_connections=200"
                + "".join(f" -c {name}={value}" for name, value in self.settings.items()))

    def start(self) -> None:
        self._run("pg_ctl", *self._options(), "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "30", "stop")

    def restart(self, mode: str = "fast") -> None:
        """`pg_ctl restart -m mode`: stopped (`fast`: sessions ended, their transactions
        rolled back; `immediate`: a crash, recovered from the WAL) and started again."""
        self._run("pg_ctl", *self._options(), "-m", mode, "restart")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def destroy(self) -> None:
        try:
            if self.running():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
