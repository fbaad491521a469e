"""Operator actions on jobs: retry, cancel, skip, reconcile — one job or a failed group —
on queues and schedules: pause and resume; and live limits of queues and types (maximum
concurrency, rate): set and clear.

Every action is a compare-and-set (docs/architecture.md §2): it changes only jobs still
in a state the action allows, and writes one `job_audit` row per changed job in the same
statement. A completed job is never resurrected; an action racing a worker loses cleanly
and says why.

Functions run in the caller's transaction (`conn` is a psycopg Connection or a
SQLAlchemy Connection); the caller commits. They never raise for a refused action:
they return an `ActionResult` whose `ok` is False and whose `message` explains.

Double submissions: pass the form's one-time `request_id`. If audit rows with that id
already exist, the action is reported as already done instead of acting twice.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from jobwarden.worker.core.rates import MAX_RATE, describe_rate, parse_rate
from jobwarden.worker.core.sanitize import redact
from jobwarden.worker.core.states import JobStatus
from jobwarden.worker.core.storable import storable_text
from jobwarden.worker.jobs.cron import next_tick, schedule_problem
from jobwarden.worker.jobs.enqueue import enqueue
from jobwarden.worker.jobs.registry import check_name
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import CallerConnection, Q, Query

#: Roles allowed to act (viewers only read).
ACTING_ROLES = ("operator", "admin")
REASON_MAX = 500

#: Which statuses each action may start from (GoodJob-style whitelist per state).
ALLOWED_FROM: dict[str, tuple[JobStatus, ...]] = {
    "retry": (JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.UNKNOWN),
    "cancel": (JobStatus.PENDING, JobStatus.WAITING, JobStatus.RUNNING),
    "skip": (JobStatus.PENDING, JobStatus.WAITING, JobStatus.FAILED, JobStatus.UNKNOWN),
    "mark_completed": (JobStatus.UNKNOWN,),
    "mark_failed": (JobStatus.UNKNOWN,),
}
#: Every action a job_audit row can name, in the order the audit log's filter offers them:
#: the job actions above, a cancel asked of a running job, run now / reschedule, and the
#: queue and schedule (worker/store/sql/schedules.sql) controls, a schedule run now among
#: them; the live limits; a bulk cancel or skip started with a dependents choice, a bulk
#: action continued after its canary, and one stopped (console/data/sql/bulk.sql); a
#: reconciler's verdict that left a job unknown (worker/ops/reconcile.py); an admin's
#: notification targets (worker/ops/notify_targets.py).
AUDITED_ACTIONS = ("retry", "cancel", "request_cancel", "skip", "mark_completed",
                   "mark_failed", "run_now", "reschedule", "pause_queue", "resume_queue",
                   "pause_schedule", "resume_schedule", "run_schedule", "set_limit",
                   "clear_limit", "start_bulk", "continue_bulk", "stop_bulk", "reconcile",
                   "request_reconcile",
                   "add_notify_target", "edit_notify_target", "delete_notify_target",
                   "test_notify_target", "add_schedule", "edit_schedule",
                   "remove_schedule")
#: The status a terminal action moves a job to.
TARGET_STATUS = {"skip": JobStatus.SKIPPED, "mark_completed": JobStatus.COMPLETED,
                 "mark_failed": JobStatus.FAILED}


#: What an operator's cancel or skip of a parent does to the jobs waiting for it
#: (docs/guide/flows.md): hold them (they stay waiting, shown as held by it: a retry of
#: the parent resumes the flow), cancel them (and theirs in turn, through every edge that
#: is not run_anyway), or release them as if the parent had completed.
DEPENDENTS_CHOICES = ("hold", "cancel", "release")
#: The actions that take that choice.
TAKES_DEPENDENTS = ("cancel", "skip")


@dataclass(frozen=True)
class ActionResult:
    ok: bool
    action: str
    jobs: int
    message: str
    duplicate: bool = False


@dataclass(frozen=True)
class GroupPreview:
    error_code: str
    job_type: str | None
    jobs: int
    seen_until: datetime | None
    types: tuple[str, ...]


def allowed_actions(status: str, cancel_requested: bool = False) -> tuple[str, ...]:
    """The actions an operator may take on a job in `status` (for showing buttons)."""
    actions = tuple(a for a, froms in ALLOWED_FROM.items() if status in froms)
    if status == "running" and cancel_requested:
        actions = tuple(a for a in actions if a != "cancel")
    return actions


def retry_job(conn: CallerConnection, job_id: int, *, actor: str, role: str, reason: str,
              request_id: str | None = None, expected_status: str | None = None,
              seen_retried_at: datetime | None = None) -> ActionResult:
    """Put a failed, cancelled or unknown job back for a new execution: pending, or
    waiting while edges of its are not released (a parent not completed yet).
    `seen_retried_at` (every job action takes it): when the job had last been retried
    as the operator saw it (RETRIED_NEVER: not at all); a job retried since is refused,
    whatever status it reached again."""
    return _act_on_job(conn, "retry", job_id, actor, role, reason, request_id, expected_status,
                       seen_retried_at=seen_retried_at)


def cancel_job(conn: CallerConnection, job_id: int, *, actor: str, role: str, reason: str,
               request_id: str | None = None, expected_status: str | None = None,
               dependents: str = "hold", seen_retried_at: datetime | None = None
               ) -> ActionResult:
    """Cancel a pending or waiting job, or ask the worker running it to stop
    (cooperative). `dependents`: what becomes of the jobs waiting for it
    (DEPENDENTS_CHOICES), decided in the same transaction and audited with it."""
    return _act_on_job(conn, "cancel", job_id, actor, role, reason, request_id, expected_status,
                       dependents, seen_retried_at)


def skip_job(conn: CallerConnection, job_id: int, *, actor: str, role: str, reason: str,
             request_id: str | None = None, expected_status: str | None = None,
             dependents: str = "hold", seen_retried_at: datetime | None = None
             ) -> ActionResult:
    """Mark a pending, waiting, failed or unknown job as skipped (no longer relevant).
    `dependents` as for cancel_job."""
    return _act_on_job(conn, "skip", job_id, actor, role, reason, request_id, expected_status,
                       dependents, seen_retried_at)


def mark_completed(conn: CallerConnection, job_id: int, *, actor: str, role: str, reason: str,
                   request_id: str | None = None,
                   seen_retried_at: datetime | None = None) -> ActionResult:
    """Reconcile an unknown job whose effect the operator verified did happen."""
    return _act_on_job(conn, "mark_completed", job_id, actor, role, reason, request_id, None,
                       seen_retried_at=seen_retried_at)


def mark_failed(conn: CallerConnection, job_id: int, *, actor: str, role: str, reason: str,
                request_id: str | None = None,
                seen_retried_at: datetime | None = None) -> ActionResult:
    """Reconcile an unknown job whose effect the operator verified did not happen."""
    return _act_on_job(conn, "mark_failed", job_id, actor, role, reason, request_id, None,
                       seen_retried_at=seen_retried_at)


#: `seen_retried_at` for a job the operator saw never retried: any retry since is later.
RETRIED_NEVER = datetime.min.replace(tzinfo=UTC)


#: How far a reschedule may move a job, from the database's now: a time before it is
#: most likely a typo (year 0001 makes every age alert fire), one beyond it a wrong year.
RESCHEDULE_EARLIEST = timedelta(days=1)
RESCHEDULE_LATEST = timedelta(days=365)


def reschedule_job(conn: CallerConnection, job_id: int, *, actor: str, role: str, reason: str,
                   run_at: datetime | None = None,
                   request_id: str | None = None) -> ActionResult:
    """Run a pending job now (run_at None) or move it to `run_at` (aware, at most
    RESCHEDULE_EARLIEST before now and RESCHEDULE_LATEST after), with its audit row."""
    action = "run_now" if run_at is None else "reschedule"
    reason = _check(actor, role, reason)
    if run_at is not None and run_at.utcoffset() is None:
        raise ValueError("run_at needs a time zone (a naive time is ambiguous)")
    if request_id and (done := _already_done(conn, action, request_id, actor,
                                             job_id=int(job_id))):
        return done
    row = _rows(conn, Q.operator_job_reschedule, {
        "job_id": int(job_id), "run_at": run_at, "actor": actor, "role": role,
        "action": action, "reason": reason, "request_id": request_id,
        "earliest": RESCHEDULE_EARLIEST, "latest": RESCHEDULE_LATEST})[0]
    moved_to = "now" if run_at is None else _utc(run_at)
    if not row["in_window"]:
        return ActionResult(False, action, 0,
                            f"Job #{job_id} was not moved: choose a time not before one day "
                            f"ago nor after one year from now (not {moved_to}). "
                            "Nothing was changed.")
    if not row["jobs"]:
        return ActionResult(False, action, 0,
                            f"Job #{job_id} is no longer pending: nothing was changed.")
    when = "now" if run_at is None else f"at {moved_to}"
    return ActionResult(True, action, 1, f"Job #{job_id} will run {when}.")


def _utc(moment: datetime) -> str:
    try:
        return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
    except OverflowError:  # year 1 with a positive offset lies before datetime.min in UTC
        return moment.isoformat()


JOB_ACTIONS = {
    "retry": retry_job,
    "cancel": cancel_job,
    "skip": skip_job,
    "mark_completed": mark_completed,
    "mark_failed": mark_failed,
}


def preview_group(conn: CallerConnection, error_code: str,
                  job_type: str | None = None) -> GroupPreview:
    """How many failed jobs with `error_code` (and `job_type`) a bulk action would touch."""
    row = _rows(conn, Q.operator_group_preview,
                {"error_code": error_code, "job_type": job_type or None})[0]
    return GroupPreview(error_code, job_type or None, row["jobs"], row["seen_until"],
                        tuple(row["types"] or ()))


def retry_group(conn: CallerConnection, error_code: str, *, actor: str, role: str, reason: str,
                seen_until: datetime | None, job_type: str | None = None,
                request_id: str | None = None) -> ActionResult:
    """Retry every failed job of an error code that failed no later than `seen_until`."""
    return _act_on_group(conn, "retry", error_code, job_type, seen_until,
                         actor, role, reason, request_id)


def skip_group(conn: CallerConnection, error_code: str, *, actor: str, role: str, reason: str,
               seen_until: datetime | None, job_type: str | None = None,
               request_id: str | None = None) -> ActionResult:
    """Skip every failed job of an error code that failed no later than `seen_until`."""
    return _act_on_group(conn, "skip", error_code, job_type, seen_until,
                         actor, role, reason, request_id)


GROUP_ACTIONS = {"retry": retry_group, "skip": skip_group}

#: Which statuses a bulk action on a reviewed selection may start from: cancelling a
#: selection cancels its pending jobs (a running job is asked to stop one at a time).
SELECTION_FROM: dict[str, tuple[str, ...]] = {
    "retry": ALLOWED_FROM["retry"], "cancel": ("pending", "waiting"),
    "skip": ALLOWED_FROM["skip"],
    "mark_completed": ALLOWED_FROM["mark_completed"], "mark_failed": ALLOWED_FROM["mark_failed"],
}


def act_on_selection(conn: CallerConnection, action: str, job_ids: list[int], *, actor: str,
                     role: str, reason: str, bulk_id: str,
                     request_id: str | None = None,
                     selected_statuses: list[str | None] | None = None,
                     selected_at: datetime | None = None,
                     dependents: str = "hold") -> ActionResult:
    """Retry, cancel, skip or reconcile exactly `job_ids` (those still in a state the
    action allows). `dependents`: what a cancel or skip does to the jobs waiting for
    them (DEPENDENTS_CHOICES).

    A reviewed selection passes how each job stood when it was selected: its status
    (`selected_statuses`, in the order of `job_ids`; None when not known) and the
    moment (`selected_at`). A job is then acted on only in that status and if no
    operator retried it since: the review promised that jobs changed since are left
    alone, and "a status the action allows" is wider (a skip reviewed as failed would
    skip a job another operator retried meanwhile, now pending).

    One statement, one audit row per changed job, all sharing `bulk_id`: the audit log
    shows the bulk action's actor, reason and count.
    """
    if action not in SELECTION_FROM:
        raise ValueError(f"no bulk action {action!r}")
    if selected_statuses is not None and len(selected_statuses) != len(job_ids):
        raise ValueError("selected_statuses must give one status per job id")
    if selected_statuses is not None and None in selected_statuses:
        selected_statuses = None  # stored before migration 0071: any allowed status
    reason = _check(actor, role, reason)
    _check_dependents(dependents)
    if request_id and (done := _already_done(conn, action, request_id, actor, bulk_id=bulk_id)):
        return done
    params = _params(action, actor, role, reason, request_id,
                     job_ids=[int(i) for i in job_ids], bulk_id=bulk_id,
                     from_statuses=list(SELECTION_FROM[action]),
                     selected_statuses=selected_statuses, selected_at=selected_at,
                     details=json.dumps({"bulk": True, "selected": len(job_ids),
                                         "dependents": dependents}))
    if action == "retry":
        row = _retry(conn, params)
    else:
        to_status = "cancelled" if action == "cancel" else TARGET_STATUS[action]
        row = _rows(conn, Q.operator_jobs_transition, {**params, "to_status": to_status})[0]
    jobs = row["jobs"]
    if not jobs:
        return ActionResult(False, action, 0, f"None of the {len(job_ids)} selected job(s) "
                            f"can be {_PAST[action]} now: nothing was changed.")
    left = len(job_ids) - jobs
    note = f"; {left} had moved on and were left alone" if left else ""
    flow = _decide_dependents(conn, action, params["job_ids"], dependents, params)
    _count_batch_members(conn)
    return ActionResult(True, action, jobs,
                        f"{_PAST[action].capitalize()} {jobs} of {len(job_ids)} selected "
                        f"job(s){note}{_waiting_note(row)}.{flow}")


def already_done(conn: CallerConnection, action: str, request_id: str, actor: str,
                 bulk_id: str) -> ActionResult | None:
    """The earlier result of the bulk form for selection `bulk_id` that `actor` submitted
    twice (its audit rows carry `request_id` and `bulk_id`)."""
    return _already_done(conn, action, request_id, actor, bulk_id=bulk_id) if request_id else None


SELECTION_PAST = _PAST = {"retry": "retried", "cancel": "cancelled", "skip": "skipped",
         "mark_completed": "marked completed", "mark_failed": "marked failed"}


def pause_queue(conn: CallerConnection, queue: str, *, actor: str, role: str, reason: str,
                request_id: str | None = None, new: bool = False) -> ActionResult:
    """Stop workers from claiming the queue's jobs (running ones finish). Audited.

    Refused for a queue nothing names (no job, published job type, worker or earlier
    pause: most likely a typo) unless `new`, e.g. to hold a queue before its first deploy.
    """
    return _set_paused(conn, queue, True, actor, role, reason, request_id, new)


def resume_queue(conn: CallerConnection, queue: str, *, actor: str, role: str, reason: str,
                 request_id: str | None = None) -> ActionResult:
    """Let workers claim the queue's jobs again, and wake them. Audited. Refused for a
    queue nothing names; a queue never paused is left alone."""
    return _set_paused(conn, queue, False, actor, role, reason, request_id)


QUEUE_ACTIONS = {"pause": pause_queue, "resume": resume_queue}


def pause_schedule(conn: CallerConnection, job_type: str, *, actor: str, role: str, reason: str,
                   request_id: str | None = None) -> ActionResult:
    """Stop a schedule enqueueing its ticks (jobs already enqueued stay). Audited."""
    return _set_schedule_paused(conn, job_type, True, actor, role, reason, request_id)


def resume_schedule(conn: CallerConnection, job_type: str, *, actor: str, role: str, reason: str,
                    request_id: str | None = None) -> ActionResult:
    """Let a schedule enqueue again from its next tick after now (none of the ticks it
    was paused through). Audited."""
    return _set_schedule_paused(conn, job_type, False, actor, role, reason, request_id)


def run_schedule_now(conn: CallerConnection, job_type: str, *, actor: str, role: str,
                     reason: str, request_id: str | None = None) -> ActionResult:
    """Enqueue a schedule's job now, with its payload, as an extra run: its ticks stay as
    they were (paused or not). The job becomes the schedule's last run; audited."""
    action = "run_schedule"
    checked = _schedule_to_act_on(conn, action, job_type, actor, role, reason, request_id)
    if isinstance(checked, ActionResult):
        return checked
    reason, s = checked
    job_id = enqueue(conn, job_type, s["payload"])
    _rows(conn, Q.schedule_ran_now, {"type": job_type, "job_id": job_id, "actor": actor,
                                     "role": role, "reason": reason, "request_id": request_id})
    note = " Its schedule stays paused." if s["paused"] else ""
    return ActionResult(True, action, 1,
                        f"Schedule {job_type!r}: job #{job_id} enqueued to run now.{note}")


