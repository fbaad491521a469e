"""Select and act: tick jobs (or all matching a filter), review the set, act with a reason.

The reviewed set is stored server-side (`console_selections` and its pages of ids) when
the operator asks to review it, whatever its size; the confirming form carries only the
selection's id, the reason and the canary. So what the action touches is exactly what the
review showed (minus jobs that moved on), never what a stale or edited form says.

The review breaks the set down by status, type and failure age; narrowing it (a type, a
"failed between" range, an age bucket) stores a new selection holding only those of its
jobs. The action runs in chunks (console/data/bulk.py), optionally after a canary: the
first N (or N%) jobs, whose outcome the page counts from the tables until the operator
continues or stops.

Who runs the chunks: the operator's page, one chunk per request (htmx asks for the next
as soon as one answers; without JavaScript a button does). No thread of the web process
holds the work, and every chunk commits its progress with its jobs, so a console restart
loses nothing: the page's next request (or the operator reopening it) carries on. A
worker duty would run on with the tab closed, but it would put console state into the
runtime and need a worker of the console's version; a bulk action the operator walks
away from simply waits, listed on the audit log, until reopened or stopped.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from jobwarden.console.core.config import settings
from jobwarden.console.data import bulk, flows
from jobwarden.console.data.database import CQ, Reader, Row, get_db
from jobwarden.console.data.queries import JobFilter, not_shown, positive_int, text_filter
from jobwarden.console.data.schema import SELECTION_ACTIONS, SELECTION_PAGE
from jobwarden.console.web.auth import role_required
from jobwarden.console.web.errors import page
from jobwarden.console.web.forms import (
    DEPENDENTS_PROBLEM,
    ActionForm,
    dependents_choice,
    given,
)
from jobwarden.console.web.identity import signed_in
from jobwarden.console.web.reads import primary_page
from jobwarden.console.web.security import is_htmx, safe_next_url
from jobwarden.worker.ops import operations
from jobwarden.worker.store.schema import JOB_STATUSES

bp = Blueprint("bulk", __name__)

#: What a jobs list offers to do with ticked jobs: the selection actions that apply beyond
#: unknown outcomes (those are decided on Needs review).
LIST_ACTIONS = tuple(a for a, froms in operations.SELECTION_FROM.items()
                     if set(froms) - {"unknown"})
#: The canary the review suggests, in jobs.
CANARY_DEFAULT = 100
#: Jobs the page lists by id (the sample of a review, the left-alone ones of a run).
SAMPLE = 50
#: How many jobs' outcome the progress panel may count per second it waits between
#: refreshes (console_bulk_outcome: ~0.2 s for 25,000 jobs, ~1.2 s for 250,000).
OUTCOME_JOBS_PER_SECOND = 10_000


@bp.post("/bulk/select")
@role_required("operator")
def select() -> ResponseReturnValue:
    """Turn ticked ids, or every job matching the filter, into a stored selection."""
    user = signed_in()
    action = request.form.get("action", "")
    back = safe_next_url(request.form.get("next"), url_for("jobwarden.jobs.index"))
    if action not in SELECTION_ACTIONS:
        flash(f"Choose {', '.join(a.replace('_', ' ') for a in SELECTION_ACTIONS)}. "
              "Nothing was changed.", "error")
        return redirect(back, code=303)
    try:
        failed_from, failed_to = _failed_between(request.form)
    except BadTime as problem:
        return page(400, "Bad failure time", str(problem))
    job_ids = None
    filters = None
    if request.form.get("all_matching"):
        status = request.form.get("status") or ""
        if status and status not in JOB_STATUSES:
            # JobFilter drops an unknown status (a list page shows every job): here that
            # would widen the selection to every status, so refuse instead.
            return page(400, "Unknown status", f"Unknown status {status!r}: choose one of "
                        f"{', '.join(JOB_STATUSES)}. Nothing was selected.")
        flt = JobFilter.from_args({**request.form.to_dict(), "before": None, "after": None})
        if flt.bad_flow is not None or flt.bad_batch is not None:
            # JobFilter drops it for a list page's 400; selecting without it would widen
            # the selection to every job.
            return page(400, "Not a job id" if flt.bad_flow is not None else "Not a batch id",
                        f"{flt.hidden} Nothing was selected.")
        if flt.bad_time is not None:  # the same: without its range, every job
            return page(400, "Bad time", f"{flt.bad_time} Nothing was selected.")
        filters = flt.params()
        description = "all jobs matching " + (_describe(flt) or "no filter")
        if request.form.get("eligible_only"):
            # Only the jobs the action starts from (a batch's "cancel what has not run"):
            # the review then counts no job it would leave alone.
            filters["statuses"] = list(operations.SELECTION_FROM[action])
            description += f", only those {', '.join(filters['statuses'])}"
    else:
        ids = {positive_int(v) for v in request.form.getlist("job_id")}
        job_ids = sorted((i for i in ids if i), reverse=True)[:bulk.TICKED_MAX]
        description = f"{len(job_ids)} ticked job(s)"
        if not job_ids:
            flash("No jobs selected. Nothing was changed.", "error")
            return redirect(back, code=303)
    description += _between_note(failed_from, failed_to)
    selection_id = str(uuid.uuid4())
    try:
        with get_db().transaction() as tx:
            tx.run(CQ.console_selection_prune)
            jobs = bulk.create_selection(
                tx, selection_id=selection_id, actor=user.actor, action=action,
                description=description, job_ids=job_ids, filters=filters,
                failed_from=failed_from, failed_to=failed_to,
                time_limit=settings()["BULK_SELECT_SECONDS"])
    except bulk.SelectionTooSlow:
        flash(_too_slow(), "error")
        return redirect(back, code=303)
    if not jobs:
        flash("No jobs selected. Nothing was changed.", "error")
        return redirect(back, code=303)
    return redirect(url_for("jobwarden.bulk.review", selection_id=selection_id, next=back),
                    code=303)


def _selection_id(value: str) -> str:
    """The selection id from the URL; anything that is not a UUID is a 404 (after the
    sign-in check, so the URL reveals nothing to a visitor)."""
    try:
        return str(uuid.UUID(value))
    except ValueError:
        abort(404)


def _selection(reader: Reader, selection_id: str) -> Row:
    user = signed_in()
    sel = reader.one(CQ.console_selection_get, id=selection_id, actor=user.actor)
    if sel is None:
        abort(404)
    return sel


@bp.get("/bulk/<selection_id>")
@role_required("operator")
def review(selection_id: str) -> ResponseReturnValue:
    """Before the action: the stored set, broken down, with the reason box, the canary
    and the narrowing filters. Once started: its progress."""
    selection_id = _selection_id(selection_id)
    back = safe_next_url(request.args.get("next"), url_for("jobwarden.jobs.index"))
    # The primary: the selection was stored there a moment ago, and its breakdown is what
    # the action will touch.
    with primary_page().reading() as reader:
        sel = _selection(reader, selection_id)
        if sel["state"] != "reviewed":
            return render_template("jobwarden/bulk_progress.html", **_progress(reader, sel))
        found = bulk.breakdown(sel)
        sample = reader.row(CQ.console_selection_range, id=selection_id, lo=0, hi=SAMPLE,
                            page=SELECTION_PAGE)["job_ids"]
        preview = flows.dependents_preview(
            reader, sel["action"], list(operations.SELECTION_FROM[sel["action"]]),
            selection_id=selection_id)
    return render_template(
        "jobwarden/bulk.html", sel=sel, past=operations.SELECTION_PAST, found=found,
        preview=preview,
        ages=bulk.AGE_BUCKETS, form=ActionForm.fresh(), sample=sample, next=back,
        canary_default=min(CANARY_DEFAULT, max(sel["jobs"] // 10, 1)),
        chunk=settings()["BULK_CHUNK_SIZE"])


@bp.post("/bulk/<selection_id>/narrow")
@role_required("operator")
def narrow(selection_id: str) -> ResponseReturnValue:
    """A new selection holding only those of this one's jobs of a type, or failed in a
    range of time: its review replaces this one's."""
    user = signed_in()
    selection_id = _selection_id(selection_id)
    back = url_for("jobwarden.bulk.review", selection_id=selection_id)
    with get_db().reading() as reader:
        sel = _selection(reader, selection_id)
    try:
        failed_from, failed_to = _failed_between(request.form)
    except BadTime as problem:
        return page(400, "Bad failure time", str(problem))
    job_type = text_filter(request.form.get("type"))
    if hidden := not_shown("type", job_type):  # the same answer, right guess or wrong
        return page(400, "Not shown", f"{hidden} Nothing was changed.")
    if not (job_type or failed_from or failed_to):
        flash("Give a type or a time range to narrow to. Nothing was changed.", "error")
        return redirect(back, code=303)
    description = sel["description"] + (f", type {job_type}" if job_type else "")
    description += _between_note(failed_from, failed_to)
    narrowed = str(uuid.uuid4())
    try:
        with get_db().transaction() as tx:
            jobs = bulk.create_selection(
                tx, selection_id=narrowed, actor=user.actor, action=sel["action"],
                description=description, within=selection_id, filters={"type": job_type},
                failed_from=failed_from, failed_to=failed_to,
                time_limit=settings()["BULK_SELECT_SECONDS"])
    except bulk.SelectionTooSlow:
        flash(_too_slow(), "error")
        return redirect(back, code=303)
    if not jobs:
        flash("None of the selected jobs is of that type or failed in that range. "
              "Nothing was changed.", "error")
        return redirect(back, code=303)
    return redirect(url_for("jobwarden.bulk.review", selection_id=narrowed,
                            next=request.form.get("next") or None), code=303)


