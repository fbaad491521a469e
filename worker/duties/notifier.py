"""The notifier: a worker's duty that tells the targets what started failing, without
anyone watching the console (docs/guide/notifications.md).

Every `JOBWARDEN_NOTIFY_INTERVAL` one worker (a transaction-level advisory lock: the
others skip the pass) reads what the console shows, from the rollups and a few small
aggregates, never per job:

- a failed group: an error code making jobs of a type fail for good (the console's
  failed groups, "started" at the console's streak start);
- a retry storm: the condition of the console's Alerts panel (JobwardenRetryStorm);
- an SLA breach: a type's oldest runnable job has waited longer than its target;
- held flows: waiting jobs of a type held by a parent that failed.

Each is a group (kind, type, code) with a row in `job_notify_groups`. A group seen for
the first time is told at once; after that at most one summary per
`JOBWARDEN_NOTIFY_PERIOD`, and only when its figure moved. A group closes once it has
not been seen for an hour (the console's streak gap) and everything it counted was told:
its next occurrence is new. So 10,000 failures of one code in a period are one message
and one summary, and a code flapping on and off stays one group.

A pass's messages go in the transaction that changes the groups: each is recorded
(`job_notifications`) with one `jobwarden.notify` job per target (worker/duties/
delivery.py), which retries a receiver that is down. At most `BUDGET` groups get a
message of their own per pass; the rest share one digest (a thousand new codes at once
are eleven messages, not a thousand).

The notifier's own sending jobs are never a group: a target that is down must not make
messages about itself through itself.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from jobwarden.worker.core.env import notify_settings
from jobwarden.worker.core.notices import (
    COUNTING,
    DIGEST,
    FAILED_GROUP,
    FLOW_HELD,
    NOTIFY_TYPE,
    RETRY_STORM,
    SLA_BREACH,
    STORM_MIN_RETRIES,
    STORM_SHARE,
    Notice,
)
from jobwarden.worker.core.targets import Target
from jobwarden.worker.jobs.notifications import all_targets, record
from jobwarden.worker.jobs.registry import Registry
from jobwarden.worker.jobs.registry import registry as default_registry
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import CallerConnection, Q

if TYPE_CHECKING:  # the model: worker/core/env.py reads the settings without it
    from jobwarden.worker.core.settings import NotifySettings

log = logging.getLogger("jobwarden.notify")

#: A group unseen this long is over (the console's streak gap: an hour).
QUIET = timedelta(hours=1)
#: Groups with a message of their own per pass; the rest share one digest.
BUDGET = 10
#: How long messages and their deliveries are kept.
KEEP_SECONDS = 30 * 86_400
#: Types never watched: the notifier's own.
IGNORED = [NOTIFY_TYPE]
#: The order messages take a pass's budget in: new groups first, failures first.
_RANK = {FAILED_GROUP: 0, RETRY_STORM: 1, FLOW_HELD: 2, SLA_BREACH: 3}

Key = tuple[str, str, str]  # kind, job type, error code ('' for none)


@dataclass
class Seen:
    """A group as this pass reads it."""

    kind: str
    job_type: str
    error_code: str
    figure: int
    started_at: datetime
    #: From which minute a counting group's figure is counted.
    counted_from: datetime
    detail: dict[str, Any] = field(default_factory=dict)
    sample: str | None = None

    @property
    def key(self) -> Key:
        return (self.kind, self.job_type, self.error_code)


def run_once(conn: CallerConnection, registry: Registry | None = None,
             settings: NotifySettings | None = None, *,
             budget: int = BUDGET) -> list[int] | None:
    """One pass in its own transaction: the ids of the messages it recorded (their
    sending jobs enqueued with them), or None when another worker's pass holds the lock.
    Without a target nothing is read."""
    settings = settings or notify_settings()
    with conn.transaction():
        store = JobStore(conn)
        locked, now = store.one(Q.notify_try_lock)
        if not locked:
            return None
        found = all_targets(conn, settings)
        if not found:
            return []
        groups = {(g["kind"], g["job_type"], g["error_code"]): g
                  for g in store.dicts(Q.notify_groups)}
        seen = observe(conn, settings, groups, now)
        notices = decide(conn, groups, seen, now, settings.notify_period)
        ids = _send(conn, notices, found, settings, registry, budget)
        store.rows(Q.notify_prune, {"older_than": KEEP_SECONDS})
    if ids:
        log.info("notified %d target(s) of %d message(s)", len(found), len(ids),
                 extra={"action": "notified", "count": len(ids)})
    return ids


def observe(conn: CallerConnection, settings: NotifySettings,
            groups: dict[Key, dict[str, Any]], now: datetime) -> dict[Key, Seen]:
    """Every group failing now, with its figure."""
    seen = [*_failed_groups(conn, groups), *_retry_storms(conn, groups),
            *_sla_breaches(conn, settings, now), *_flows_held(conn)]
    return {s.key: s for s in seen}


def _failed_groups(conn: CallerConnection, groups: dict[Key, dict[str, Any]]) -> list[Seen]:
    store = JobStore(conn)
    recent = store.dicts(Q.notify_failures_recent, {"ignored": IGNORED})
    found = []
    new: dict[str, list[str]] = {}  # type -> codes not open yet
    for r in recent:
        open_ = groups.get((FAILED_GROUP, r["job_type"], r["error_code"]))
        since = open_["counted_from"] if open_ else r["first_minute"]
        found.append(Seen(FAILED_GROUP, r["job_type"], r["error_code"], 0,
                          open_["started_at"] if open_ else since, since))
        if open_ is None and r["error_code"]:
            new.setdefault(r["job_type"], []).append(r["error_code"])
    # A new group started when its code's streak did (the console's "first seen").
    starts = {}
    for job_type, codes in new.items():
        # The console's definition, so the message and its "first seen" agree.
        only = json.dumps({code: [job_type] for code in codes})
        for row in store.dicts(Q.failed_group_streaks,
                               {"codes": codes, "type": job_type, "types": only}):
            starts[(job_type, row["error_code"])] = row["streak_start"]
    for s in found:
        start = starts.get((s.job_type, s.error_code))
        if start is not None and start < s.counted_from:
            s.started_at = s.counted_from = start
    _count(conn, found, "failed")
    for s in found:
        if (s.kind, s.job_type, s.error_code) not in groups:
            s.sample = _first(store.rows(Q.notify_failed_sample,
                                         {"code": s.error_code, "type": s.job_type}))
    return found


def _retry_storms(conn: CallerConnection, groups: dict[Key, dict[str, Any]]) -> list[Seen]:
    store = JobStore(conn)
    found = []
    for r in store.dicts(Q.notify_retry_storms, {"ignored": IGNORED, "share": STORM_SHARE,
                                                 "min_retries": STORM_MIN_RETRIES}):
        open_ = groups.get((RETRY_STORM, r["job_type"], r["error_code"]))
        since = open_["counted_from"] if open_ else r["first_minute"]
        found.append(Seen(RETRY_STORM, r["job_type"], r["error_code"], 0,
                          open_["started_at"] if open_ else since, since,
                          sample=None if open_ else _first(store.rows(
                              Q.notify_retrying_sample,
                              {"code": r["error_code"], "type": r["job_type"]}))))
    _count(conn, found, "retried")
    return found


def _count(conn: CallerConnection, found: list[Seen], outcome: str) -> None:
    """Each counting group's figure: its occurrences with `outcome` since it started."""
    if not found:
        return
    counts = {(r["job_type"], r["error_code"]): r["jobs"] for r in JobStore(conn).dicts(
        Q.notify_occurrences_since, {
            "types": [s.job_type for s in found], "codes": [s.error_code for s in found],
            "since": [s.counted_from for s in found], "outcome": outcome})}
    for s in found:
        s.figure = int(counts.get((s.job_type, s.error_code), 0))