SCHEDULE_ACTIONS = {"pause": pause_schedule, "resume": resume_schedule,
                    "run": run_schedule_now}


def set_all_queues(conn: CallerConnection, verb: str, *, actor: str, role: str, reason: str
                   ) -> list[ActionResult]:
    """Pause (`verb="pause"`) or resume every queue the database knows, each audited.

    Pausing names every queue of a job, a published type, a worker or an earlier control,
    so a restored database can start with nothing claimed; resuming lifts every pause.
    A queue already in that state is left alone (its result says so).
    """
    if verb == "pause":
        queues = [row["queue"] for row in _rows(conn, Q.queues_known, {})]
    else:
        queues = [q for q, row in queue_controls(conn).items() if row["paused"]]
    return [QUEUE_ACTIONS[verb](conn, q, actor=actor, role=role, reason=reason)
            for q in queues]


def queue_controls(conn: CallerConnection) -> dict[str, dict[str, Any]]:
    """Queue name -> {paused, changed_by, changed_at} for every queue ever paused."""
    return {row["queue"]: row for row in _rows(conn, Q.queue_controls_list, {})}


# -- internals ---------------------------------------------------------------------------

def _act_on_job(conn: CallerConnection, action: str, job_id: int, actor: str, role: str,
                reason: str, request_id: str | None,
                expected_status: str | None, dependents: str = "hold",
                seen_retried_at: datetime | None = None) -> ActionResult:
    reason = _check(actor, role, reason)
    _check_dependents(dependents)
    if request_id and (done := _already_done(conn, action, request_id, actor,
                                             job_id=int(job_id))):
        return done
    # Not retried since the operator looked: the guard a reviewed selection has
    # (selected_at), so a job that was retried and came back to the status seen (failed
    # again, unknown again) is not acted on for a failure the operator never saw.
    params = _params(action, actor, role, reason, request_id, job_id=int(job_id),
                     expected_status=expected_status or None, selected_at=seen_retried_at)
    if action in ("cancel", "skip"):
        params["details"] = json.dumps({"dependents": dependents})
    if action == "cancel":
        row = _rows(conn, Q.operator_jobs_transition, {
            **params, "from_statuses": ["pending", "waiting"], "to_status": "cancelled"})[0]
        if row["jobs"] == 0 and expected_status in (None, "running"):
            row = _rows(conn, Q.operator_job_request_cancel, params)[0]
            if row["jobs"]:
                return ActionResult(True, action, 1,
                                    f"Cancel requested for running job #{job_id}; "
                                    "its worker stops it at the next heartbeat.")
    elif action == "retry":
        row = _retry(conn, params)
    else:
        row = _rows(conn, Q.operator_jobs_transition,
                    {**params, "to_status": TARGET_STATUS[action]})[0]
    if row["jobs"]:
        note = _decide_dependents(conn, action, [int(job_id)], dependents, params)
        _count_batch_members(conn)
        said = _DONE["retry_waiting" if action == "retry" and row["waiting"] else action]
        return ActionResult(True, action, 1,
                            said.format(job_id=job_id, parents=row.get("waiting_on")) + note)
    # A concurrent submission of the same form may have won the race just now.
    if request_id and (done := _already_done(conn, action, request_id, actor,
                                             job_id=int(job_id))):
        return done
    return ActionResult(False, action, 0, _explain_refusal(conn, action, job_id, expected_status,
                                                           seen_retried_at))


