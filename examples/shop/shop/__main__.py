"""`python -m shop`: the whole example in one process tree.

Applies Jobwarden's migrations, creates the shop's tables and a staff account, starts a
Jobwarden worker for shop.jobs in a child process, and serves the shop. Without
DATABASE_URL it all runs on Jobwarden's embedded PostgreSQL (under ./.jobwarden).
Ctrl-C or SIGTERM stops the worker cleanly (it hands back what it was running).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

from werkzeug.serving import make_server

from jobwarden.worker.store.db import database_url, migrate

STAFF_USER, STAFF_PASSWORD = "admin", "shop-admin"


def prepare(app) -> None:
    """Jobwarden's schema (its migrations), then the shop's own tables and a staff account."""
    from shop.admin import add_staff
    from shop.models import Staff, db

    migrate(app.config["DATABASE_URL"])
    with app.app_context():
        db.create_all()  # a real shop would own its tables with its own Alembic migrations
        if db.session.execute(db.select(Staff.id).limit(1)).first() is None:
            add_staff(STAFF_USER, STAFF_PASSWORD, console_role="admin")
        db.session.commit()


def start_worker(url: str, providers_url: str) -> subprocess.Popen:
    """`jobwarden worker --app shop.jobs` with this folder importable."""
    here = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "DATABASE_URL": url, "SHOP_PROVIDERS_URL": providers_url,
           "PYTHONPATH": os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "jobwarden.worker.cli", "worker",
                             "--app", "shop.jobs", "--concurrency", "4", "--grace", "10"],
                            cwd=here, env=env)


def main(argv: list[str] | None = None) -> int:
    from shop import create_app

    parser = argparse.ArgumentParser(prog="python -m shop", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=5000)
    args = parser.parse_args(argv)

    url = database_url()  # DATABASE_URL, or the embedded PostgreSQL
    os.environ["DATABASE_URL"] = url
    app = create_app({"DATABASE_URL": url})
    prepare(app)
    try:
        server = make_server("127.0.0.1", args.port, app, threaded=True)
    except OSError as exc:
        print(f"cannot listen on 127.0.0.1:{args.port} ({exc}); try --port", file=sys.stderr)
        return 2
    base = f"http://127.0.0.1:{server.port}"
    worker = start_worker(url, base + "/fake")
    print(f"shop:    {base}/\nconsole: {base}/ops/jobs/  (staff login {STAFF_USER} / "
          f"{STAFF_PASSWORD})\nCtrl-C stops.", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)  # a process manager stops it like Ctrl-C
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    return 0


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