def sla_targets(conn: CallerConnection, settings: NotifySettings) -> dict[str, float]:
    """Each type's time-to-start target as the console reads it: the configuration's
    (JOBWARDEN_SLA), else the handler's declaration; JOBWARDEN_SLA_DEFAULT for the rest
    is applied by the caller."""
    declared = {r["type"]: float(r["sla_seconds"])
                for r in JobStore(conn).dicts(Q.notify_sla_declared)}
    return {**declared, **settings.sla}


def _sla_breaches(conn: CallerConnection, settings: NotifySettings,
                  now: datetime) -> list[Seen]:
    targets_ = sla_targets(conn, settings)
    default = settings.sla_default
    if not targets_ and default is None:
        return []
    found = []
    for r in JobStore(conn).dicts(Q.notify_sla_waits, {
            "types": None if default is not None else sorted(targets_),
            "ignored": IGNORED}):
        target = targets_.get(r["job_type"], default)
        wait = float(r["oldest_s"] or 0)
        if target is None or wait <= target:
            continue
        started = now - timedelta(seconds=wait - target)
        found.append(Seen(SLA_BREACH, r["job_type"], "", int(r["runnable"]), started, started,
                          {"wait_s": round(wait, 1), "target_s": target}))
    return found


def _flows_held(conn: CallerConnection) -> list[Seen]:
    return [Seen(FLOW_HELD, r["job_type"], "", int(r["held"]), r["held_since"],
                 r["held_since"], {"longest_id": r["longest_id"],
                                   "parent_type": r["parent_type"],
                                   "parent_code": r["parent_code"]},
                 sample=r["parent_error"])
            for r in JobStore(conn).dicts(Q.notify_flows_held, {"ignored": IGNORED})]


