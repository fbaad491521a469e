"""Every figure these pages show equals an independent count over the base tables."""

from __future__ import annotations

import re
from datetime import datetime

import pytest

from jobwarden.worker.store.schema import JOB_STATUSES
from tests.figures.conftest import WORKER, rows


def counts_by(url: str, *columns: str) -> dict:
    cols = ", ".join(columns)
    return {tuple(r[:-1]): r[-1] for r in rows(
        url, f"SELECT {cols}, count(*) FROM background_jobs GROUP BY {cols}")}


def test_the_queues_page_counts_every_status_of_every_queue(operator, seeded):
    html = operator.get("/queues").get_data(as_text=True)
    real = counts_by(seeded.url, "queue", "status")
    table = re.search(r'<table class="counts" data-testid="queues">(.*?)</table>', html, re.S)
    shown = {}
    for queue, body in re.findall(r'<tr data-queue="([^"]+)">(.*?)</tr>', table.group(1), re.S):
        cells = re.findall(r'<td class="num">(\d+)</td>', body)
        assert len(cells) == len(JOB_STATUSES)
        for status, n in zip(JOB_STATUSES, cells, strict=True):
            shown[(queue, status)] = int(n)
    assert set(q for q, _ in shown) == {q for q, _ in real}
    assert {k: v for k, v in shown.items() if v} == real
    assert sum(real.values()) > 40  # the dataset is there, with every status
    assert {s for _, s in real} == set(JOB_STATUSES)


def test_the_overview_tiles_count_every_status(operator, seeded):
    html = operator.get("/").get_data(as_text=True)
    real = {s: n for (s,), n in counts_by(seeded.url, "status").items()}
    for status in JOB_STATUSES:
        tile = re.search(rf'data-testid="count-{status}">.*?data-count="(\d+)"', html, re.S)
        assert int(tile.group(1)) == real.get(status, 0), status


def test_the_navigation_badges_count_failed_and_unknown_jobs(operator, seeded):
    html = operator.get("/queues").get_data(as_text=True)
    real = {s: n for (s,), n in counts_by(seeded.url, "status").items()}
    for badge, status in (("failed", "failed"), ("review", "unknown")):
        shown = re.search(rf'data-testid="nav-badge-{badge}">(\d+)<', html)
        assert int(shown.group(1)) == real[status], badge


def test_each_failed_group_shows_its_failed_jobs_and_its_codes_occurrences(operator, seeded):
    html = operator.get("/failed").get_data(as_text=True)
    real = {code: (n, sorted(types)) for code, n, types in rows(
        seeded.url, "SELECT last_error_code, count(*), array_agg(DISTINCT type) "
                    "FROM background_jobs WHERE status = 'failed' GROUP BY 1")}
    # The latest occurrence of each code in the types its group lists: a failure still on
    # record, or an execution of those types that failed, retried or ended unknown with it
    # (to the minute, as the rollup keeps it).
    last_seen = dict(rows(seeded.url, """
        WITH listed AS (SELECT DISTINCT last_error_code AS code, type FROM background_jobs
                        WHERE status = 'failed')
        SELECT code, max(at) FROM (
            SELECT last_error_code AS code, failed_at AS at FROM background_jobs
            WHERE status = 'failed'
            UNION ALL
            SELECT e.error_code, date_trunc('minute', e.finished_at) FROM job_executions e
            JOIN listed l ON l.code = e.error_code AND l.type = e.type
            WHERE e.outcome IN ('retry', 'failed', 'unknown')) o GROUP BY code"""))
    shown = {}
    for code, body in re.findall(r'<tr data-error-code="([^"]*)">(.*?)</tr>', html, re.S):
        count = int(re.search(r'data-testid="group-count">(\d+)<', body).group(1))
        types = re.search(r'data-testid="group-types">([^<]*)<', body).group(1)
        since = re.search(r'data-testid="first-seen"><time datetime="([^"]+)"', body).group(1)
        last = re.search(r'data-testid="last-seen"><time datetime="([^"]+)"', body).group(1)
        shown[code] = (count, sorted(types.split(", ")), since, last)
    assert {c: v[:2] for c, v in shown.items()} == real
    for code, (_n, _types, since, last) in shown.items():
        assert datetime.fromisoformat(last) == last_seen[code], code
        # One notion of time for the row: its streak cannot have begun after its last
        # occurrence (it read "since 2 min ago, last seen 5 days ago").
        assert datetime.fromisoformat(since) <= datetime.fromisoformat(last), code


