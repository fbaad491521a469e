"""Workers: host, pid, queues, concurrency, version, heartbeat age, state, running jobs."""

from __future__ import annotations

from flask import Blueprint, current_app, render_template

from console import queries
from console.database import get_db
from console.security import is_htmx

bp = Blueprint("workers", __name__)


@bp.get("/workers")
def index():
    """Every recent worker process and what it is running."""
    with get_db().reading() as reader:
        workers = queries.workers_with_jobs(reader, current_app.config["WORKER_GONE_SECONDS"],
                                            rates=True)
    template = "_workers.html" if is_htmx() else "workers.html"
    return render_template(template, workers=workers)
