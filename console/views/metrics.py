"""Prometheus metrics: the overview's numbers for machines (`GET /metrics`).

Monitoring must know pending, running, failed and the oldest age, throughput, retry
rate and worker health — not just that a worker process is up. Values are read from the
database at scrape time (the same cheap queries as the overview), so every console
replica reports the same numbers. A scraper authenticates with
`Authorization: Bearer $JOBWARDEN_METRICS_TOKEN`; a signed-in user may also look.

The alerting rules (deploy/prometheus/jobwarden.rules.yml) read the families below; the
catalogue is in docs/operations.md. Execution figures cover a trailing window (5 minutes,
or the last hour) rather than totals: retention deletes old executions, and a total that
shrinks reads as a counter reset to Prometheus. Histograms are therefore gauge histograms
(exposed as `histogram`, so `histogram_quantile` works on their buckets). Recovered and
zombie executions are true counters: the runtime adds to `job_event_totals` when they
happen (worker/store/event_totals.py), and retention leaves that table alone.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from flask import Blueprint, Response, abort, request, url_for
from flask.typing import ResponseReturnValue
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
    Metric,
)

from jobwarden.console.core import live_workers
from jobwarden.console.core.config import settings
from jobwarden.console.data import queries, sla
from jobwarden.console.data.database import CQ, Reader, Row, get_db
from jobwarden.console.web.identity import current_user
from jobwarden.worker.core.sanitize import redact
from jobwarden.worker.jobs import cron

bp = Blueprint("metrics", __name__)

#: Upper bounds (seconds) of the duration and time-to-start histograms' buckets.
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0, 3600.0)
_NEGATED = sorted(-b for b in BUCKETS)


def _authorized() -> bool:
    token = settings().get("METRICS_TOKEN")
    sent = request.headers.get("Authorization", "")
    if token and sent.startswith("Bearer "):
        return hmac.compare_digest(sent[len("Bearer "):].encode(), token.encode())
    return bool(current_user.is_authenticated)


class _Snapshot:
    """A prometheus-client collector over one read of the database."""

    def __init__(self, overview: queries.Overview, workers: list[Row], recent: Recent,
                 links: tuple[str, str]) -> None:
        self.overview = overview
        self.workers = workers
        self.recent = recent
        self.links = links

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "jobwarden_console_info",
            "Where the console and the alerts' runbooks are: the rules' console_url and "
            "runbook_url annotations start with these labels.",
            labels=["console_url", "runbook_url"])
        info.add_metric(list(self.links), 1)
        yield info
        jobs = GaugeMetricFamily("jobwarden_jobs", "Jobs by status, queue and type.",
                                 labels=["status", "queue", "type"])
        for row in self.overview.count_rows:
            jobs.add_metric([redact(row["status"]), redact(row["queue"]), redact(row["type"])],
                            row["jobs"])
        yield jobs
        ov = self.overview
        yield GaugeMetricFamily("jobwarden_runnable_pending_jobs",
                                "Pending jobs whose available_at has passed.",
                                value=ov.runnable_pending)
        yield GaugeMetricFamily("jobwarden_oldest_pending_age_seconds",
                                "How long the oldest runnable pending job has waited.",
                                value=ov.oldest_pending_s or 0.0)
        last_hour = GaugeMetricFamily(
            "jobwarden_executions_last_hour", "Executions finished in the last hour.",
            labels=["outcome"])
        last_hour.add_metric(["all"], ov.finished_last_hour)
        last_hour.add_metric(["completed"], ov.completed_per_minute * 60)
        last_hour.add_metric(["worker_lost"], ov.recovered_last_hour)
        last_hour.add_metric(["snoozed"], ov.snoozed_last_hour)
        yield last_hour
        yield GaugeMetricFamily("jobwarden_retry_rate_last_hour",
                                "Share of last hour's executions that ended in a retry.",
                                value=ov.retry_rate or 0.0)
        yield GaugeMetricFamily("jobwarden_failure_rate_last_hour",
                                "Share of last hour's executions that failed for good.",
                                value=ov.failure_rate or 0.0)
        workers = GaugeMetricFamily("jobwarden_workers", "Worker processes by state.",
                                    labels=["state"])
        states: dict[str, int] = dict.fromkeys(("running", "draining", "stopped", "gone"), 0)
        for w in self.workers:
            states[w["state"]] = states.get(w["state"], 0) + 1
        for state, n in states.items():
            workers.add_metric([state], n)
        yield workers
        yield from self.recent.families(self.workers)


def _labels(*values: object) -> list[str]:
    """Label values as exposed: redacted like every other label (a queue, type or error
    code may carry a secret an application put there)."""
    return [redact(str(v)) for v in values]


def _histogram(name: str, documentation: str, rows: list[Row]) -> GaugeHistogramMetricFamily:
    """A per-type gauge histogram from rows of (type, above, executions, seconds)."""
    family = GaugeHistogramMetricFamily(name, documentation, labels=["type"])
    per_type: dict[str, list[Any]] = {}  # type -> [counts per bucket, sum of seconds]
    for row in rows:
        counts, total = per_type.setdefault(row["type"], [[0] * (len(BUCKETS) + 1), 0.0])
        # `above` bounds are >= the value: the smallest of them is BUCKETS[n - above]
        # (n - above == n: above every bound, the +Inf bucket).
        counts[len(BUCKETS) - int(row["above"])] += row["executions"]
        per_type[row["type"]][1] = total + float(row["seconds"] or 0.0)
    for type_, (counts, total) in sorted(per_type.items()):
        cumulative, buckets = 0, []
        for bound, n in zip([*map(str, BUCKETS), "+Inf"], counts, strict=True):
            cumulative += n
            buckets.append((bound, cumulative))
        family.add_metric(_labels(type_), buckets, gsum_value=total)
    return family


@dataclass
class Recent:
    """The alerting rules' inputs: trailing-window executions, runnable work per queue,
    stale heartbeats and SLA targets (one read each). What is not given was read empty."""

    executions: list[Row] = field(default_factory=list)
    durations: list[Row] = field(default_factory=list)
    waits: list[Row] = field(default_factory=list)
    runnable: list[Row] = field(default_factory=list)
    stale: list[Row] = field(default_factory=list)
    #: Each type's time-to-start target: configured, else declared by its handler.
    slas: dict[str, float] = field(default_factory=dict)
    events: list[Row] = field(default_factory=list)
    horizon: list[Row] = field(default_factory=list)
    tables: list[Row] = field(default_factory=list)
    schedules: list[Row] = field(default_factory=list)
    #: Per type of waiting job: how many a parent that did not complete holds, how long.
    flows: list[Row] = field(default_factory=list)

    @classmethod
    def read(cls, reader: Reader, *, stale_s: float, sla_configured: dict[str, float]) -> Recent:
        return cls(
            executions=reader.all(CQ.metrics_executions_recent),
            durations=reader.all(CQ.metrics_duration_histogram, negated_bounds=_NEGATED),
            waits=reader.all(CQ.metrics_time_to_start_histogram, negated_bounds=_NEGATED),
            runnable=reader.all(CQ.metrics_runnable_by_queue_type),
            stale=reader.all(CQ.metrics_stale_running, stale_s=stale_s),
            slas={**sla.declared_targets(reader), **sla_configured},
            events=reader.all(CQ.metrics_event_totals),
            horizon=reader.all(CQ.metrics_xmin_horizon),
            tables=reader.all(CQ.metrics_table_tuples),
            schedules=reader.all(CQ.schedules_list),
            flows=reader.all(CQ.metrics_flow_held),
        )

    def families(self, workers: list[Row]) -> Iterator[Metric]:
        executions = GaugeMetricFamily(
            "jobwarden_executions_last_5m",
            "Executions finished in the last 5 minutes by queue, type, outcome and error code.",
            labels=["queue", "type", "outcome", "error_code"])
        last_minute = GaugeMetricFamily(
            "jobwarden_executions_last_1m",
            "Executions finished in the last minute by queue, type, outcome and error code "
            "(0 for a key seen in the last 5 minutes only).",
            labels=["queue", "type", "outcome", "error_code"])
        for row in self.executions:
            labels = _labels(row["queue"], row["type"], row["outcome"], row["error_code"])
            executions.add_metric(labels, row["executions"])
            last_minute.add_metric(labels, row["last_minute"])
        yield executions
        yield last_minute
        yield _histogram("jobwarden_execution_duration_seconds",
                         "Processing time of executions finished in the last 5 minutes.",
                         self.durations)
        yield _histogram("jobwarden_time_to_start_seconds",
                         "Wait from available to started of executions started in the last "
                         "5 minutes.", self.waits)
        oldest = GaugeMetricFamily(
            "jobwarden_oldest_pending_age_by_type_seconds",
            "How long the oldest runnable pending job of each queue and type has waited.",
            labels=["queue", "type"])
        queue_runnable: dict[str, int] = {}
        paused: set[str] = set()
        for row in self.runnable:
            oldest.add_metric(_labels(row["queue"], row["type"]),
                              float(row["oldest_pending_s"] or 0))
            if row["paused"]:
                paused.add(row["queue"])
            else:
                queue_runnable[row["queue"]] = queue_runnable.get(row["queue"], 0) + row["runnable"]
        yield oldest
        runnable = GaugeMetricFamily(
            "jobwarden_queue_runnable_jobs",
            "Runnable pending jobs per queue that is not paused (a paused queue reports 0).",
            labels=["queue"])
        for queue in sorted(set(queue_runnable) | paused):
            runnable.add_metric(_labels(queue), queue_runnable.get(queue, 0))
        yield runnable
        live = GaugeMetricFamily(
            "jobwarden_queue_live_workers",
            "Live workers (running, heartbeat fresh) serving each queue that has work or a "
            "worker.", labels=["queue"])
        named = {q for w in live_workers.live(workers) for q in w["queues"]
                 if q != live_workers.ALL_QUEUES}
        for queue in sorted(named | set(queue_runnable) | paused):
            live.add_metric(_labels(queue), live_workers.live_count(workers, queue))
        yield live
        stale = GaugeMetricFamily(
            "jobwarden_stale_running_jobs",
            "Running jobs whose heartbeat is older than the console's stale threshold.",
            labels=["queue", "type"])
        for row in self.stale:
            stale.add_metric(_labels(row["queue"], row["type"]), row["stale"])
        yield stale
        targets = GaugeMetricFamily(
            "jobwarden_job_type_sla_seconds",
            "Each job type's time-to-start target (configuration, else the handler's).",
            labels=["type"])
        for type_, seconds in sorted(self.slas.items()):
            targets.add_metric(_labels(type_), seconds)
        yield targets
        yield from self.event_counters()
        yield from self.database_health()
        yield from self.broken_schedules()
        yield from self.held_flows()

    def held_flows(self) -> Iterator[Metric]:
        """Waiting jobs held by a parent that failed, was cancelled or skipped, or ended
        unknown (docs/guide/flows.md): no worker will move them until an operator acts.
        Every type with a waiting job has a series, at 0 while none is held."""
        held = GaugeMetricFamily(
            "jobwarden_flow_held_jobs",
            "Waiting jobs of a type held by a parent that failed, was cancelled or skipped, "
            "or ended unknown.", labels=["type"])
        seconds = GaugeMetricFamily(
            "jobwarden_flow_held_seconds",
            "How long the longest-held waiting job of a type has been held by such a "
            "parent (0 when none is).", labels=["type"])
        for row in self.flows:
            held.add_metric(_labels(row["type"]), row["held"])
            seconds.add_metric(_labels(row["type"]), float(row["held_s"] or 0))
        yield held
        yield seconds

    def broken_schedules(self) -> Iterator[Metric]:
        """Schedules whose zone or cron this console cannot read: workers with the same
        tzdata skip them (docs/operations.md, "A broken schedule"). Every schedule gets a
        series, at 0 while readable, so an alert's series exists before it breaks."""
        per_type = GaugeMetricFamily(
            "jobwarden_schedule_broken",
            "1 for a schedule whose time zone or cron expression cannot be read here.",
            labels=["type"])
        broken = 0
        for row in self.schedules:
            problem = cron.schedule_problem(row["type"], row["cron"], row["timezone"])
            broken += problem is not None
            per_type.add_metric(_labels(row["type"]), int(problem is not None))
        yield per_type
        yield GaugeMetricFamily("jobwarden_schedules_broken",
                                "Schedules whose time zone or cron cannot be read here.",
                                value=broken)

    def event_counters(self) -> Iterator[Metric]:
        recovered = CounterMetricFamily(
            "jobwarden_recovered",
            "Executions recovery moved on because their lease ran out (worker lost).",
            labels=["type"])
        zombies = CounterMetricFamily(
            "jobwarden_zombie_rejected",
            "Executions that carried on after another took their job over, their result "
            "refused: learned_by=outcome when their outcome write matched no row, lease when "
            "a heartbeat or their own write found the lease gone first.",
            labels=["type", "learned_by"])
        expired = CounterMetricFamily(
            "jobwarden_expired",
            "Jobs the expiry duty ended (failed, code EXPIRED) because nothing started them "
            "by their deadline.", labels=["type"])
        for row in self.events:
            if row["event"] == "recovered":
                recovered.add_metric(_labels(row["type"]), row["total"])
            elif row["event"] == "expired":
                expired.add_metric(_labels(row["type"]), row["total"])
            else:
                learned_by = row["event"].removeprefix("zombie_")
                zombies.add_metric(_labels(row["type"], learned_by), row["total"])
        yield recovered
        yield zombies
        yield expired

    def database_health(self) -> Iterator[Metric]:
        """The xmin horizon and the job tables' dead tuples: a transaction left open for
        minutes slows the claim many times over (its dead tuples stay in the indexes the
        claim scans) and shows nowhere else. Every holder kind is exposed, at 0 when it
        holds nothing, so an alert's series exists before the first incident."""
        seconds = GaugeMetricFamily(
            "jobwarden_xmin_horizon_age_seconds",
            "How long the oldest transaction of each kind holding back this database's xmin "
            "horizon has been open (session: since xact_start; prepared_transaction: since "
            "PREPARE). 0 when none holds it.", labels=["holder"])
        xids = GaugeMetricFamily(
            "jobwarden_xmin_horizon_age_transactions",
            "Transactions since the oldest xmin each kind of holder keeps (also replication "
            "slots and walsenders, which have no start time). 0 when none holds it.",
            labels=["holder"])
        hidden = 0
        for row in self.horizon:
            if row["holder"] != "replication":
                seconds.add_metric([row["holder"]], float(row["age_s"] or 0))
            xids.add_metric([row["holder"]], int(row["age_xids"] or 0))
            hidden += row["hidden"]
        yield seconds
        yield xids
        yield GaugeMetricFamily(
            "jobwarden_xmin_horizon_hidden_sessions",
            "Sessions holding the xmin horizon whose xact_start the console's role may not "
            "read (counted only in _age_transactions): grant it pg_monitor.", value=hidden)
        live = GaugeMetricFamily("jobwarden_table_live_tuples",
                                 "Live tuples of a Jobwarden table (PostgreSQL's estimate).",
                                 labels=["table"])
        dead = GaugeMetricFamily("jobwarden_table_dead_tuples",
                                 "Dead tuples of a Jobwarden table not yet vacuumed away "
                                 "(PostgreSQL's estimate).", labels=["table"])
        vacuumed = GaugeMetricFamily(
            "jobwarden_table_last_vacuum_age_seconds",
            "Time since a Jobwarden table's last vacuum, manual or automatic (absent when "
            "never vacuumed since the statistics were reset).", labels=["table"])
        for row in self.tables:
            live.add_metric([row["table_name"]], row["live"])
            dead.add_metric([row["table_name"]], row["dead"])
            if row["vacuum_age_s"] is not None:
                vacuumed.add_metric([row["table_name"]], float(row["vacuum_age_s"]))
        yield live
        yield dead
        yield vacuumed


def console_links() -> tuple[str, str]:
    """The console's external address (the setting, else its path alone, mount prefix
    included: the alerts' links are then relative) and the runbooks' address.

    Never the host this request names: Host and X-Forwarded-Host are the client's to
    forge, and a forged one would go out in every alert's link."""
    cfg = settings()
    console_url = cfg.get("EXTERNAL_URL") or url_for("jobwarden.overview.index").rstrip("/")
    return console_url, cfg["RUNBOOK_URL"]


@bp.get("/metrics")
def metrics() -> ResponseReturnValue:
    """Prometheus text exposition of queue health."""
    if not _authorized():
        abort(401)
    with get_db().reading() as reader:
        overview = queries.overview(reader)
        workers = reader.all(CQ.console_workers_list,
                             gone_s=settings()["WORKER_GONE_SECONDS"], limit=1000)
        recent = Recent.read(reader, stale_s=settings()["STALE_HEARTBEAT_SECONDS"],
                             sla_configured=settings()["SLA_TARGETS"])
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(overview, workers, recent, console_links()))
    return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)