def _act_on_group(conn: CallerConnection, action: str, error_code: str, job_type: str | None,
                  seen_until: datetime | None, actor: str, role: str, reason: str,
                  request_id: str | None) -> ActionResult:
    reason = _check(actor, role, reason)
    if not error_code:
        raise ValueError("a group action needs an error code")
    if request_id and (done := _already_done(conn, action, request_id, actor,
                                             error_code=error_code, job_type=job_type or None)):
        return done
    params = _params(action, actor, role, reason, request_id, error_code=error_code,
                     job_type=job_type or None, seen_until=seen_until,
                     bulk_id=str(uuid.uuid4()), from_statuses=["failed"],
                     details=json.dumps({"bulk": True, "error_code": error_code,
                                         "job_type": job_type or None}))
    if action == "retry":
        row = _retry(conn, params)
    else:
        row = _rows(conn, Q.operator_jobs_transition,
                    {**params, "to_status": TARGET_STATUS[action]})[0]
    jobs = row["jobs"]
    if jobs:
        _count_batch_members(conn)
    label = f"{error_code}" + (f" / {job_type}" if job_type else "")
    if not jobs:
        return ActionResult(False, action, 0,
                            f"No failed jobs left in group {label}: nothing was changed.")
    verb = "Retried" if action == "retry" else "Skipped"
    return ActionResult(True, action, jobs, f"{verb} {jobs} failed job(s) of group "
                        f"{label}{_waiting_note(row)}.")