@bp.post("/bulk/<selection_id>")
@role_required("operator")
def apply(selection_id: str) -> ResponseReturnValue:
    """Start the action on exactly the stored set, once, with the operator's reason: all
    of it, or a canary first. Its first chunk runs in this request; a set of one chunk is
    done when the page comes back."""
    user = signed_in()
    selection_id = _selection_id(selection_id)
    form = ActionForm()
    back = url_for("jobwarden.bulk.review", selection_id=selection_id)
    if not form.validate():
        flash("A reason is required (up to 500 characters). Nothing was changed.", "error")
        return redirect(back, code=303)
    dependents = dependents_choice(request.form)
    if dependents is None:
        flash(DEPENDENTS_PROBLEM, "error")
        return redirect(back, code=303)
    db = get_db()
    with db.reading() as reader:
        sel = reader.one(CQ.console_selection_get, id=selection_id, actor=user.actor)
    canary = None
    if sel is not None and sel["usable"] and request.form.get("mode") == "canary":
        try:
            canary = bulk.parse_canary(request.form.get("canary"), sel["jobs"])
        except ValueError as problem:
            flash(str(problem), "error")
            return redirect(back, code=303)
    with db.transaction() as tx:
        started = tx.one(CQ.console_selection_start, id=selection_id,
                         actor=user.actor, reason=bulk.stored_reason(given(form.reason)),
                         request_id=form.request_id.data, canary=canary)
        if started is not None and "dependents" in request.form:
            # The choice the review offered, kept for every chunk and audited once.
            tx.run(CQ.console_bulk_dependents_record, id=selection_id, actor=user.actor,
                   role=user.role, dependents=dependents)
    if started is None:
        # Someone else's selection reads as expired (it reveals nothing); this one's own
        # resubmission says what the first submission did.
        with db.reading() as reader:
            sel = reader.one(CQ.console_selection_get, id=selection_id,
                             actor=user.actor)
        if sel is not None and sel["request_id"] == form.request_id.data:
            flash(f"Already done: this {sel['action'].replace('_', ' ')} was started at "
                  f"{sel['used_at']:%H:%M:%S} by {user.actor}; it was not repeated.",
                  "ok")
            return redirect(back, code=303)
        flash("This selection was already used or has expired: select again. "
              "Nothing was changed.", "error")
        return redirect(url_for("jobwarden.jobs.index"), code=303)
    done = _run_chunk(selection_id)
    if done is not None and done.state == "done":
        with db.reading() as reader:
            sel = _selection(reader, selection_id)
        ok, message = _summary(sel)
        flash(message, "ok" if ok else "error")
        if ok:
            return redirect(url_for("jobwarden.audit.index", bulk=selection_id), code=303)
    return redirect(back, code=303)


