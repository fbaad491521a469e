"""The SLA page's figures for each job type, against the executions and jobs tables
(the `incident` dataset, tests/figures/conftest.py)."""

from __future__ import annotations

import math
import re

import pytest

from jobwarden.console.web.formatting import age, millis, percent
from tests.figures.conftest import SLA_S, rows


def percentile_cont(values: list[float], p: float) -> float | None:
    """Linear interpolation between the two nearest ranks (PostgreSQL's percentile_cont)."""
    if not values:
        return None
    ordered = sorted(values)
    pos = p * (len(ordered) - 1)
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def cards(html: str) -> dict[str, str]:
    return dict(re.findall(r'<article id="sla-[^"]*" class="panel sla [^"]*" '
                           r'data-type="([^"]+)">(.*?)</article>', html, re.S))


def shown(card: str, testid: str) -> str:
    return re.search(rf'data-testid="{testid}">(.*?)</(?:span|dd)>', card, re.S).group(1).strip()


@pytest.fixture
def page(operator, incident):
    return cards(operator.get("/sla").get_data(as_text=True))


def test_every_type_that_ran_waits_or_has_a_target_has_a_card(page, incident):
    real = {t for (t,) in rows(incident.url, """
        SELECT type FROM job_executions_all WHERE started_at > now() - interval '1 hour'
        UNION SELECT type FROM background_jobs WHERE status = 'pending' AND available_at <= now()
        UNION SELECT type FROM job_types WHERE sla_seconds IS NOT NULL""")}
    assert set(page) == real
    assert shown(page["mail.send"], "sla-target").startswith(age(SLA_S))


def test_waiting_jobs_and_the_oldest_wait(page, incident):
    waiting = {t: (n, float(s)) for t, n, s in rows(incident.url, """
        SELECT type, count(*), extract(epoch FROM now() - min(available_at))
        FROM background_jobs WHERE status = 'pending' AND available_at <= now()
        GROUP BY type""")}
    for type_, card in page.items():
        n, oldest = waiting.get(type_, (0, None))
        assert int(shown(card, "sla-pending")) == n, type_
        # The page read the clock a moment before this query did: the age it showed is
        # that of some instant of the last few seconds.
        text = shown(card, "sla-oldest")
        if oldest is None:
            assert text == age(None), type_
        else:
            assert text in {age(oldest - d / 1000) for d in range(0, 3000)}, type_


def test_time_to_start_and_duration_percentiles(page, incident):
    executions: dict[str, list[tuple]] = {}
    for type_, wait_s, duration_ms in rows(incident.url, """
        SELECT type, extract(epoch FROM started_at - scheduled_at)::float8, duration_ms
        FROM job_executions_all WHERE started_at > now() - interval '1 hour'"""):
        executions.setdefault(type_, []).append((wait_s, duration_ms))
    assert len(executions) >= 4
    for type_, runs in executions.items():
        waits = [w for w, _ in runs]
        durations = [d for _, d in runs if d is not None]
        card = page[type_]
        assert shown(card, "wait-p50") == age(percentile_cont(waits, 0.5)), type_
        assert shown(card, "wait-p95") == age(percentile_cont(waits, 0.95)), type_
        assert shown(card, "duration-p50") == millis(percentile_cont(durations, 0.5)), type_
        assert shown(card, "duration-p95") == millis(percentile_cont(durations, 0.95)), type_


def test_breached_intervals_count_the_five_minutes_whose_worst_wait_passed_the_target(
        page, incident):
    targets = dict(rows(incident.url, "SELECT type, sla_seconds FROM job_types "
                                      "WHERE sla_seconds IS NOT NULL"))
    for type_, card in page.items():
        target = targets.get(type_)
        worst = [0.0] * 12
        for ago_s, wait_s in rows(incident.url, """
            SELECT extract(epoch FROM now() - started_at)::float8,
                   extract(epoch FROM started_at - scheduled_at)::float8
            FROM job_executions_all WHERE type = %s AND started_at > now() - interval '1 hour'""",
                                  [type_]):
            bucket = int(ago_s // 300)
            worst[bucket] = max(worst[bucket], wait_s)
        (oldest,) = rows(incident.url, "SELECT extract(epoch FROM now() - min(available_at)) "
                                       "FROM background_jobs WHERE type = %s AND status = "
                                       "'pending' AND available_at <= now()", [type_])[0]
        worst[0] = max(worst[0], float(oldest or 0))  # the newest includes those waiting
        breached = sum(target is not None and w > target for w in worst)
        assert shown(card, "breached-intervals").startswith(f"{breached} of 12"), type_
        assert ('data-testid="sla-breach"' in card) == (breached > 0), type_
    assert "mail.send" in targets and 'data-testid="sla-breach"' in page["mail.send"]


def test_failure_rate_counts_jobs_that_reached_an_outcome_and_raised_rate_executions(
        page, incident):
    url = incident.url
    for type_, card in page.items():
        outcomes = dict(rows(url, """
            SELECT outcome, count(*) FROM (
                SELECT outcome FROM job_executions
                WHERE type = %(t)s AND finished_at > date_trunc('minute', now())
                                                    - interval '59 minutes'
                  AND outcome IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')
                UNION ALL
                SELECT a.to_status FROM job_audit a JOIN background_jobs j ON j.id = a.job_id
                WHERE j.type = %(t)s AND a.at > date_trunc('minute', now())
                                               - interval '59 minutes'
                  AND a.from_status IS DISTINCT FROM a.to_status
                  AND a.to_status IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')
            ) o GROUP BY 1""", {"t": type_}))
        final = sum(n for o, n in outcomes.items() if o != "unknown")
        failed = outcomes.get("failed", 0)
        text = shown(card, "failure-rate")
        assert text.startswith(percent(failed / final if final else None)), type_
        assert f"{failed} failed of {final} finished jobs" in text, type_
        if outcomes.get("unknown"):
            assert f"{outcomes['unknown']} unknown, awaiting review" in text, type_
        started, finished, raised = rows(url, """
            SELECT count(*), count(finished_at),
                   count(*) FILTER (WHERE outcome IN ('retry', 'failed', 'timeout', 'unknown'))
            FROM job_executions_all WHERE type = %s AND started_at > now() - interval '1 hour'""",
                                         [type_])[0]
        text = shown(card, "raised-rate")
        assert text.startswith(percent(raised / finished if finished else None)), type_
        assert f"{raised} of {finished} finished executions, {started} started" in text, type_