def _set_paused(conn: CallerConnection, queue: str, paused: bool, actor: str, role: str,
                reason: str, request_id: str | None, new: bool = False) -> ActionResult:
    action = "pause_queue" if paused else "resume_queue"
    reason = _check(actor, role, reason)
    check_name("queue", queue)
    if request_id and (done := _already_done(conn, action, request_id, actor, queue=queue)):
        return done
    row = _rows(conn, Q.operator_queue_set_paused, {
        "queue": queue, "paused": paused, "actor": actor, "role": role, "action": action,
        "reason": reason, "request_id": request_id, "new": new})[0]
    if not row["known"]:
        return ActionResult(False, action, 0, f"Queue {queue!r} is unknown: no job, published "
                            "job type, worker or earlier pause names it. Nothing was changed.")
    state = "paused" if paused else "active"
    if not row["changed"]:
        return ActionResult(False, action, 0, f"Queue {queue!r} is already {state}.")
    if paused:
        return ActionResult(True, action, 0, f"Queue {queue!r} is paused: workers claim none "
                                             "of its jobs until it is resumed.")
    return ActionResult(True, action, 0, f"Queue {queue!r} is active again.")


def _schedule_to_act_on(conn: CallerConnection, action: str, job_type: str, actor: str,
                        role: str, reason: str, request_id: str | None
                        ) -> ActionResult | tuple[str, dict[str, Any]]:
    """What every schedule action checks first (role, reason, name, a form submitted
    again, the schedule's row): the reason to record and the row, or the answer."""
    reason = _check(actor, role, reason)
    check_name("schedule", job_type)
    if request_id and (done := _already_done(conn, action, request_id, actor,
                                             schedule=job_type)):
        return done
    found = _rows(conn, Q.schedules_get, {"type": job_type})
    if not found:
        return ActionResult(False, action, 0, f"Schedule {job_type!r} does not exist. "
                                              "Nothing was changed.")
    return reason, found[0]


