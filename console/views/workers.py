"""Workers: host, pid, queues, concurrency, version, heartbeat age, state, running jobs."""

from __future__ import annotations

from flask import Blueprint, render_template
from flask.typing import ResponseReturnValue

from jobwarden.console.core.config import settings
from jobwarden.console.data import queries
from jobwarden.console.web.reads import page_reads
from jobwarden.console.web.security import is_htmx
from jobwarden.worker.engine.loops import STALL_SECONDS

bp = Blueprint("workers", __name__)


@bp.get("/workers")
def index() -> ResponseReturnValue:
    """Every recent worker process and what it is running."""
    with page_reads().reading() as reader:
        workers = queries.workers_with_jobs(reader, settings()["WORKER_GONE_SECONDS"],
                                            rates=True)
    template = "jobwarden/_workers.html" if is_htmx() else "jobwarden/workers.html"
    # A loop lag this long is the worker's own "stalled" (worker/engine/loops.py).
    return render_template(template, workers=workers, loop_stall_ms=STALL_SECONDS * 1000)
