"""The overview's Alerts panel (firing / ok): the conditions of
deploy/prometheus/jobwarden.rules.yml, read now.

The console has no time series, so each condition is read from the tables at once
instead of held for minutes as the Prometheus rules do: a condition shows as firing
from its first reading. Thresholds are the rules' (docs/operations.md §2).
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Blueprint, render_template

from console.core import live_workers
from console.core.config import settings
from console.data.database import CQ, get_db
from console.views.metrics import Recent
from console.web.formatting import age

bp = Blueprint("alerts", __name__)

FAILED_RATE = 0.10
FAILED_MIN_EXECUTIONS = 20
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
def panel():
    """The Alerts panel alone, for its own polling."""
    return render_template("jobwarden/_alerts.html", alerts=read_alerts())


@dataclass(frozen=True)
class Alert:
    name: str
    title: str
    firing: bool
    detail: str


def evaluate(recent, workers: list[dict], flow: list[dict], completions: dict) -> list[Alert]:
    """Every alert with firing / ok and a line saying why; `recent` is metrics.Recent."""
    return [_failed_rate(recent), _pending_over_sla(recent), _stale(recent),
            _no_live_worker(recent, workers), _growing(recent, flow),
            _completions_dropped(completions), _horizon_held(recent), _dead_tuples(recent)]


def _failed_rate(recent) -> Alert:
    totals: dict[str, list[int]] = {}
    for row in recent.executions:
        failed, total = totals.setdefault(row["type"], [0, 0])
        bad = row["outcome"] in ("failed", "unknown", "timeout")
        totals[row["type"]] = [failed + (row["executions"] if bad else 0),
                               total + row["executions"]]
    over = sorted(f"{t} {f / n:.0%} of {n}" for t, (f, n) in totals.items()
                  if n >= FAILED_MIN_EXECUTIONS and f / n > FAILED_RATE)
    # Types under the minimum are not judged (as in the rule): say so, rather than
    # "no type over 10%" beside a type failing 1 of 2.
    unjudged = sorted(f"{t} {f} of {n}" for t, (f, n) in totals.items()
                      if n < FAILED_MIN_EXECUTIONS and f)
    detail = ", ".join(over) or (f"no type with {FAILED_MIN_EXECUTIONS}+ executions over "
                                 f"{FAILED_RATE:.0%} in the last 5 minutes")
    if unjudged:
        detail += (f"; under {FAILED_MIN_EXECUTIONS} executions, not judged: "
                   + ", ".join(unjudged) + " failed")
    return Alert("JobwardenFailedRateHigh", "Failed rate", bool(over), detail)


def _pending_over_sla(recent) -> Alert:
    over = sorted(f"{r['type']} waited {float(r['oldest_pending_s']):.0f}s "
                  f"(SLA {recent.slas[r['type']]:.0f}s)"
                  for r in recent.runnable
                  if r["type"] in recent.slas
                  and float(r["oldest_pending_s"] or 0) > recent.slas[r["type"]])
    return Alert("JobwardenPendingOverSLA", "Pending over SLA", bool(over),
                 ", ".join(over) or "every type's oldest pending job is within its SLA")


def _stale(recent) -> Alert:
    stale = sum(r["stale"] for r in recent.stale)
    return Alert("JobwardenStaleHeartbeats", "Stale heartbeats", stale > 0,
                 f"{stale} running job(s) without a fresh heartbeat" if stale
                 else "every running job has a fresh heartbeat")


def _runnable_by_queue(recent) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in recent.runnable:
        if not r["paused"]:
            out[r["queue"]] = out.get(r["queue"], 0) + r["runnable"]
    return out


def _no_live_worker(recent, workers: list[dict]) -> Alert:
    orphaned = sorted(q for q, n in _runnable_by_queue(recent).items()
                      if n and not live_workers.live_count(workers, q))
    return Alert("JobwardenNoLiveWorker", "Queue without a live worker", bool(orphaned),
                 "no live worker for " + ", ".join(orphaned) if orphaned
                 else "every queue with runnable jobs has a live worker")


def _growing(recent, flow: list[dict]) -> Alert:
    depth = _runnable_by_queue(recent)
    growing = sorted(f"{r['queue']} (+{r['arrived'] - r['started']} in 15 min, "
                     f"{depth[r['queue']]} waiting)"
                     for r in flow
                     if r["arrived"] > r["started"]
                     and depth.get(r["queue"], 0) >= GROWING_MIN_DEPTH)
    return Alert("JobwardenQueueGrowing", "Queue growing", bool(growing),
                 ", ".join(growing) or "no queue is outgrowing its workers")


def _completions_dropped(c: dict) -> Alert:
    if not c.get("day_ago") or not c.get("week_ago"):
        return Alert("JobwardenCompletionsDropped", "Completions dropped", False,
                     "not enough history (a day and a week ago) to compare")
    usual = (c["day_ago"] + c["week_ago"]) / 2
    firing = usual >= USUAL_MIN_COMPLETIONS and c["last_hour"] < usual / 2
    return Alert("JobwardenCompletionsDropped", "Completions dropped", firing,
                 f"{c['last_hour']} in the last hour, usually {usual:.0f}")


def _horizon_held(recent) -> Alert:
    held = sorted((float(r["age_s"]), r["holder"]) for r in recent.horizon
                  if float(r["age_s"] or 0) > XMIN_HELD_S)
    hidden = sum(r["hidden"] for r in recent.horizon)
    detail = (", ".join(f"a {holder} open {age(s)}" for s, holder in reversed(held))
              or f"no transaction has held it over {age(XMIN_HELD_S)}")
    if hidden:  # their age is unknown, so they can neither fire nor be cleared here
        detail += f"; {hidden} session(s) the console's role may not time (grant pg_monitor)"
    return Alert("JobwardenXminHorizonHeld", "Xmin horizon held", bool(held), detail)


def _dead_tuples(recent) -> Alert:
    piling = [f"{r['table_name']} {r['dead']} dead, {r['live']} live" for r in recent.tables
              if r["dead"] > r["live"] and r["dead"] >= DEAD_TUPLES_MIN]
    return Alert("JobwardenDeadTuplesPiling", "Dead tuples piling", bool(piling),
                 ", ".join(piling) or "every job table has fewer dead tuples than live ones "
                 f"or under {DEAD_TUPLES_MIN}")