@pytest.mark.parametrize("window", ["1 hour"])
def test_the_retry_rate_counts_executions_that_ended_in_a_retry(operator, seeded, window):
    html = operator.get("/").get_data(as_text=True)
    retried, finished = rows(seeded.url, f"""
        SELECT count(*) FILTER (WHERE outcome IN ('retry', 'worker_lost')),
               count(*) FILTER (WHERE outcome NOT IN ('handed_back', 'snoozed'))
        FROM job_executions WHERE finished_at > now() - interval '{window}'""")[0]
    operator_outcomes = rows(seeded.url, f"""
        SELECT count(*) FROM job_audit WHERE at > now() - interval '{window}'
          AND to_status IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')""")[0][0]
    shown = re.search(r'data-testid="retry-rate">([\d.]+)%<', html).group(1)
    assert shown == f"{100 * retried / (finished + operator_outcomes):.1f}"


def test_the_overview_counts_the_last_hours_completions_and_outcomes(operator, seeded):
    html = operator.get("/").get_data(as_text=True)
    completed = rows(seeded.url, "SELECT count(*) FROM job_executions WHERE outcome = "
                                 "'completed' AND finished_at > now() - interval '1 hour'")[0][0]
    assert completed == len(seeded.ids["completed"])
    shown = re.search(r'data-testid="completed-last-hour">(\d+)<', html).group(1)
    assert int(shown) == completed
    assert f"avg {completed / 60:.1f}/min" in html


def metric_samples(text: str, name: str, *labels: str) -> dict[tuple, float]:
    """{(the values of `labels`): value} of one family in Prometheus' text format."""
    out = {}
    for found, value in re.findall(rf"^{name}\{{([^}}]*)\}} (\S+)$", text, re.M):
        given = dict(re.findall(r'(\w+)="([^"]*)"', found))
        out[tuple(given[k] for k in labels)] = float(value)
    return out


def test_metrics_count_the_jobs_by_status_queue_and_type(operator, seeded):
    text = operator.get("/metrics").get_data(as_text=True)
    shown = {k: v for k, v in metric_samples(
        text, "jobwarden_jobs", "status", "queue", "type").items() if v}
    real = {k: float(n) for k, n in counts_by(seeded.url, "status", "queue", "type").items()}
    assert shown == real


def test_metrics_last_hour_figures_count_the_executions(operator, seeded):
    text = operator.get("/metrics").get_data(as_text=True)
    last_hour = {k[0]: v for k, v in metric_samples(
        text, "jobwarden_executions_last_hour", "outcome").items()}
    completed, lost = rows(seeded.url, """
        SELECT count(*) FILTER (WHERE outcome = 'completed'),
               count(*) FILTER (WHERE outcome = 'worker_lost')
        FROM job_executions WHERE finished_at > now() - interval '1 hour'""")[0]
    assert (last_hour["completed"], last_hour["worker_lost"]) == (completed, lost)
    assert lost == len(seeded.ids["recovered"])


def test_the_workers_page_shows_what_each_worker_runs_and_finished(operator, seeded):
    html = operator.get("/workers").get_data(as_text=True)
    card = html.split(f'id="{WORKER}"')[1].split("</article>")[0]
    # Jobs a worker finished itself: not the ones it handed back, nor those recovered
    # from it (recovery ended them), in the last 5 minutes.
    done = rows(seeded.url, """
        SELECT count(*) FROM job_executions WHERE worker_id = %s
          AND finished_at > now() - interval '5 minutes'
          AND outcome NOT IN ('handed_back', 'worker_lost')""", [WORKER])[0][0]
    rate = re.search(r'data-testid="worker-rate">([\d.]+) ', card).group(1)
    assert rate == f"{done / 5:.1f}"
    running = dict(rows(seeded.url, "SELECT queue, count(*) FROM background_jobs WHERE "
                                    "status = 'running' AND worker_id = %s GROUP BY 1",
                        [WORKER]))
    shown = dict((q, int(n)) for q, n in re.findall(r">(\w+)</a> \((\d+)\)", card))
    assert {q: n for q, n in shown.items() if n} == running
    assert sum(running.values()) == len(seeded.ids["running"])
