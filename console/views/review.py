"""Needs review: jobs whose outcome is unknown, with their reconcile actions.

Each card shows the job's payload (redacted) and ambiguous error, and one reason box for
its four decisions; ticked cards can be decided together through the bulk review
(console/views/bulk.py).
"""

from __future__ import annotations

from flask import Blueprint, render_template, request

from console.database import get_db
from console.forms import ActionForm
from console.identity import current_user
from console.mount import settings
from console.queries import clamp_limit, positive_int
from worker.operations import ALLOWED_FROM

bp = Blueprint("review", __name__)
#: What an operator can decide about an ambiguous outcome, in the order shown.
RECONCILE = ("mark_completed", "mark_failed", "retry", "skip")


@bp.get("/review")
def index():
    """Unknown-outcome jobs, newest first, each with its reconcile forms."""
    cfg = settings()
    limit = clamp_limit(request.args.get("limit"), cfg["PAGE_SIZE"], cfg["PAGE_SIZE_MAX"])
    rows = get_db().all("console_unknown_jobs",
                        before_id=positive_int(request.args.get("before")), limit=limit + 1)
    next_before = rows[limit - 1]["id"] if len(rows) > limit else None
    rows = rows[:limit]
    actions = [a for a in RECONCILE if "unknown" in ALLOWED_FROM[a]]
    forms = {}
    if current_user.can_act:
        # One reason box per job, for its four decisions (each button posts to its action).
        forms = {job["id"]: ActionForm.fresh("unknown") for job in rows}
    return render_template("jobwarden/review.html", jobs=rows, actions=actions, forms=forms,
                           next_before=next_before, limit=limit)
