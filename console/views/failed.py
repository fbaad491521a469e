"""Failed jobs grouped by error code, what is retrying now; drill down; bulk retry or
skip with a preview.

A group's bulk action goes through the review of console/views/bulk.py: the failed jobs
of the group are stored as a selection when the operator asks to review them, and the
action touches exactly those (never jobs failing after the review).
"""

from __future__ import annotations

from datetime import datetime
from typing import TypedDict

from flask import Blueprint, abort, render_template, request, url_for
from flask.typing import ResponseReturnValue

from jobwarden.console.core.config import settings
from jobwarden.console.data.database import CQ
from jobwarden.console.data.queries import (
    RETRYING_CAP,
    JobFilter,
    failed_groups,
    jobs_page,
    not_shown,
    retrying_groups,
    text_filter,
)
from jobwarden.console.web import charts
from jobwarden.console.web.errors import page as error_page
from jobwarden.console.web.reads import page_reads, primary_page
from jobwarden.console.web.security import is_htmx
from jobwarden.worker.ops import operations

bp = Blueprint("failed", __name__)


class TypePreview(TypedDict):
    """A type's failed jobs of every code: what the page reads of a GroupPreview."""

    jobs: int
    seen_until: datetime | None


@bp.get("/failed")
def index() -> ResponseReturnValue:
    """What is retrying now, then one row per error code among failed jobs (of one type
    with `?type=`), the latest activity first."""
    job_type = text_filter(request.args.get("type"))
    if problem := not_shown("type", job_type):  # the same answer, right guess or wrong
        return error_page(400, "Not shown", f"{problem} Nothing was searched.")
    with page_reads().reading() as reader:
        retrying = retrying_groups(reader, job_type=job_type)
        groups = failed_groups(reader, limit=500, job_type=job_type)
    for g in retrying:
        g["spark_chart"] = charts.retry_sparkline(g)
    for g in groups:
        g["spark_chart"] = charts.failed_sparkline(g)
    template = "jobwarden/_failed_groups.html" if is_htmx() else "jobwarden/failed.html"
    return render_template(template, groups=groups, retrying=retrying, job_type=job_type)


@bp.get("/failed/group")
def group() -> ResponseReturnValue:
    """One error code's failed jobs (of one type with `type`; or a type's, any code), its
    types or codes, what of it is retrying now, and the bulk actions with their preview."""
    code = text_filter(request.args.get("code"))
    job_type = text_filter(request.args.get("type"))
    if not code and not job_type:
        abort(404)
    cfg = settings()
    flt = JobFilter.from_args(
        {**request.args.to_dict(), "status": "failed", "error_code": code, "type": job_type},
        cfg["PAGE_SIZE"], cfg["PAGE_SIZE_MAX"])
    if flt.hidden:  # a guess at a code shown as [REDACTED]: the same answer, right or wrong
        return error_page(400, "Not shown", f"{flt.hidden} Nothing was searched.")
    preview: operations.GroupPreview | TypePreview
    # The primary: this page's preview is what its bulk actions will touch.
    with primary_page().reading() as reader:
        if code:
            types = reader.all(CQ.console_failed_group_types, error_code=code)
            codes = []
            preview = operations.preview_group(reader.conn, code, job_type)
        else:
            # A type alone (an alert names one): its failed jobs of every code.
            types = []
            codes = reader.all(CQ.console_failed_type_codes, type=job_type)
            preview = {"jobs": sum(c["jobs"] for c in codes),
                       "seen_until": max((c["last_seen"] for c in codes if c["last_seen"]),
                                         default=None)}
        retrying = [g for g in retrying_groups(reader, job_type=job_type)
                    if code is None or g["error_code"] == code]
        # Every job of the code still waiting for (or running) another attempt, however
        # long ago it last retried: what is not in the bulk action yet.
        retrying_jobs = reader.row(CQ.console_group_retrying, error_code=code,
                                   type=job_type, cap=RETRYING_CAP)["jobs"]
        page = jobs_page(reader, flt)

    def page_link(before: int | None, after: int | None = None) -> str:
        """The group's page at a keyset position (the same signature as the jobs list's)."""
        return url_for("jobwarden.failed.group", code=code, type=job_type, before=before,
                       after=after, limit=flt.limit if flt.limit != cfg["PAGE_SIZE"] else None)

    return render_template("jobwarden/failed_group.html", code=code, job_type=job_type,
                           types=types, codes=codes, retrying=retrying, page=page, flt=flt,
                           preview=preview, page_link=page_link, retrying_jobs=retrying_jobs,
                           retrying_cap=RETRYING_CAP)
