"""The overview's tables and panels beside its tiles: counts by queue and by type, the
hour's outcome figures, stale running jobs, recovered executions and live workers
(the `incident` dataset, tests/figures/conftest.py)."""

from __future__ import annotations

import re

import pytest

from jobwarden.console.core.config import load_settings
from jobwarden.console.web.formatting import percent
from jobwarden.worker.store.schema import JOB_STATUSES
from tests.figures.conftest import rows

STALE_S = load_settings()["STALE_HEARTBEAT_SECONDS"]
GONE_S = load_settings()["WORKER_GONE_SECONDS"]


def by_testid(html: str, name: str) -> str:
    return re.search(rf'data-testid="{name}"[^>]*>(.*?)</', html, re.S).group(1).strip()


def table_rows(html: str, name: str) -> str:
    return re.search(rf'<table[^>]*data-testid="{name}">(.*?)</table>', html, re.S).group(1)


@pytest.fixture
def overview(operator, incident):
    return operator.get("/").get_data(as_text=True)


@pytest.mark.parametrize("column", ["queue", "type"])
def test_the_count_tables_by_queue_and_by_type(overview, incident, column):
    real: dict[str, dict[str, int]] = {}
    for label, status, n in rows(incident.url, f"SELECT {column}, status, count(*) "
                                               f"FROM background_jobs GROUP BY 1, 2"):
        real.setdefault(label, {})[status] = n
    shown: dict[str, dict[str, int]] = {}
    for label, body in re.findall(r'<tr data-row="([^"]+)">(.*?)</tr>',
                                  table_rows(overview, f"counts-by-{column}"), re.S):
        cells = dict(re.findall(r'data-status="(\w+)">\s*(?:<a[^>]*>)?(\d+)', body))
        shown[label] = {s: int(n) for s, n in cells.items()}
    assert set(shown) == set(real)
    for label, counts in real.items():
        assert shown[label] == {**dict.fromkeys(JOB_STATUSES, 0), **counts,
                                "total": sum(counts.values())}, label


def test_the_hours_outcomes_failure_rate_and_recoveries(overview, incident):
    url = incident.url
    outcomes = dict(rows(url, """
        SELECT outcome, count(*) FROM (
            SELECT CASE outcome WHEN 'retry' THEN 'retried' WHEN 'worker_lost' THEN 'retried'
                   ELSE outcome END AS outcome
            FROM job_executions WHERE finished_at > date_trunc('minute', now())
                                                    - interval '59 minutes'
              AND outcome NOT IN ('handed_back', 'snoozed')
            UNION ALL
            SELECT to_status FROM job_audit WHERE at > date_trunc('minute', now())
                                                       - interval '59 minutes'
              AND from_status IS DISTINCT FROM to_status
              AND to_status IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')
        ) o GROUP BY 1"""))
    ended = sum(outcomes.values())
    assert int(by_testid(overview, "outcomes-last-hour")) == ended
    snoozed = rows(url, "SELECT count(*) FROM job_executions WHERE outcome = 'snoozed' "
                        "AND finished_at > now() - interval '1 hour'")[0][0]
    assert int(by_testid(overview, "snoozed-last-hour")) == snoozed == 1
    assert by_testid(overview, "failure-rate") == percent(outcomes["failed"] / ended)
    lost = rows(url, "SELECT count(*) FROM job_executions WHERE outcome = 'worker_lost' "
                     "AND finished_at > now() - interval '1 hour'")[0][0]
    assert int(by_testid(overview, "recovered-last-hour")) == lost == 2
    runnable = rows(url, "SELECT count(*) FROM background_jobs WHERE status = 'pending' "
                         "AND available_at <= now()")[0][0]
    assert int(by_testid(overview, "runnable-now")) == runnable


def test_stale_running_jobs_recovered_executions_and_live_workers(overview, incident):
    url = incident.url
    stale = {r[0] for r in rows(url, """
        SELECT id FROM background_jobs WHERE status = 'running'
          AND (lease_expires_at < now()
               OR heartbeat_at < now() - make_interval(secs => %s))""", [STALE_S])}
    shown = {int(j) for j in re.findall(r'data-job="(\d+)"', table_rows(overview, "stale-jobs"))}
    assert shown == stale and len(stale) == 2
    recovered = {(j, s) for j, s in rows(url, """
        SELECT e.job_id, j.status FROM job_executions e JOIN background_jobs j ON j.id = e.job_id
        WHERE e.outcome = 'worker_lost' AND e.finished_at > now() - interval '1 hour'""")}
    shown_recovered = {(int(j), s) for j, s in re.findall(
        r'data-job="(\d+)" data-status="(\w+)"', table_rows(overview, "recovered-jobs"))}
    assert shown_recovered == recovered
    live = {w for (w,) in rows(url, "SELECT worker_id FROM job_workers WHERE state = "
                                    "'running' AND heartbeat_at > now() - make_interval(secs => %s)",
                               [GONE_S])}
    shown_live = set(re.findall(r'<tr data-worker="([^"]+)"', table_rows(overview, "live-workers")))
    assert shown_live == live and len(live) == 1
    assert re.search(rf"Live workers \({len(live)}\)", overview)
