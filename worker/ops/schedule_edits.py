"""An admin's schedules (docs/guide/workers.md, "Editing schedules in the console"): add a
schedule to a published job type, edit one, remove a console edit, each audited with its
reason like every operator action.

Code declares the default (`@job(..., schedule=...)`); a console edit wins over it until
an admin removes the edit, and the schedule goes back to the declaration (a schedule
added in the console, declared nowhere, is deleted). Workers read `job_schedules` on
every pass, so a change reaches them without a restart; a worker starting later writes
its declaration beside the edit, not over it (worker/store/sql/schedules.sql).

Only admins: a schedule decides what work is enqueued, how often, with what payload.
Every save is checked as the worker checks (worker/jobs/cron.py, one parser), and more:
at most one tick a minute, a tick within cronsim's horizon, the payload a JSON object
the enqueue would store, within its byte bound. A save starts the schedule from its next
tick after now: no backlog, whatever catch-up says (catch-up governs later downtime).

An edit or a removal names the revision the admin saw (compare-and-set): a schedule
changed meanwhile (another admin, a deploy changing its declaration) is refused, never
overwritten unseen. Functions run in the caller's transaction; ValueError says in one
line what was refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jobwarden.worker.jobs.cron import check_edit, next_tick, schedule_problem
from jobwarden.worker.jobs.enqueue import encode_payload, max_payload_bytes
from jobwarden.worker.jobs.registry import check_name
from jobwarden.worker.ops.operations import ActionResult, _check, _rows
from jobwarden.worker.store.queries import CallerConnection, Q

#: Who may change schedules.
ADMIN = "admin"
#: The longest cron expression and zone name a schedule may hold.
CRON_MAX, ZONE_MAX = 200, 64


@dataclass(frozen=True)
class ScheduleEdit:
    """A schedule as the admin wants it: `payload` is the JSON text typed in the form."""
    cron: str
    timezone: str
    catch_up: bool
    payload: str


def _admin(actor: str, role: str, reason: str) -> str:
    if role != ADMIN:
        raise PermissionError("only an admin may change schedules")
    return _check(actor, role, reason)


def checked(job_type: str, edit: ScheduleEdit, now: datetime) -> dict[str, Any]:
    """The edit's statement parameters, or ValueError naming the first thing refused."""
    check_name("job type", job_type)
    cron, tz = edit.cron.strip(), edit.timezone.strip()
    if not cron or len(cron) > CRON_MAX:
        raise ValueError(f"a cron expression is 1 to {CRON_MAX} characters")
    if not tz or len(tz) > ZONE_MAX:
        raise ValueError(f"a time zone is 1 to {ZONE_MAX} characters")
    check_edit(job_type, cron, tz, now)
    limit = max_payload_bytes()
    if len(edit.payload.encode()) > 4 * limit:  # before parsing: bound the work
        raise ValueError(f"payload: larger than {limit} bytes")
    try:
        payload = json.loads(edit.payload or "{}")
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"payload: not JSON ({str(exc).splitlines()[0][:120]})") from None
    # The enqueue's own checks: an object, storable text, finite numbers, nesting, size.
    text = encode_payload(payload, limit)
    return {"type": job_type, "cron": cron, "timezone": tz, "catch_up": bool(edit.catch_up),
            "payload": text, "next_run_at": next_tick(cron, tz, now)}


def add_schedule(conn: CallerConnection, job_type: str, edit: ScheduleEdit, *, actor: str,
                 role: str, reason: str, request_id: str | None = None) -> ActionResult:
    """A schedule for a published job type that has none yet."""
    reason = _admin(actor, role, reason)
    state = _rows(conn, Q.schedule_for_edit, {"type": job_type})[0]
    params = checked(job_type, edit, state["db_now"])
    if not state["known"]:
        raise ValueError(f"no worker has published job type {job_type!r}")
    rows = _rows(conn, Q.schedule_add, {**params, "actor": actor, "role": role,
                                        "reason": reason, "request_id": request_id})
    if not rows:
        return ActionResult(False, "add_schedule", 0,
                            f"Job type {job_type!r} has a schedule already: edit it instead. "
                            "Nothing was added.")
    return ActionResult(True, "add_schedule", 0,
                        f"Schedule {job_type!r} added; it first runs at "
                        f"{params['next_run_at'].isoformat()} (UTC).")


def edit_schedule(conn: CallerConnection, job_type: str, revision: int, edit: ScheduleEdit, *,
                  actor: str, role: str, reason: str,
                  request_id: str | None = None) -> ActionResult:
    """Change a schedule still at `revision`; it wins over the code's declaration."""
    reason = _admin(actor, role, reason)
    state = _rows(conn, Q.schedule_for_edit, {"type": job_type})[0]
    params = checked(job_type, edit, state["db_now"])
    rows = _rows(conn, Q.schedule_edit, {**params, "revision": revision, "actor": actor,
                                         "role": role, "reason": reason,
                                         "request_id": request_id})
    if not rows:
        return ActionResult(False, "edit_schedule", 0, f"Not saved: {_why(conn, job_type)}.")
    return ActionResult(True, "edit_schedule", 0,
                        f"Schedule {job_type!r} saved; it next runs at "
                        f"{params['next_run_at'].isoformat()} (UTC).")


def remove_schedule(conn: CallerConnection, job_type: str, revision: int, *, actor: str,
                    role: str, reason: str, request_id: str | None = None) -> ActionResult:
    """Remove a schedule's console edit, still at `revision`: back to its declaration in
    code, or gone when no code declares it."""
    reason = _admin(actor, role, reason)
    check_name("job type", job_type)
    state = _rows(conn, Q.schedule_for_edit, {"type": job_type})[0]
    declared = state["declared"] if state["revision"] == revision else None
    following = state["db_now"]  # a declaration this process cannot read: due, skipped
    if declared and not schedule_problem(job_type, declared["cron"], declared["timezone"]):
        following = next_tick(declared["cron"], declared["timezone"], state["db_now"])
    rows = _rows(conn, Q.schedule_remove, {
        "type": job_type, "revision": revision, "reverted_next_run_at": following,
        "actor": actor, "role": role, "reason": reason, "request_id": request_id})
    if not rows:
        why = ("it is declared in code and has no console edit to remove: change the code, "
               "or pause it" if state["type"] and state["edited_by"] is None
               and state["revision"] == revision else _why(conn, job_type))
        return ActionResult(False, "remove_schedule", 0, f"Not removed: {why}.")
    if rows[0]["back_to_code"]:
        return ActionResult(True, "remove_schedule", 0,
                            f"Schedule {job_type!r} is back to its declaration in code.")
    return ActionResult(True, "remove_schedule", 0, f"Schedule {job_type!r} removed.")


def _why(conn: CallerConnection, job_type: str) -> str:
    state = _rows(conn, Q.schedule_for_edit, {"type": job_type})[0]
    if state["type"] is None:
        return f"schedule {job_type!r} is gone"
    return (f"schedule {job_type!r} was changed since you opened it (by another admin or a "
            "deploy): reload the page and edit again")
