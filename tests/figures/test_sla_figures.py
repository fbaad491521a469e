"""The SLA page's figures for each job type, against the executions and jobs tables
(the `incident` dataset, tests/figures/conftest.py)."""

from __future__ import annotations

import math
import re

import psycopg
import pytest

from jobwarden.console.web.formatting import age, percent
from tests.figures.conftest import SLA_S, rows

#: The start of the 5 minutes a time falls in, from the epoch (the rollup's periods).
PERIOD = "to_timestamp(floor(extract(epoch FROM {}) / 300) * 300)"
#: The hour the page reads: the 5 minutes now and the 11 before them.
HOUR = f"started_at >= {PERIOD.format('now()')} - interval '55 minutes'"
#: How far a percentile read from the rollup's buckets may be above the exact one
#: (docs/guide/console.md, "SLA"), with a float's rounding at a bucket's edge.
RATIO = 2 ** (1 / 8) * (1 + 1e-9)


def cards(html: str) -> dict[str, str]:
    return dict(re.findall(r'<article id="sla-[^"]*" class="panel sla [^"]*" '
                           r'data-type="([^"]+)">(.*?)</article>', html, re.S))


def shown(card: str, testid: str) -> str:
    return re.search(rf'data-testid="{testid}">(.*?)</(?:span|dd)>', card, re.S).group(1).strip()


@pytest.fixture
def spread(incident):
    """Forty more mail.send executions 10 minutes ago, waits from 60 s to 177 s around its
    2-minute target and run times from 3 ms to 8 s, written to the history as a worker's
    are: the rollup's trigger sees them. Retries and hand-backs: no job reached an outcome
    (the failure rate counts jobs), a quarter raised."""
    with psycopg.connect(incident.url) as conn:
        conn.execute("""
            INSERT INTO job_executions (job_id, execution_id, attempt, queue, type,
                                        worker_id, scheduled_at, started_at, finished_at,
                                        outcome, duration_ms)
            SELECT 100000 + g, gen_random_uuid(), 1, 'email', 'mail.send', 'spread:1:aa',
                   now() - interval '10 min' - make_interval(secs => 57 + 3 * g),
                   now() - interval '10 min', now() - interval '9 min',
                   CASE WHEN g % 4 = 0 THEN 'retry' ELSE 'handed_back' END, 3 * 1.2 ^ g
            FROM generate_series(1, 40) AS g""")
    return incident


@pytest.fixture
def page(operator, spread):
    return cards(operator.get("/sla").get_data(as_text=True))


def test_every_type_that_ran_waits_or_has_a_target_has_a_card(page, incident):
    real = {t for (t,) in rows(incident.url, f"""
        SELECT type FROM job_executions_all WHERE {HOUR}
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


def percentile_disc(values: list[float], p: float) -> float | None:
    """The first value at or past fraction p of the ordered values (percentile_disc)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p * len(ordered) - 1e-9)) - 1]


def within_bucket(shown_value: str, exact: float | None, floor: float) -> bool:
    """A percentile read from the rollup: the exact one, or above it by at most a
    bucket's ratio (or up to `floor`, the first bucket's edge, for tiny values)."""
    if exact is None:
        return shown_value == "None"
    value = float(shown_value)
    return exact <= value * (1 + 1e-9) and value <= max(exact * RATIO, floor * (1 + 1e-9))


def value_of(card: str, testid: str) -> str:
    return re.search(rf'data-value="([^"]*)" data-testid="{testid}"', card).group(1)


def test_time_to_start_and_duration_percentiles_are_within_a_bucket_of_the_exact_ones(
        page, incident):
    executions: dict[str, list[tuple]] = {}
    for type_, wait_s, duration_ms in rows(incident.url, f"""
        SELECT type, extract(epoch FROM started_at - scheduled_at)::float8, duration_ms
        FROM job_executions_all WHERE {HOUR}"""):
        executions.setdefault(type_, []).append((wait_s, duration_ms))
    assert len(executions) >= 4
    for type_, runs in executions.items():
        waits = [w for w, _ in runs]
        durations = [d for _, d in runs if d is not None]
        card = page[type_]
        for q in (50, 95, 99):
            assert within_bucket(value_of(card, f"wait-p{q}"),
                                 percentile_disc(waits, q / 100), 0.001), (type_, q)
            assert within_bucket(value_of(card, f"duration-p{q}"),
                                 percentile_disc(durations, q / 100), 1.0), (type_, q)


def test_over_target_counts_the_waits_past_the_target_and_at_most_a_bucket_under(
        page, incident):
    targets = dict(rows(incident.url, "SELECT type, sla_seconds FROM job_types "
                                      "WHERE sla_seconds IS NOT NULL"))
    for type_, card in page.items():
        if type_ not in targets:
            assert 'data-testid="over-target"' not in card, type_
            continue
        target = float(targets[type_])
        waits = [w for (w,) in rows(incident.url, f"""
            SELECT extract(epoch FROM started_at - scheduled_at)::float8
            FROM job_executions_all WHERE type = %s AND {HOUR}""", [type_])]
        over = sum(w > target for w in waits)
        near = sum(w > target / 2 ** (1 / 8) for w in waits)
        # The rule the docs state: a wait counts when its bucket's upper edge (2^(b/8) ms,
        # bucket 1 + floor(8 log2 ms)) passes the target.
        counted = sum(w * 1000 >= 1 and 2 ** ((1 + math.floor(8 * math.log2(w * 1000))) / 8)
                      > target * 1000 for w in waits)
        assert over <= int(shown(card, "over-target")) == counted <= near, type_
        assert near > over > 0, "the dataset has waits on both sides of the target"


def test_breached_intervals_count_the_five_minutes_whose_worst_wait_passed_the_target(
        page, incident):
    targets = dict(rows(incident.url, "SELECT type, sla_seconds FROM job_types "
                                      "WHERE sla_seconds IS NOT NULL"))
    for type_, card in page.items():
        target = targets.get(type_)
        worst = [0.0] * 12
        # Intervals of 5 whole minutes: 0 is the one now.
        for ago_s, wait_s in rows(incident.url, f"""
            SELECT extract(epoch FROM {PERIOD.format('now()')}
                                      - {PERIOD.format('started_at')})::float8,
                   extract(epoch FROM started_at - scheduled_at)::float8
            FROM job_executions_all WHERE type = %s AND {HOUR}""", [type_]):
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
        started, finished, raised = rows(url, f"""
            SELECT count(*), count(finished_at),
                   count(*) FILTER (WHERE outcome IN ('retry', 'failed', 'timeout', 'unknown'))
            FROM job_executions_all WHERE type = %s AND {HOUR}""", [type_])[0]
        text = shown(card, "raised-rate")
        assert text.startswith(percent(raised / finished if finished else None)), type_
        assert f"{raised} of {finished} finished executions, {started} started" in text, type_
