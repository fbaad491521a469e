"""The audit log: every operator action, filterable by actor, action and job."""

from __future__ import annotations

import uuid
from urllib.parse import urlencode

from flask import Blueprint, render_template, request
from flask.typing import ResponseReturnValue

from jobwarden.console.core.config import settings
from jobwarden.console.data.database import CQ
from jobwarden.console.data.queries import clamp_limit, positive_int, text_filter
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
    return render_template("jobwarden/audit.html", rows=rows[:limit], filters=filters, older=older,
                           bulk=bulk, actions=AUDITED_ACTIONS, unfinished=unfinished)


def uuid_filter(value: str | None) -> str | None:
    """A bulk action's id, or None for anything that is not a UUID."""
    try:
        return str(uuid.UUID(str(value or "")))
    except ValueError:
        return None
