"""The overview's trends, usual rate, SLA breaches and the navigation's badges."""

from __future__ import annotations

import re

import pytest

from jobwarden.console.data import sample_data


@pytest.fixture
def scenario(engine):
    with engine.begin() as conn:
        return sample_data.seed_console_scenario(conn)


def test_usual_rate_sits_beside_the_last_hour(viewer, engine, clean_db):
    """The article's example: usually 500/min at this hour, 7/min today."""
    with engine.begin() as conn:
        conn.exec_driver_sql("""
            INSERT INTO job_minute_counts (minute, queue, type, outcome, jobs)
            SELECT date_trunc('minute', now()) - make_interval(days => d, mins => m),
                   'email', 'send_email', 'completed', 500
            FROM generate_series(1, 7) d, generate_series(0, 59) m""")
        # 70 jobs completed by one statement now: the trigger counts them.
        conn.exec_driver_sql("""
            INSERT INTO background_jobs (queue, type, payload, status, attempts,
                                         execution_id, started_at)
            SELECT 'email', 'send_email', '{}', 'running', 1, gen_random_uuid(), now()
            FROM generate_series(1, 70)""")
        conn.exec_driver_sql("UPDATE background_jobs SET status = 'completed', "
                             "completed_at = now() WHERE status = 'running'")
        # ... in the minute that just ended (the clock driven, not waited for): the rates
        # are over the last 10 full minutes.
        conn.exec_driver_sql("UPDATE job_minute_counts SET minute = minute - interval '1 minute' "
                             "WHERE minute = date_trunc('minute', now())")
    html = viewer.get("/").get_data(as_text=True)
    usual = re.search(r'data-testid="usual-completed">\s*([^<]*)<', html).group(1)
    assert "usually 500.0/min" in usual
    assert 'data-value="7.0">7.0/min' in html
    # Another queue has no such history: the filter shows its own numbers; so does a type.
    other = viewer.get("/_overview/trends?range=24h&queue=reports").get_data(as_text=True)
    assert "no usual rate yet" in other and 'data-value="0.0"' in other
    typed = viewer.get("/_overview/trends?type=send_email").get_data(as_text=True)
    assert "usually 500.0/min" in typed and 'data-value="7.0">7.0/min' in typed
    assert "type send_email" in typed
    assert re.search(r'id="overview-trends-body"[^>]*hx-get="[^"]*type=send_email', typed)
    none = viewer.get("/_overview/trends?type=other_type").get_data(as_text=True)
    assert "no usual rate yet" in none


def test_the_chart_draws_three_series_with_axes(viewer, scenario):
    for rng, buckets, last_label in (("1h", 60, "-1h"), ("24h", 144, "-24h")):
        html = viewer.get(f"/_overview/trends?range={rng}").get_data(as_text=True)
        for outcome in ("completed", "failed", "retried"):
            points = re.search(rf'data-outcome="{outcome}"', html)
            assert points, outcome
        polyline = re.search(r'points="([^"]*)" data-outcome="completed"', html).group(1)
        assert len(polyline.split()) == buckets
        assert ">last min<" in html and f">{last_label}<" in html
        assert html.count('class="hover"') == buckets


def test_navigation_badges_count_failed_review_and_breaches(viewer, scenario):
    html = viewer.get("/jobs").get_data(as_text=True)
    # seed: 9 failed, 1 unknown
    assert re.search(r'data-testid="nav-badge-failed">9<', html)
    assert re.search(r'data-testid="nav-badge-review">1<', html)


def test_the_overview_lists_firing_sla_breaches(viewer, engine, clean_db):
    with engine.begin() as conn:
        conn.exec_driver_sql("""
            INSERT INTO job_types (type, queue, max_attempts, lease_seconds, backoff,
                                   sla_seconds, version, repeat_safe, published_by)
            VALUES ('send_email', 'email', 3, 30, '{}', 30, 1, true, 'test')""")
        conn.exec_driver_sql("""
            INSERT INTO background_jobs (queue, type, payload, available_at)
            VALUES ('email', 'send_email', '{}', now() - interval '5 minutes')""")
    html = viewer.get("/").get_data(as_text=True)
    assert 'data-testid="sla-breaches"' in html and "send_email" in html
    assert re.search(r'data-testid="nav-badge-sla">1<', html)


def test_the_unfinished_minute_is_not_drawn_as_a_full_one(viewer, engine, clean_db):
    """60 a minute for an hour, and 5 so far in this minute: the line ends at 60/min."""
    with engine.begin() as conn:
        conn.exec_driver_sql("""
            INSERT INTO job_minute_counts (minute, queue, type, outcome, jobs)
            SELECT date_trunc('minute', now()) - make_interval(mins => m), 'email',
                   'send_email', 'completed', CASE WHEN m = 0 THEN 5 ELSE 60 END
            FROM generate_series(0, 90) m""")
    html = viewer.get("/_overview/trends?range=1h").get_data(as_text=True)
    titles = re.findall(r'<rect class="hover"[^>]*><title>([^<]+)</title>', html)
    assert len(titles) == 60
    assert titles[-1] == "1 min ending 1 min ago: completed 60.0/min, failed 0.0/min, retried 0.0/min"
    assert 'data-value="60.0">60.0/min' in html  # the last hour of full minutes
    assert re.search(r'data-testid="this-minute">5 completed, 0 failed, 0 retried<', html)
    day = viewer.get("/_overview/trends?range=24h").get_data(as_text=True)
    assert re.findall(r'<title>([^<]+)</title>', day)[-1].startswith(
        "10 min ending 1 min ago: completed 60.0/min")