def _set_schedule_paused(conn: CallerConnection, job_type: str, paused: bool, actor: str,
                         role: str, reason: str, request_id: str | None) -> ActionResult:
    action = "pause_schedule" if paused else "resume_schedule"
    checked = _schedule_to_act_on(conn, action, job_type, actor, role, reason, request_id)
    if isinstance(checked, ActionResult):
        return checked
    reason, s = checked
    # A row this process cannot read is still paused and resumed (it keeps next_run_at):
    # the operator must be able to stop and start it whatever its state.
    problem = schedule_problem(job_type, s["cron"], s["timezone"])
    following = None if problem else next_tick(s["cron"], s["timezone"], s["db_now"])
    row = _rows(conn, Q.schedule_set_paused, {
        "type": job_type, "paused": paused, "actor": actor, "role": role, "reason": reason,
        "request_id": request_id, "next_run_at": following})[0]
    state = "paused" if paused else "active"
    if not row["changed"]:
        return ActionResult(False, action, 0, f"Schedule {job_type!r} is already {state}.")
    note = f" It is broken and stays skipped until fixed: {problem}." if problem else ""
    return ActionResult(True, action, 0, f"Schedule {job_type!r} is {state}.{note}")


#: What a live limit applies to: a queue, or a job type (docs/guide/rate-limits.md).
LIMIT_SCOPES = ("queue", "type")
#: Highest live maximum concurrency (0 holds the scope's work, like a pause).
MAX_LIVE_CONCURRENCY = 100_000