@bp.post("/bulk/<selection_id>/step")
@role_required("operator")
def step(selection_id: str) -> ResponseReturnValue:
    """Do the action's next chunk (the page's htmx asks for one after another)."""
    selection_id = _selection_id(selection_id)
    done = _run_chunk(selection_id)
    if done is None:  # nothing to do now, or not this operator's selection (404)
        with get_db().reading() as reader:
            _selection(reader, selection_id)
    if not is_htmx():
        return redirect(url_for("jobwarden.bulk.review", selection_id=selection_id), code=303)
    return _progress_fragment(selection_id, busy=done is None)


@bp.get("/bulk/<selection_id>/_progress")
@role_required("operator")
def progress(selection_id: str) -> ResponseReturnValue:
    """The progress panel (polled while a canary's jobs run and the operator decides)."""
    return _progress_fragment(_selection_id(selection_id))


@bp.post("/bulk/<selection_id>/continue")
@role_required("operator")
def resume(selection_id: str) -> ResponseReturnValue:
    """After the canary: act on the rest of the set. Past a failed canary only with the
    form's explicit `despite_failed_canary` (its checkbox), checked against the canary as
    it stands now, not as the page showed it."""
    user = signed_in()
    selection_id = _selection_id(selection_id)
    back = url_for("jobwarden.bulk.review", selection_id=selection_id)
    with get_db().reading() as reader:
        _selection(reader, selection_id)
    try:
        went_on = bulk.continue_after_canary(
            get_db(), selection_id, actor=user.actor, role=user.role,
            despite_failed_canary=request.form.get("despite_failed_canary") == "1")
    except bulk.CanaryFailed as refused:
        flash(_canary_failed_message(refused.outcome), "error")
        return redirect(back, code=303)
    if went_on is None:
        flash("The canary is not done yet, or the action was continued or stopped: "
              "nothing was changed.", "error")
    else:
        _run_chunk(selection_id)
    return redirect(back, code=303)


