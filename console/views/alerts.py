"""The overview's Alerts panel (firing / ok): the conditions of
deploy/prometheus/jobwarden.rules.yml, read now.

The console has no time series, so each condition is read from the tables at once
instead of held for minutes as the Prometheus rules do: a condition shows as firing
from its first reading. Thresholds are the rules' (docs/operations.md §2). Each row says
its condition and links to the views of its cause, the pages the rules' `console_url`
annotations open (`/failed/group?code=…&type=…`, `/sla#sla-…`, `/queues#queue-…`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from flask import Blueprint, render_template
from flask.typing import ResponseReturnValue

from jobwarden.console.core import live_workers
from jobwarden.console.core.config import settings
from jobwarden.console.data.database import CQ, Row, get_db
from jobwarden.console.views.metrics import Recent
from jobwarden.console.web.formatting import age
from jobwarden.worker.core.notices import STORM_MIN_RETRIES, STORM_SHARE

bp = Blueprint("alerts", __name__)

FAILED_RATE = 0.10
FAILED_MIN_EXECUTIONS = 20
#: The outcomes of an execution that failed: its job retried, failed for good, timed out
#: or ended unknown (a lost worker is not the handler failing: see Stale heartbeats).
FAILED_OUTCOMES = ("retry", "failed", "unknown", "timeout")
#: A retry storm: over half of a type's executions retried with one code, 20 or more
#: (the notifier tells the same condition: worker/core/notices.py).
GROWING_MIN_DEPTH = 50
USUAL_MIN_COMPLETIONS = 60
XMIN_HELD_S = 300
DEAD_TUPLES_MIN = 100_000


def read_alerts() -> list[Alert]:
    cfg = settings()
    with get_db().reading() as reader:
        recent = Recent.read(reader, stale_s=cfg["STALE_HEARTBEAT_SECONDS"],
                             sla_configured=cfg["SLA_TARGETS"])
        workers = reader.all(CQ.console_workers_list, gone_s=cfg["WORKER_GONE_SECONDS"],
                             limit=1000)
        flow = reader.all(CQ.alerts_queue_flow)
        completions = reader.one(CQ.alerts_completions_usual) or {}
    return evaluate(recent, workers, flow, completions)


@bp.get("/_overview/alerts")
def panel() -> ResponseReturnValue:
    """The Alerts panel alone, for its own polling."""
    return render_template("jobwarden/_alerts.html", alerts=read_alerts())


@dataclass(frozen=True)
class Link:
    """A console view an alert row links to: an endpoint with its arguments, and the
    element of the page to scroll to."""

    label: str
    endpoint: str
    args: tuple[tuple[str, str], ...] = ()
    anchor: str | None = None


@dataclass(frozen=True)
class Alert:
    name: str
    title: str
    firing: bool
    detail: str
    #: When it fires, in words: thresholds and minimum samples as the rule has them.
    condition: str = ""
    #: The views of what fires (or, when nothing does, the page where it would show).
    links: tuple[Link, ...] = ()


def evaluate(recent: Recent, workers: list[Row], flow: list[Row],
             completions: Row) -> list[Alert]:
    """Every alert with firing / ok and a line saying why; `recent` is metrics.Recent."""
    return [_failed_rate(recent), _retry_storm(recent), _pending_over_sla(recent),
            _stale(recent), _no_live_worker(recent, workers), _growing(recent, flow),
            _completions_dropped(completions), _horizon_held(recent), _dead_tuples(recent),
            _flow_held_over_sla(recent)]


def group_link(job_type: str, code: str) -> Link:
    """The failed group of a code and type (a type alone when the code is empty)."""
    args = (("code", code), ("type", job_type)) if code else (("type", job_type),)
    return Link(f"{code or '(no code)'} · {job_type}", "jobwarden.failed.group", args)


def _by_type(recent: Recent, outcomes: tuple[str, ...],
             ) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
    """Executions of the last 5 minutes per type, and those with `outcomes` per (type,
    error code)."""
    totals: dict[str, int] = defaultdict(int)
    matching: dict[tuple[str, str], int] = defaultdict(int)
    for row in recent.executions:
        totals[row["type"]] += row["executions"]
        if row["outcome"] in outcomes:
            matching[(row["type"], row.get("error_code") or "")] += row["executions"]
    return totals, matching


def _failed_rate(recent: Recent) -> Alert:
    totals, by_code = _by_type(recent, FAILED_OUTCOMES)
    failed: dict[str, int] = defaultdict(int)
    for (t, _code), n in by_code.items():
        failed[t] += n
    over = sorted(t for t, n in totals.items()
                  if n >= FAILED_MIN_EXECUTIONS and failed[t] / n > FAILED_RATE)

    def codes(t: str) -> list[tuple[str, int]]:
        return sorted(((c, n) for (ty, c), n in by_code.items() if ty == t),
                      key=lambda cn: (-cn[1], cn[0]))

    detail = ", ".join(
        f"{t} {failed[t] / totals[t]:.0%} of {totals[t]} ("
        + ", ".join(f"{c or '(no code)'} {n}" for c, n in codes(t)) + ")" for t in over)
    detail = detail or (f"no type with {FAILED_MIN_EXECUTIONS}+ executions over "
                        f"{FAILED_RATE:.0%} in the last 5 minutes")
    # Types under the minimum are not judged (as in the rule): say so, rather than
    # "no type over 10%" beside a type failing 1 of 2.
    unjudged = sorted(f"{t} {failed[t]} of {n}" for t, n in totals.items()
                      if n < FAILED_MIN_EXECUTIONS and failed[t])
    if unjudged:
        detail += (f"; under {FAILED_MIN_EXECUTIONS} executions, not judged: "
                   + ", ".join(unjudged) + " failed")
    links = tuple(group_link(t, c) for t in over for c, _n in codes(t))
    return Alert("JobwardenFailedRateHigh", "Failed rate", bool(over), detail,
                 f"over {FAILED_RATE:.0%} of a type's executions of the last 5 minutes "
                 "failed (retried, failed for good, timed out or ended unknown), judged "
                 f"on {FAILED_MIN_EXECUTIONS} executions or more",
                 links or (Link("Failed", "jobwarden.failed.index"),))


def _retry_storm(recent: Recent) -> Alert:
    totals, retried = _by_type(recent, ("retry",))
    storms = sorted(((t, c, n) for (t, c), n in retried.items()
                     if n >= STORM_MIN_RETRIES and n / totals[t] > STORM_SHARE),
                    key=lambda s: (-s[2], s[0], s[1]))
    detail = ", ".join(f"{t} {n} of {totals[t]} retried with {c or '(no code)'}"
                       for t, c, n in storms)
    return Alert("JobwardenRetryStorm", "Retry storm", bool(storms),
                 detail or "no type's executions keep going back for another attempt",
                 f"over {STORM_SHARE:.0%} of a type's executions of the last 5 minutes "
                 f"went back for another attempt with one error code, {STORM_MIN_RETRIES} "
                 "or more of them",
                 tuple(group_link(t, c) for t, c, _n in storms)
                 or (Link("Retrying now", "jobwarden.failed.index", anchor="retrying-now"),))


def _pending_over_sla(recent: Recent) -> Alert:
    over = sorted((r["type"], float(r["oldest_pending_s"]))
                  for r in recent.runnable
                  if r["type"] in recent.slas
                  and float(r["oldest_pending_s"] or 0) > recent.slas[r["type"]])
    detail = ", ".join(f"{t} waited {s:.0f}s (SLA {recent.slas[t]:.0f}s)" for t, s in over)
    return Alert("JobwardenPendingOverSLA", "Pending over SLA", bool(over),
                 detail or "every type's oldest pending job is within its SLA",
                 "a type's oldest runnable job has waited longer than its SLA target",
                 tuple(Link(t, "jobwarden.sla.index", anchor=f"sla-{t}") for t, _s in over)
                 or (Link("SLA", "jobwarden.sla.index"),))


def _flow_held_over_sla(recent: Recent) -> Alert:
    over = sorted((r["type"], float(r["held_s"]), r["longest_id"])
                  for r in recent.flows
                  if r["held"] and r["type"] in recent.slas
                  and float(r["held_s"]) > recent.slas[r["type"]])
    detail = ", ".join(f"{t} held {s:.0f}s (SLA {recent.slas[t]:.0f}s)" for t, s, _i in over)
    return Alert("JobwardenFlowHeldOverSLA", "Flow held over SLA", bool(over),
                 detail or "no waiting job is held by a failed parent past its type's SLA",
                 "a waiting job has been held by a parent that failed, was cancelled or "
                 "skipped, or ended unknown longer than its type's SLA target",
                 tuple(Link(f"flow of #{i}", "jobwarden.flows.detail", (("value", str(i)),))
                       for _t, _s, i in over)
                 or (Link("Waiting jobs", "jobwarden.jobs.index", (("status", "waiting"),)),))


def _stale(recent: Recent) -> Alert:
    stale = sum(r["stale"] for r in recent.stale)
    return Alert("JobwardenStaleHeartbeats", "Stale heartbeats", stale > 0,
                 f"{stale} running job(s) without a fresh heartbeat" if stale
                 else "every running job has a fresh heartbeat",
                 "running jobs have had no heartbeat past the stale threshold",
                 (Link("Stale running jobs", "jobwarden.overview.index",
                       anchor="overview-health"),))


def _runnable_by_queue(recent: Recent) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in recent.runnable:
        if not r["paused"]:
            out[r["queue"]] = out.get(r["queue"], 0) + r["runnable"]
    return out


def _queue_links(queues: list[str]) -> tuple[Link, ...]:
    return (tuple(Link(q, "jobwarden.queues.index", anchor=f"queue-{q}") for q in queues)
            or (Link("Queues", "jobwarden.queues.index"),))


def _no_live_worker(recent: Recent, workers: list[Row]) -> Alert:
    orphaned = sorted(q for q, n in _runnable_by_queue(recent).items()
                      if n and not live_workers.live_count(workers, q))
    return Alert("JobwardenNoLiveWorker", "Queue without a live worker", bool(orphaned),
                 "no live worker for " + ", ".join(orphaned) if orphaned
                 else "every queue with runnable jobs has a live worker",
                 "a queue that is not paused has runnable jobs and no live worker serves it",
                 _queue_links(orphaned))


def _growing(recent: Recent, flow: list[Row]) -> Alert:
    depth = _runnable_by_queue(recent)
    growing = sorted((r["queue"], r["arrived"] - r["started"]) for r in flow
                     if r["arrived"] > r["started"]
                     and depth.get(r["queue"], 0) >= GROWING_MIN_DEPTH)
    return Alert("JobwardenQueueGrowing", "Queue growing", bool(growing),
                 ", ".join(f"{q} (+{n} in 15 min, {depth[q]} waiting)" for q, n in growing)
                 or "no queue is outgrowing its workers",
                 "more jobs of a queue became runnable than started in the last 15 minutes, "
                 f"with {GROWING_MIN_DEPTH} or more waiting",
                 _queue_links([q for q, _n in growing]))


def _completions_dropped(c: Row) -> Alert:
    condition = ("completions of the last hour are under half the same hour's usual "
                 f"figure (a day and a week ago), when that is {USUAL_MIN_COMPLETIONS} or more")
    links = (Link("Trends", "jobwarden.overview.index", anchor="overview-trends"),)
    if not c.get("day_ago") or not c.get("week_ago"):
        return Alert("JobwardenCompletionsDropped", "Completions dropped", False,
                     "not enough history (a day and a week ago) to compare", condition, links)
    usual = (c["day_ago"] + c["week_ago"]) / 2
    firing = usual >= USUAL_MIN_COMPLETIONS and c["last_hour"] < usual / 2
    return Alert("JobwardenCompletionsDropped", "Completions dropped", firing,
                 f"{c['last_hour']} in the last hour, usually {usual:.0f}", condition, links)


def _horizon_held(recent: Recent) -> Alert:
    held = sorted((float(r["age_s"]), r["holder"]) for r in recent.horizon
                  if float(r["age_s"] or 0) > XMIN_HELD_S)
    hidden = sum(r["hidden"] for r in recent.horizon)
    detail = (", ".join(f"a {holder} open {age(s)}" for s, holder in reversed(held))
              or f"no transaction has held it over {age(XMIN_HELD_S)}")
    if hidden:  # their age is unknown, so they can neither fire nor be cleared here
        detail += f"; {hidden} session(s) the console's role may not time (grant pg_monitor)"
    return Alert("JobwardenXminHorizonHeld", "Xmin horizon held", bool(held), detail,
                 f"a session or a prepared transaction has held back the xmin horizon for "
                 f"over {age(XMIN_HELD_S)}")


def _dead_tuples(recent: Recent) -> Alert:
    piling = [f"{r['table_name']} {r['dead']} dead, {r['live']} live" for r in recent.tables
              if r["dead"] > r["live"] and r["dead"] >= DEAD_TUPLES_MIN]
    return Alert("JobwardenDeadTuplesPiling", "Dead tuples piling", bool(piling),
                 ", ".join(piling) or "every job table has fewer dead tuples than live ones "
                 f"or under {DEAD_TUPLES_MIN}",
                 f"a job table has more dead tuples than live ones, {DEAD_TUPLES_MIN:,} or more")
