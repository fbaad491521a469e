"""The audit log: every operator action, filterable by actor, action and job; and the
same log one line per action (`/audit/actions`), a bulk action one line counting its
jobs, filterable by actor, action and days."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, time, timedelta
from urllib.parse import urlencode

from flask import Blueprint, render_template, request
from flask.typing import ResponseReturnValue

from jobwarden.console.core.config import settings
from jobwarden.console.data.database import CQ, Row
from jobwarden.console.data.queries import clamp_limit, positive_int, text_filter
from jobwarden.console.web.identity import current_user
from jobwarden.console.web.reads import page_reads
from jobwarden.worker.ops.operations import AUDITED_ACTIONS

bp = Blueprint("audit", __name__)


@bp.get("/audit")
def index() -> ResponseReturnValue:
    """Audit entries, newest first, with keyset paging that keeps the filters."""
    cfg = settings()
    filters = {
        "actor": text_filter(request.args.get("actor")),
        "action": text_filter(request.args.get("action")),
        "job_id": positive_int(request.args.get("job")),
        "bulk_id": uuid_filter(request.args.get("bulk")),
    }
    limit = clamp_limit(request.args.get("limit"), cfg["PAGE_SIZE"], cfg["PAGE_SIZE_MAX"])
    rows = page_reads().all(CQ.console_audit_page, **filters,
                            before_id=positive_int(request.args.get("before")),
                            limit=limit + 1)
    next_before = rows[limit - 1]["id"] if len(rows) > limit else None
    keep = {"actor": filters["actor"], "action": filters["action"], "job": filters["job_id"],
            "bulk": filters["bulk_id"],
            "limit": limit if limit != cfg["PAGE_SIZE"] else None}
    keep = {k: v for k, v in keep.items() if v}
    older = urlencode({**keep, "before": next_before}) if next_before else None
    bulk = (page_reads().all(CQ.console_audit_bulk_summary, bulk_id=filters["bulk_id"])
            if filters["bulk_id"] else [])
    # Bulk actions started and not ended: their chunks run while their page is open.
    unfinished = page_reads().all(CQ.console_bulk_unfinished, limit=20)
    return render_template("jobwarden/audit.html", rows=shown(rows[:limit]), filters=filters,
                           older=older,
                           bulk=bulk, actions=AUDITED_ACTIONS, unfinished=unfinished)


#: The actions a line can name: a bulk cancel's or skip's start is part of its line.
LINE_ACTIONS = tuple(a for a in AUDITED_ACTIONS if a != "start_bulk")


@bp.get("/audit/actions")
def actions() -> ResponseReturnValue:
    """One line per operator action, newest first: when, who, role, what, how many jobs,
    why, and a link to what it was done to; keyset paging that keeps the filters (actor,
    action, a range of days in UTC)."""
    cfg = settings()
    action = text_filter(request.args.get("action"))
    days = {k: day_filter(request.args.get(k)) for k in ("from", "to")}
    bad = [k for k, v in days.items() if request.args.get(k, "").strip() and v is None]
    filters = {"actor": text_filter(request.args.get("actor")),
               "action": action if action in LINE_ACTIONS else None,
               "since": day_start(days["from"]), "until": day_start(days["to"], after=True)}
    limit = clamp_limit(request.args.get("limit"), cfg["PAGE_SIZE"], cfg["PAGE_SIZE_MAX"])
    rows = page_reads().all(CQ.console_audit_lines_page, **filters,
                        before_id=positive_int(request.args.get("before")), limit=limit + 1)
    next_before = rows[limit - 1]["id"] if len(rows) > limit else None
    keep = {"actor": filters["actor"], "action": filters["action"],
            "from": days["from"], "to": days["to"],
            "limit": limit if limit != cfg["PAGE_SIZE"] else None}
    keep = {k: v for k, v in keep.items() if v}
    older = urlencode({**keep, "before": next_before}) if next_before else None
    return render_template("jobwarden/audit_actions.html", rows=shown(rows[:limit]), older=older,
                           filters=filters, days=days, bad=bad, actions=LINE_ACTIONS,
                           newest=urlencode(keep) if request.args.get("before") else None)


#: What a viewer or an operator reads for an admin's reason about a notification target.
ADMINS_ONLY = "(for admins: notification targets are theirs to see)"


def shown(rows: list[Row]) -> list[Row]:
    """The audit rows as the signed-in user may read them: a notification target's name,
    and the admin's reason (which may well name it or where it points), are an admin's
    business, like the target itself (/notifications is admin-only). A viewer or an
    operator reads that an admin added, edited, tested or deleted a target, and when."""
    if current_user.has_role("admin"):
        return rows
    return [{**r, "notify_target": None, "reason": ADMINS_ONLY}
            if str(r["action"]).endswith("_notify_target") else r for r in rows]


def day_filter(value: str | None) -> date | None:
    """A day given as YYYY-MM-DD, or None for anything else."""
    try:
        return date.fromisoformat((value or "").strip())
    except ValueError:
        return None


def day_start(day: date | None, after: bool = False) -> datetime | None:
    """The UTC midnight that starts `day` (or, `after`, ends it); None for no day, and for
    the end of the last day a date can name (no bound: every later moment is in range)."""
    if day is None:
        return None
    if after:
        if day == date.max:
            return None
        day += timedelta(days=1)
    return datetime.combine(day, time.min, UTC)


def uuid_filter(value: str | None) -> str | None:
    """A bulk action's id, or None for anything that is not a UUID."""
    try:
        return str(uuid.UUID(str(value or "")))
    except ValueError:
        return None
