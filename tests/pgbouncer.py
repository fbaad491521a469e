"""A private PgBouncer for tests: Debian's pgbouncer on 127.0.0.1, transaction pooling.

It forwards every database name to the test server and trusts the users of its
userlist. `make test` installs the package when missing. PgBouncer refuses to run as
root, so as root it is started as `postgres`, with its files in a directory that user
can read.
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
from urllib.parse import urlsplit, urlunsplit

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def via(url: str, port: int) -> str:
    """The same database URL, through the bouncer's port."""
    parts = urlsplit(url)
    netloc = f"{parts.username or 'postgres'}@127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


@contextmanager
def pgbouncer(server_url: str, *, pool_size: int = 4):
    """Run PgBouncer in front of `server_url`'s server; yields its port."""
    assert os.path.exists(PGBOUNCER), "pgbouncer is missing: `make pgbouncer` installs it"
    server = urlsplit(server_url)
    port = free_port()
    home = Path(tempfile.mkdtemp(prefix="jobwarden-pgbouncer-"))
    user = server.username or "postgres"
    (home / "userlist.txt").write_text(f'"{user}" ""\n')
    (home / "pgbouncer.ini").write_text(f"""\
[databases]
* = host={server.hostname} port={server.port or 5432}

[pgbouncer]
listen_addr = 127.0.0.1
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
        shutil.chown(home, "postgres")
        for f in home.iterdir():
            shutil.chown(f, "postgres")
    proc = subprocess.Popen([PGBOUNCER, *(["-u", "postgres"] if as_root else []),
                             str(home / "pgbouncer.ini")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
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
        proc.wait(timeout=10)
        shutil.rmtree(home, ignore_errors=True)


def version() -> str:
    """`PgBouncer 1.18.0`, as the binary reports it."""
    out = subprocess.run([PGBOUNCER, "--version"], capture_output=True, text=True).stdout
    return out.splitlines()[0]
