"""Needs review: jobs whose outcome is unknown, in groups, with their reconcile actions.

The groups (one type, one error code, one reconciler's verdict: console/data/review.py)
come first, each with its count and its decisions: mark completed, mark failed, retry or
skip every job of the group through the bulk review (console/views/bulk.py: the set
stored, its breakdown, a reason, optionally a canary, audited). Below, the cards of
the jobs (of one group with `?of=ID`), each with its payload (redacted) and ambiguous
error and one reason box for its four decisions; ticked cards can be decided together.
"""

from __future__ import annotations

import uuid

from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from jobwarden.console.core.config import settings
from jobwarden.console.data import bulk, review
from jobwarden.console.data.database import CQ, get_db
from jobwarden.console.data.queries import clamp_limit, positive_int
from jobwarden.console.web.auth import role_required
from jobwarden.console.web.errors import page
from jobwarden.console.web.forms import ActionForm, given
from jobwarden.console.web.identity import current_user, signed_in
from jobwarden.console.web.reads import page_reads
from jobwarden.worker.ops.operations import ALLOWED_FROM
from jobwarden.worker.ops.reconcile import request_reconcile

bp = Blueprint("review", __name__)
#: What an operator can decide about an ambiguous outcome: the actions allowed from
#: unknown, the two verdicts (mark_completed, mark_failed) first.
RECONCILE = tuple(sorted((a for a, froms in ALLOWED_FROM.items() if "unknown" in froms),
                         key=lambda a: not a.startswith("mark_")))


@bp.get("/review")
def index() -> ResponseReturnValue:
    """The unknown jobs' groups, then their cards (of one group with `of`), newest first,
    each with its reconcile forms."""
    cfg = settings()
    limit = clamp_limit(request.args.get("limit"), cfg["PAGE_SIZE"], cfg["PAGE_SIZE_MAX"])
    of = request.args.get("of")
    of_id = positive_int(of) if of else None
    if of and of_id is None:
        return page(400, "Not a job id", f"A group is named by one of its jobs' ids (a "
                    f"whole number from 1 to {2**63 - 1}), not {of[:30]!r}.")
    group = None
    with page_reads().reading() as reader:
        groups = review.groups(reader)
        if of_id is not None:
            group = review.group_of(reader, of_id)
        rows = [] if of_id is not None and group is None else reader.all(
            CQ.console_unknown_jobs, **(group.params() if group else review.EVERY),
            before_id=positive_int(request.args.get("before")), limit=limit + 1)
    next_before = rows[limit - 1]["id"] if len(rows) > limit else None
    rows = rows[:limit]
    actions = list(RECONCILE)
    forms = {}
    run_form = None
    if current_user.can_act:
        # One reason box per job, for its four decisions (each button posts to its action).
        forms = {job["id"]: ActionForm.fresh("unknown", retried_at=job["retried_at"])
                 for job in rows}
        run_form = ActionForm.fresh()  # acts on no one job: no status or retry seen
    return render_template("jobwarden/review.html", jobs=rows, actions=actions, forms=forms,
                           next_before=next_before, limit=limit, run_form=run_form,
                           groups=groups, group=group, of_id=of_id,
                           verdicts=review.VERDICTS, groups_max=review.GROUPS_MAX)


@bp.post("/review/group")
@role_required("operator")
def decide_group() -> ResponseReturnValue:
    """Store the jobs of a group still unknown as a selection for `action`, and open its
    review: exactly those jobs are acted on, with a reason, once."""
    user = signed_in()
    action = request.form.get("action", "")
    of_id = positive_int(request.form.get("of"))
    back = url_for("jobwarden.review.index")
    if action not in RECONCILE:
        flash(f"Choose {', '.join(a.replace('_', ' ') for a in RECONCILE)}. Nothing was "
              "changed.", "error")
        return redirect(back, code=303)
    if of_id is None:
        return page(400, "Not a job id", "A group is named by one of its jobs' ids. "
                    "Nothing was selected.")
    selection_id = str(uuid.uuid4())
    try:
        with get_db().transaction() as tx:
            group = review.group_of(tx, of_id)
            jobs = 0
            if group is not None:
                tx.run(CQ.console_selection_prune)
                jobs = bulk.create_selection(
                    tx, selection_id=selection_id, actor=user.actor, action=action,
                    description=group.describe(),
                    filters={"status": "unknown", **group.params()},
                    time_limit=settings()["BULK_SELECT_SECONDS"])
    except bulk.SelectionTooSlow:
        flash(f"Selecting this group took longer than {settings()['BULK_SELECT_SECONDS']:g} s: "
              "decide it from its cards. Nothing was selected.", "error")
        return redirect(back, code=303)
    if not jobs:
        # The job named the group: once it is decided, its group is unknown here (choose
        # another of its jobs from the refreshed list).
        flash(f"Job #{of_id} is not unknown any more: its group may have been decided "
              "meanwhile. Nothing was changed.", "error")
        return redirect(back, code=303)
    return redirect(url_for("jobwarden.bulk.review", selection_id=selection_id,
                            next=url_for("jobwarden.review.index", of=of_id)), code=303)


@bp.post("/review/reconcile")
@role_required("operator")
def run_reconcilers() -> ResponseReturnValue:
    """Ask a worker to run the job types' reconcilers: the console imports no application
    code, so it enqueues a `jobwarden.reconcile` job of yours (worker/ops/reconcile.py,
    request_reconcile): the request is audited now, each decision as yours when it runs."""
    user = signed_in()
    form = ActionForm()
    if not form.validate():
        flash("A reason is required (up to 500 characters). Nothing was changed.", "error")
        return redirect(url_for("jobwarden.review.index"), code=303)
    with get_db().transaction() as tx:
        job_id = request_reconcile(tx.conn, actor=user.actor, role=user.role,
                                   reason=given(form.reason), request_id=form.request_id.data)
    flash(f"Reconcilers requested (job #{job_id}): a worker with the handlers runs them; "
          "settled jobs leave this page.", "ok")
    return redirect(url_for("jobwarden.review.index"), code=303)