def _canary_failed_message(result: bulk.Outcome) -> str:
    canary = result.canary or bulk.Part(0, {}, [])
    codes = ", ".join(f"{r['error_code'] or '(no code)'} {r['jobs']}"
                      for r in canary.by_code if r["status"] == "failed")
    return (f"The canary failed: {canary.failed} of its {canary.jobs} retried job(s) failed "
            f"again ({codes}). Stop here, or tick \"Continue despite the failed canary\" "
            "to retry the rest anyway. Nothing was changed.")


@bp.post("/bulk/<selection_id>/stop")
@role_required("operator")
def stop(selection_id: str) -> ResponseReturnValue:
    """Stop the action where it is, with the operator's reason (audited): the chunks done
    stay done, none other starts."""
    user = signed_in()
    selection_id = _selection_id(selection_id)
    back = url_for("jobwarden.bulk.review", selection_id=selection_id)
    form = ActionForm()
    with get_db().reading() as reader:
        _selection(reader, selection_id)
    if not form.validate():
        flash("A reason is required to stop (up to 500 characters). Nothing was changed.",
              "error")
        return redirect(back, code=303)
    with get_db().transaction() as tx:
        stopped = tx.one(CQ.console_bulk_stop, id=selection_id, actor=user.actor,
                         role=user.role, reason=bulk.stored_reason(given(form.reason)),
                         request_id=form.request_id.data)
    if stopped is None:
        flash("This bulk action had already ended: nothing was changed.", "error")
    return redirect(back, code=303)


def _run_chunk(selection_id: str) -> bulk.Chunk | None:
    user = signed_in()
    return bulk.run_chunk(get_db(), selection_id, actor=user.actor,
                          role=user.role, chunk=settings()["BULK_CHUNK_SIZE"])


def _progress_fragment(selection_id: str, busy: bool = False) -> str:
    with primary_page().reading() as reader:
        context = _progress(reader, _selection(reader, selection_id), busy)
    return render_template("jobwarden/_bulk_progress.html", **context)