class UnknownQueue(ValueError):
    """A live limit named a queue nothing names: a likely typo, refused (`new` allows it)."""


class UnknownType(ValueError):
    """A live limit named a job type nothing names: a likely typo, refused (`new` allows
    it)."""


def set_limit(conn: CallerConnection, scope: str, name: str, *, actor: str, role: str,
              reason: str, max_concurrency: int | None = None, rate: str | float | None = None,
              burst: int | None = None, request_id: str | None = None,
              new: bool = False) -> ActionResult:
    """Set a queue's or a type's live limit: at most `max_concurrency` of its jobs claimed
    or running at once, and/or `rate` ("100/s", "600/m", or jobs per second) with a bucket
    of `burst` jobs (one second's worth unless given). It replaces the previous live limit
    of that scope (what it replaced goes in the audit row) and wins over the type's
    declaration until cleared; every worker applies it within a few seconds
    (worker/engine/limits.py). Audited."""
    action = "set_limit"
    reason = _check(actor, role, reason)
    target = _limit_target(scope, name)
    if max_concurrency is not None and (
            not isinstance(max_concurrency, int) or isinstance(max_concurrency, bool)
            or not 0 <= max_concurrency <= MAX_LIVE_CONCURRENCY):
        raise ValueError(f"a maximum concurrency is a whole number from 0 to "
                         f"{MAX_LIVE_CONCURRENCY}")
    per_second = None if rate is None else parse_rate(rate)
    if burst is not None and (not isinstance(burst, int) or isinstance(burst, bool)
                              or not 1 <= burst <= MAX_RATE):
        raise ValueError("a burst is a whole number of jobs, at least 1")
    if burst is not None and per_second is None:
        raise ValueError("a burst needs a rate")
    if max_concurrency is None and per_second is None:
        raise ValueError("a limit needs a maximum concurrency, a rate or both")
    if request_id and (done := _already_done(conn, action, request_id, actor,
                                             limit_target=target)):
        return done
    # As a pause refuses it (from the CLI and the console alike): a typo must not pass
    # for a limited queue or type. `new` limits one before its first job.
    if scope == "queue" and not new and not JobStore(conn).one(Q.queue_known, {"queue": name})[0]:
        raise UnknownQueue(f"queue {name!r} is unknown: no job, published job type, worker, "
                           "pause or live limit names it")
    if scope == "type" and not new and not JobStore(conn).one(Q.type_known, {"type": name})[0]:
        raise UnknownType(f"job type {name!r} is unknown: no job, published job type or "
                          "live limit names it")
    _rows(conn, Q.operator_limit_set, {
        "scope": scope, "name": name, "max_concurrency": max_concurrency,
        "rate": per_second, "burst": None if burst is None else float(burst),
        "actor": actor, "role": role, "reason": reason, "request_id": request_id})
    parts = []
    if max_concurrency is not None:
        parts.append(f"at most {max_concurrency} at once")
    if per_second is not None:
        parts.append(f"{describe_rate(per_second)}"
                     + (f" (burst {burst})" if burst is not None else ""))
    return ActionResult(True, action, 0, f"{scope.capitalize()} {name!r} is limited to "
                        f"{' and '.join(parts)}; workers apply it within seconds.")


