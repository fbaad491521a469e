"""Prometheus metrics: the overview's numbers for machines (`GET /metrics`).

Monitoring must know pending, running, failed and the oldest age, throughput, retry
rate and worker health — not just that a worker process is up. Values are read from the
database at scrape time (the same cheap queries as the overview), so every console
replica reports the same numbers. A scraper authenticates with
`Authorization: Bearer $JOBWARDEN_METRICS_TOKEN`; a signed-in user may also look.
"""

from __future__ import annotations

import hmac

from flask import Blueprint, Response, abort, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from console import queries
from console.database import get_db
from console.identity import current_user
from console.mount import settings
from worker.sanitize import redact

bp = Blueprint("metrics", __name__)


def _authorized() -> bool:
    token = settings().get("METRICS_TOKEN")
    sent = request.headers.get("Authorization", "")
    if token and sent.startswith("Bearer "):
        return hmac.compare_digest(sent[len("Bearer "):].encode(), token.encode())
    return bool(current_user.is_authenticated)


class _Snapshot:
    """A prometheus-client collector over one read of the database."""

    def __init__(self, overview: queries.Overview, workers: list[dict]):
        self.overview = overview
        self.workers = workers

    def collect(self):
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


@bp.get("/metrics")
def metrics():
    """Prometheus text exposition of queue health."""
    if not _authorized():
        abort(401)
    with get_db().reading() as reader:
        overview = queries.overview(reader)
        workers = reader.all("console_workers_list",
                             gone_s=settings()["WORKER_GONE_SECONDS"], limit=1000)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(overview, workers))
    return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)