def _progress(reader: Reader, sel: Row, busy: bool = False) -> dict[str, Any]:
    """What the progress page shows: the totals, the outcome of the jobs it changed (the
    canary's, and once ended the whole set's) counted from the tables, the jobs left
    alone, and whether the page should ask for the next chunk or refresh itself."""
    ended = sel["state"] in ("done", "stopped")
    # While it runs, the canary's outcome alone; the whole set's once it has ended.
    result = bulk.outcome(reader, sel, whole=ended) if sel["state"] != "reviewed" else None
    left_alone = (reader.row(CQ.console_bulk_left_alone_sample, id=sel["id"],
                             limit=SAMPLE)["job_ids"] if sel["left_alone"] else [])
    limit = sel["canary"] if sel["state"] == "canary" else sel["jobs"]
    return {
        "sel": sel, "outcome": result, "left_alone_ids": left_alone,
        "past": operations.SELECTION_PAST, "busy": busy,
        # More chunks to do now: the page asks for the next at once (later when another
        # request of the same action holds its lock).
        "driving": sel["state"] in ("canary", "running") and sel["next_ord"] < limit,
        "deciding": sel["state"] == "canary" and sel["next_ord"] >= (sel["canary"] or 0),
        # Ended, with jobs it changed still to end (a retry's, run by the workers): the
        # whole set's outcome keeps refreshing until every one has ended.
        "settling": ended and result is not None and result.whole.not_ended > 0,
        "ended": ended,
        # Counting the outcome reads each job once (~0.2 s for 25,000): a big set's panel
        # refreshes less often, one second per OUTCOME_JOBS_PER_SECOND jobs at least.
        "poll_seconds": max(settings()["JOB_POLL_SECONDS"],
                            math.ceil((sel["canary"] or 0) / OUTCOME_JOBS_PER_SECOND)),
        "settle_seconds": max(settings()["OVERVIEW_POLL_SECONDS"],
                              math.ceil(sel["changed"] / OUTCOME_JOBS_PER_SECOND)),
        "stop_request_id": uuid.uuid4().hex,
    }


def _too_slow() -> str:
    return (f"Selecting these jobs took longer than {settings()['BULK_SELECT_SECONDS']:g} s "
            "(a few million jobs): narrow the filter, e.g. to a type or an error code. "
            "Nothing was selected.")


def _summary(sel: Row) -> tuple[bool, str]:
    past = operations.SELECTION_PAST[sel["action"]]
    if not sel["changed"]:
        return False, (f"None of the {sel['jobs']} selected job(s) could be {past}: they had "
                       "moved on. Nothing was changed.")
    note = (f"; {sel['left_alone']} had moved on and were left alone"
            if sel["left_alone"] else "")
    return True, f"{past.capitalize()} {sel['changed']} of {sel['jobs']} selected job(s){note}."


class BadTime(ValueError):
    """A "failed between" time the console cannot take: answered with a 400."""


def _failed_between(form: Mapping[str, str]) -> tuple[datetime | None, datetime | None]:
    """The "failed between" range of a form (`failed_from`, `failed_to`): times given
    as YYYY-MM-DDTHH:MM[:SS] in UTC (the zone the console shows), or with an offset."""
    bounds: list[datetime | None] = []
    for name in ("failed_from", "failed_to"):
        text = (form.get(name) or "").strip()
        if not text:
            bounds.append(None)
            continue
        try:
            moment = datetime.fromisoformat(text[:40])
        except ValueError:
            raise BadTime(f"Give the failure times as YYYY-MM-DDTHH:MM (UTC) or with an "
                          f"offset, not {text[:40]!r}. Nothing was changed.") from None
        try:
            # In UTC now: an offset can carry a moment past year 9999 or before year 1,
            # which no later step could then show or compare.
            moment = (moment if moment.utcoffset() is not None
                      else moment.replace(tzinfo=UTC)).astimezone(UTC)
        except OverflowError:
            raise BadTime(f"Give failure times from 0001-01-01 to 9999-12-31T23:59:59 in UTC, "
                          f"not {text[:40]!r}. Nothing was changed.") from None
        bounds.append(moment)
    if bounds[0] and bounds[1] and bounds[0] >= bounds[1]:
        raise BadTime("The range's start must come before its end. Nothing was changed.")
    return bounds[0], bounds[1]


def _between_note(failed_from: datetime | None, failed_to: datetime | None) -> str:
    """How a selection's description names its "failed between" range."""
    parts = [f"{label} {moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
             for label, moment in (("from", failed_from), ("before", failed_to)) if moment]
    return ", failed " + " and ".join(parts) if parts else ""


def _describe(flt: JobFilter) -> str:
    parts = [f"{k}={v}" for k, v in (("status", flt.status), ("queue", flt.queue),
                                     ("type", flt.type), ("error code", flt.error_code),
                                     ("search", flt.q), ("flow of job", flt.flow),
                                     ("batch", flt.batch)) if v]
    if flt.created.given:
        parts.append(flt.created.describe())
    return ", ".join(parts)