def clear_limit(conn: CallerConnection, scope: str, name: str, *, actor: str, role: str,
                reason: str, request_id: str | None = None) -> ActionResult:
    """Clear a queue's or a type's live limit: the declared limit (if any) holds again
    on every worker within a few seconds. Audited; no live limit, nothing changes."""
    action = "clear_limit"
    reason = _check(actor, role, reason)
    target = _limit_target(scope, name)
    if request_id and (done := _already_done(conn, action, request_id, actor,
                                             limit_target=target)):
        return done
    row = _rows(conn, Q.operator_limit_clear, {
        "scope": scope, "name": name, "actor": actor, "role": role, "reason": reason,
        "request_id": request_id})[0]
    if not row["changed"]:
        return ActionResult(False, action, 0, f"{scope.capitalize()} {name!r} has no live "
                                              "limit. Nothing was changed.")
    return ActionResult(True, action, 0, f"The live limit of {scope} {name!r} is cleared; "
                                         "its declared limit (if any) holds again.")


def live_limits(conn: CallerConnection) -> list[dict[str, Any]]:
    """Every live limit: scope, name, max_concurrency, rate, burst, reason, set_by,
    set_role, set_at."""
    return _rows(conn, Q.limit_controls_list, {})


def _limit_target(scope: str, name: str) -> str:
    if scope not in LIMIT_SCOPES:
        raise ValueError(f"a limit applies to a queue or a type, not {scope!r}")
    check_name("queue" if scope == "queue" else "job type", name)
    return f"{scope}:{name}"


def _check(actor: str, role: str, reason: str) -> str:
    if role not in ACTING_ROLES:
        raise PermissionError(f"role {role!r} may not act on jobs")
    if not actor:
        raise ValueError("an action needs an actor")
    reason = (storable_text(reason) or "").strip()
    if not reason:
        raise ValueError("an action needs a reason")
    # Redacted before it is stored (a pasted ticket may carry a password), then capped:
    # cutting first could leave half a secret the redactor no longer recognises.
    return redact(reason)[:REASON_MAX]


def _check_dependents(dependents: str) -> None:
    if dependents not in DEPENDENTS_CHOICES:
        raise ValueError(f"dependents must be one of {', '.join(DEPENDENTS_CHOICES)}, "
                         f"not {dependents!r}")


def _decide_dependents(conn: CallerConnection, action: str, job_ids: list[int],
                       dependents: str, params: dict[str, Any]) -> str:
    """After `action` moved `job_ids` (in the caller's transaction): release the jobs
    waiting for those now completed, and apply the operator's `dependents` choice to those
    now cancelled or skipped; jobs it cancels get audit rows of their own. The statements
    act only on parents in the status that calls for it, so ids the action left alone
    change nothing. Returns a note for the result's message ('' when nothing moved)."""
    if action not in ("cancel", "skip", "mark_completed", "mark_failed"):
        return ""
    cancelled: list[int] = []
    if action in ("cancel", "skip") and dependents == "cancel":
        cancelled = [r["id"] for r in _rows(conn, Q.cancel_dependents, {
            **params, "parent_ids": job_ids})]
    # A cancelled dependent's own run_anyway dependents run now, like its parent's.
    released = _rows(conn, Q.release_dependents, {
        "parent_ids": job_ids + cancelled,
        "as_completed": action in ("cancel", "skip") and dependents == "release"})
    parts = []
    if cancelled:
        parts.append(f"{len(cancelled)} waiting dependent(s) cancelled with it")
    if released:
        parts.append(f"{len(released)} dependent(s) released to run")
    return f" {'; '.join(parts).capitalize()}." if parts else ""


#: Members counted per statement after an operator's action (a selection may hold more).
COUNT_CHUNK = 10_000


def _count_batch_members(conn: CallerConnection) -> None:
    """After an action moved jobs (in the caller's transaction): count the members of a
    batch among them into their batches, in the same transaction, enqueueing the
    callbacks that came due (a retried member is open again; a cancelled or skipped one
    is final). They are the members whose status differs from what they were counted as,
    found through a partial index that holds only those: no look-up per job moved."""
    while True:
        ids = [r["id"] for r in _rows(conn, Q.batch_uncounted, {"limit": COUNT_CHUNK})]
        if ids:
            _rows(conn, Q.batch_count, {"job_ids": ids, "close_ids": None})
        if len(ids) < COUNT_CHUNK:
            return


