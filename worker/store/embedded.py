"""Stopping the embedded PostgreSQL that commands start when DATABASE_URL is unset.

worker/store/db.py starts it with pgserver and leaves it running (the next command reuses it
in milliseconds instead of seconds); `jobwarden embedded stop` is how it ends. pgserver
runs the server as its own `pgserver` OS user when we are root (PostgreSQL refuses
root), so pg_ctl must run as that user too.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from jobwarden.worker.store.db import jobwarden_home


def embedded_datadir(home: Path | None = None) -> Path:
    """Where the embedded server keeps its data: JOBWARDEN_HOME/pgdata."""
    return (home or jobwarden_home()) / "pgdata"


def stop_embedded(home: Path | None = None, timeout: float = 60) -> str:
    """Stop the embedded server under `home` (default JOBWARDEN_HOME), if it runs.

    Returns what happened, as a sentence for the terminal. The data stays: the next
    command without DATABASE_URL starts the server again.
    """
    datadir = embedded_datadir(home)
    if not (datadir / "PG_VERSION").is_file():
        return f"no embedded PostgreSQL in {datadir}"
    if not (datadir / "postmaster.pid").is_file():
        return f"the embedded PostgreSQL in {datadir} is not running"
    with warnings.catch_warnings():  # platformdirs complains when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import pgserver  # only when the embedded server is used: production never loads it

    user = "pgserver" if hasattr(os, "geteuid") and os.geteuid() == 0 else None
    # fast: disconnect clients (a forgotten console or worker) instead of waiting on them.
    # pg_ctl is made at import time, one function per bundled binary (setattr in
    # pgserver._commands): it exists, but no type checker can see it.
    pgserver.pg_ctl(["-w", "-m", "fast", "stop"],  # type: ignore[attr-defined]
                    pgdata=datadir, user=user, timeout=timeout)
    return f"stopped the embedded PostgreSQL in {datadir}"
