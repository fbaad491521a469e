"""Batches: the list (newest first, by owner key) and one batch's page — its progress by
state with a bar, its moments, its callbacks and the jobs they became (console/data/batches.py).

A batch page never lists its members: its counts link to the jobs list filtered to them
(`/jobs?batch=ID`), and its two actions — retry the failed members, cancel those that
have not run — select them for the bulk review of console/views/bulk.py, like a failed
group's retry: the review stores exactly those jobs, shows their breakdown, takes a
reason and offers a canary, and the action is audited.
"""

from __future__ import annotations

from flask import Blueprint, abort, render_template, request, url_for
from flask.typing import ResponseReturnValue

from jobwarden.console.core.config import settings
from jobwarden.console.data import batches
from jobwarden.console.data.queries import clamp_limit, not_shown, positive_int, text_filter
from jobwarden.console.web.batchbar import progress_bar
from jobwarden.console.web.errors import page
from jobwarden.console.web.reads import page_reads
from jobwarden.worker.ops.operations import SELECTION_FROM

bp = Blueprint("batches", __name__)

#: What a state of the bar lists in the jobs list (unfinished: the statuses not final).
STATE_STATUSES = {"completed": "completed", "failed": "failed", "cancelled": "cancelled",
                  "skipped": "skipped", "unknown": "unknown", "unfinished": None}
#: The statuses "Cancel what has not run" acts on: a bulk cancel's (pending, which holds
#: the scheduled ones, and waiting); a running member is asked to stop from its page.
NOT_RUN = SELECTION_FROM["cancel"]


def batch_id(value: str) -> int | None:
    """A batch's id from the URL or a filter: 1 to 2**63 - 1 in ASCII digits, else None."""
    value = value.strip()
    return positive_int(value) if value.isascii() and value.isdigit() else None


def bad_id(value: str) -> ResponseReturnValue:
    return page(400, "Not a batch id", f"A batch is named by its id (a whole number from 1 "
                f"to {2**63 - 1}), not {value[:30]!r}.")


@bp.get("/batches")
def index() -> ResponseReturnValue:
    """Batches, newest first, of one owner key with `?owner=`, each with its progress."""
    cfg = settings()
    owner = text_filter(request.args.get("owner"))
    limit = clamp_limit(request.args.get("limit"), cfg["PAGE_SIZE"], cfg["PAGE_SIZE_MAX"])
    before_text = request.args.get("before") or ""
    before = batch_id(before_text) if before_text else None
    if before_text and before is None:
        return bad_id(before_text)
    if problem := not_shown("owner key", owner):
        # Every page shows an owner key as the redactor does: matching one it hides would
        # tell whether a guess at a secret is right.
        return page(400, "Not shown", problem)
    with page_reads().reading() as reader:
        found = batches.page(reader, owner=owner, before=before, limit=limit)
    shown_limit = limit if limit != cfg["PAGE_SIZE"] else None

    def link(position: int | None) -> str:
        return url_for("jobwarden.batches.index", owner=owner, limit=shown_limit,
                       before=position)

    return render_template(
        "jobwarden/batches.html", found=found, owner=owner, states=batches.PROGRESS_STATES,
        bar=lambda row: progress_bar(row["progress"], size=(160, 10), testid="batch-row-bar"),
        older=link(found.next_before) if found.next_before else None,
        newest=link(None) if before else None)


@bp.get("/batches/<value>")
def detail(value: str) -> ResponseReturnValue:
    """One batch: its progress, moments and callbacks, and its actions for operators."""
    wanted = batch_id(value)
    if wanted is None:
        return bad_id(value)
    with page_reads().reading() as reader:
        found = batches.read(reader, wanted)
    if found is None:
        abort(404)

    def members(state: str | None = None) -> str:
        """The jobs list of the members in `state` (every member: None); "" for the
        unfinished, which no one status names."""
        if state is not None and STATE_STATUSES[state] is None:
            return ""
        return url_for("jobwarden.jobs.index", batch=wanted,
                       status=STATE_STATUSES[state] if state else None)

    return render_template("jobwarden/batch.html", b=found.batch, progress=found.progress,
                           callbacks=found.callbacks, states=batches.PROGRESS_STATES,
                           members=members, not_run=NOT_RUN,
                           bar=progress_bar(found.progress, members))