def decide(conn: CallerConnection, groups: dict[Key, dict[str, Any]], seen: dict[Key, Seen],
           now: datetime, period: float) -> list[Notice]:
    """The messages due now, each group's row changed for it (compare-and-set on what
    the pass read): a first message for a group seen for the first time; a summary when
    the period since the last one has passed and the figure moved; groups quiet for
    QUIET whose counts were all told are closed."""
    store = JobStore(conn)
    due: list[Notice] = []
    for key, s in seen.items():
        g = groups.get(key)
        if g is None:
            if store.rows(Q.notify_group_open, {
                    "kind": s.kind, "job_type": s.job_type, "error_code": s.error_code,
                    "started_at": s.started_at, "counted_from": s.counted_from,
                    "now": now, "figure": s.figure}):
                due.append(_notice(s.kind, s.job_type, s.error_code, s.figure, s.figure,
                                   s.started_at, False, s.sample, s.detail))
            continue
        figure = max(s.figure, g["figure"]) if s.kind in COUNTING else s.figure
        due += _seen_again(conn, g, figure, now, period, seen=True, sample=s.sample,
                           detail=s.detail)
    for key, g in groups.items():
        if key in seen:
            continue
        if g["kind"] in COUNTING:  # counted, not all told: the summary still goes
            due += _seen_again(conn, g, g["figure"], now, period, seen=False)
        if now - g["last_seen_at"] >= QUIET:
            store.rows(Q.notify_group_close, {
                "kind": g["kind"], "job_type": g["job_type"], "error_code": g["error_code"],
                "last_seen_at": g["last_seen_at"], "counting": g["kind"] in COUNTING})
    return due


def _seen_again(conn: CallerConnection, g: dict[str, Any], figure: int, now: datetime,
                period: float, *, seen: bool, sample: str | None = None,
                detail: dict[str, Any] | None = None) -> list[Notice]:
    counting = g["kind"] in COUNTING
    moved = figure > g["sent_figure"] if counting else figure != g["sent_figure"]
    sent = moved and (now - g["last_sent_at"]).total_seconds() >= period
    if not seen and not sent:
        return []
    if not JobStore(conn).rows(Q.notify_group_seen, {
            "kind": g["kind"], "job_type": g["job_type"], "error_code": g["error_code"],
            "last_sent_at": g["last_sent_at"], "now": now, "figure": figure, "seen": seen,
            "sent": sent}) or not sent:
        return []
    if sample is None and g["kind"] == FAILED_GROUP:
        sample = _first(JobStore(conn).rows(Q.notify_failed_sample, {
            "code": g["error_code"], "type": g["job_type"]}))
    return [_notice(g["kind"], g["job_type"], g["error_code"], figure,
                    figure - g["sent_figure"] if counting else figure, g["started_at"], True,
                    sample, detail or {})]


def _notice(kind: str, job_type: str, error_code: str, count: int, new: int,
            started_at: datetime, summary: bool, sample: str | None,
            detail: dict[str, Any]) -> Notice:
    return Notice(kind, job_type, error_code or None, count, new, started_at, summary, sample,
                  detail)


def _send(conn: CallerConnection, notices: list[Notice], found: list[Target],
          settings: NotifySettings, registry: Registry | None, budget: int) -> list[int]:
    """Record the messages (the first `budget` on their own, the rest in one digest)
    and enqueue one sending job per message and target."""
    notices.sort(key=lambda n: (n.summary, _RANK.get(n.kind, 9), -n.count))
    alone, rest = notices[:budget], notices[budget:]
    if rest:
        alone.append(Notice(DIGEST, count=len(rest), new=len(rest),
                            detail={"titles": [n.title for n in rest]}))
    return [record(conn, n, found, settings, registry or default_registry) for n in alone]


def _first(rows: list[tuple[Any, ...]]) -> str | None:
    return rows[0][0] if rows else None
