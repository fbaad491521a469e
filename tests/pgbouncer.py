"""A private PgBouncer for tests: Debian's pgbouncer on 127.0.0.1, transaction pooling.

It forwards every database name to the test server and trusts the users of its
userlist. `make test` installs the package when missing. The test server is a TCP host
(DATABASE_URL's server) or a socket directory in the URL's `?host=` (the embedded
server's). PgBouncer refuses to run as root, so as root it is started as a user who can
reach the server: the owner of the socket directory (the embedded server keeps its
socket in its 0700 data directory), else `postgres`; its files go in a directory that
user can read.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from psycopg.conninfo import conninfo_to_dict

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def free_port(addr: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


def via(url: str, port: int) -> str:
    """The same database URL, through the bouncer's port."""
    parts = urlsplit(url)
    netloc = f"{parts.username or 'postgres'}@127.0.0.1:{port}"
    # A host or port in the query (the embedded server's socket directory) would win over
    # the netloc and bypass the bouncer.
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k not in ("host", "port")])
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def server_address(url: str) -> tuple[str, int]:
    """(host, port) of the server `url` names: a TCP host or a socket directory, wherever
    the URL puts it (netloc or `?host=`), with libpq's defaults."""
    params = conninfo_to_dict(url)
    host = params.get("host") or "/var/run/postgresql"
    assert "," not in host, f"one server, not several: {host}"
    return host, int(params.get("port") or 5432)


def run_as(host: str) -> str:
    """The OS user PgBouncer runs as when we are root: one who can reach `host`."""
    if host.startswith("/"):
        return Path(host).owner()
    return "postgres"


@contextmanager
def pgbouncer(server_url: str, *, pool_size: int = 4, listen_addr: str = "127.0.0.1"):
    """Run PgBouncer in front of `server_url`'s server, listening on `listen_addr`;
    yields its port."""
    assert os.path.exists(PGBOUNCER), "pgbouncer is missing: `make pgbouncer` installs it"
    host, server_port = server_address(server_url)
    port = free_port(listen_addr)
    home = Path(tempfile.mkdtemp(prefix="jobwarden-pgbouncer-"))
    user = urlsplit(server_url).username or "postgres"
    (home / "userlist.txt").write_text(f'"{user}" ""\n')
    (home / "pgbouncer.ini").write_text(f"""\
[databases]
* = host={host} port={server_port}

[pgbouncer]
listen_addr = {listen_addr}
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {home}/userlist.txt
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 500
logfile = {home}/pgbouncer.log
pidfile = {home}/pgbouncer.pid
ignore_startup_parameters = extra_float_digits,options,application_name
""")
    as_root = os.geteuid() == 0
    if as_root:
        owner = run_as(host)
        shutil.chown(home, owner)
        for f in home.iterdir():
            shutil.chown(f, owner)
    proc = subprocess.Popen([PGBOUNCER, *(["-u", owner] if as_root else []),
                             str(home / "pgbouncer.ini")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection((listen_addr, port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log = (home / "pgbouncer.log")
                    raise RuntimeError("pgbouncer did not start: " + proc.stdout.read().decode()
                                       + (log.read_text() if log.exists() else "")) from None
                time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # never leave a bouncer behind the suite
            proc.kill()
            proc.wait()
        shutil.rmtree(home, ignore_errors=True)


def version() -> str:
    """`PgBouncer 1.18.0`, as the binary reports it."""
    out = subprocess.run([PGBOUNCER, "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0]