def _params(action: str, actor: str, role: str, reason: str, request_id: str | None,
            **selection: Any) -> dict[str, Any]:
    params = {
        "action": action, "actor": actor, "role": role, "reason": reason,
        "request_id": request_id, "bulk_id": None, "details": None,
        "job_id": None, "job_ids": None, "error_code": None, "job_type": None, "seen_until": None,
        "expected_status": None, "from_statuses": list(ALLOWED_FROM[action]),
        "selected_statuses": None, "selected_at": None,
    }
    params.update(selection)
    return params


def _already_done(conn: CallerConnection, action: str, request_id: str, actor: str, *,
                  job_id: int | None = None, error_code: str | None = None,
                  job_type: str | None = None, queue: str | None = None, bulk_id: str | None = None,
                  schedule: str | None = None, limit_target: str | None = None
                  ) -> ActionResult | None:
    """The earlier result if this very form (same request id, action, actor and target:
    one job, a group, a selection's `bulk_id`, a queue or a schedule) was already
    submitted; a request id reused for anything else suppresses nothing."""
    rows = _rows(conn, Q.operator_audit_by_request, {
        "request_id": request_id, "action": action, "actor": actor, "job_id": job_id,
        "error_code": error_code, "job_type": job_type, "queue": queue, "bulk_id": bulk_id,
        "schedule": schedule, "limit_target": limit_target})
    if not rows:
        return None
    prior = rows[0]
    return ActionResult(True, action, 0,
                        f"Already done: this {prior['action']} was recorded at "
                        f"{prior['at']:%H:%M:%S} by {prior['actor']}; it was not repeated.",
                        duplicate=True)


def _explain_refusal(conn: CallerConnection, action: str, job_id: int,
                     expected_status: str | None,
                     seen_retried_at: datetime | None = None) -> str:
    rows = _rows(conn, Q.operator_job_state, {"job_id": job_id})
    if not rows:
        return f"Job #{job_id} does not exist."
    job = rows[0]
    status = job["status"]
    if expected_status and status != expected_status:
        return (f"Job #{job_id} is now {status} (it was {expected_status} when you looked): "
                f"nothing was changed. Review it and act again if still needed.")
    if seen_retried_at and job["retried_at"] and job["retried_at"] > seen_retried_at:
        return (f"Job #{job_id} was retried by {job['retried_by']} at "
                f"{job['retried_at']:%Y-%m-%d %H:%M:%S} UTC, after you looked, and is "
                f"{status} again: nothing was changed. Review it and act again if still "
                "needed.")
    if action == "cancel" and status == "running" and job["cancel_requested_at"]:
        return f"Cancel was already requested for running job #{job_id}."
    if action == "retry" and status in ALLOWED_FROM["retry"] and job["live_holder_id"]:
        return (f"Job #{job_id} was not retried: job #{job['live_holder_id']} is live with the "
                f"same idempotency key {job['idempotency_key']!r}.")
    allowed = ", ".join(ALLOWED_FROM[action])
    return (f"Job #{job_id} is {status}: {action.replace('_', ' ')} applies only to "
            f"{allowed} jobs. Nothing was changed.")


_DONE = {
    "retry": "Job #{job_id} is back in pending; a worker will run it again.",
    "retry_waiting": "Job #{job_id} is back in waiting: it runs once its {parents} "
                     "parent(s) not yet released complete.",
    "cancel": "Job #{job_id} was cancelled.",
    "skip": "Job #{job_id} was skipped.",
    "mark_completed": "Job #{job_id} was marked completed.",
    "mark_failed": "Job #{job_id} was marked failed.",
}


def _retry(conn: CallerConnection, params: dict[str, Any]) -> dict[str, Any]:
    """Retry the jobs `params` select: lock them (in id order), then move them, in a
    statement whose snapshot is taken once they are held, to pending, or to waiting when
    edges of theirs are not released (docs/guide/flows.md). A release that locked one of
    them first has committed by then and is counted; one that comes later waits for this
    transaction and decrements the count it wrote. Returns the retry's row (`jobs`,
    `waiting`, `waiting_on`)."""
    locked = [r["id"] for r in _rows(conn, Q.operator_jobs_lock_for_retry, params)]
    return _rows(conn, Q.operator_jobs_retry, {**params, "job_ids": locked})[0]


def _waiting_note(row: dict[str, Any]) -> str:
    """What a bulk retry's message adds for the jobs it sent back to waiting."""
    waiting = row.get("waiting") or 0
    return f"; {waiting} wait for parents not completed yet" if waiting else ""


def _rows(conn: CallerConnection, query: Query, params: dict[str, Any]) -> list[dict[str, Any]]:
    """A named query's rows as dicts, on the caller's (SQLAlchemy or psycopg) connection."""
    return JobStore(conn).dicts(query, params)
