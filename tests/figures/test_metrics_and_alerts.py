"""Every /metrics family and every Alerts-panel condition, against the base tables
(the `incident` dataset, tests/figures/conftest.py)."""

from __future__ import annotations

import html as html_module
import math
import re
from collections import Counter
from urllib.parse import quote, unquote, urlencode

import psycopg
import pytest

from jobwarden.console.core.config import load_settings
from jobwarden.console.views.metrics import BUCKETS
from tests.figures.conftest import SLA_S, rows

STALE_S = load_settings()["STALE_HEARTBEAT_SECONDS"]
GONE_S = load_settings()["WORKER_GONE_SECONDS"]


def scalar(url: str, sql: str, params=None):
    return rows(url, sql, params)[0][0]


def metric(text: str, name: str, *labels: str) -> dict[tuple, float]:
    """{(values of `labels`): value} of one family in the text format."""
    out = {}
    for found, value in re.findall(rf"^{name}(?:\{{([^}}]*)\}})? (\S+)$", text, re.M):
        given = dict(re.findall(r'(\w+)="([^"]*)"', found or ""))
        out[tuple(given[k] for k in labels)] = float(value)
    return out


@pytest.fixture
def scrape(operator, incident):
    return operator.get("/metrics").get_data(as_text=True)


def test_runnable_pending_and_the_oldest_wait(scrape, incident):
    url = incident.url
    runnable = scalar(url, "SELECT count(*) FROM background_jobs "
                           "WHERE status = 'pending' AND available_at <= now()")
    assert metric(scrape, "jobwarden_runnable_pending_jobs")[()] == runnable
    oldest = scalar(url, "SELECT extract(epoch FROM now() - min(available_at))::float8 "
                         "FROM background_jobs WHERE status = 'pending' AND available_at <= now()")
    # The scrape read the clock a moment before this query did.
    shown = metric(scrape, "jobwarden_oldest_pending_age_seconds")[()]
    assert 1200 <= shown <= oldest < shown + 60
    by_type = metric(scrape, "jobwarden_oldest_pending_age_by_type_seconds", "queue", "type")
    real = {(q, t): float(s) for q, t, s in rows(url, """
        SELECT queue, type, extract(epoch FROM now() - min(available_at)) FROM background_jobs
        WHERE status = 'pending' AND available_at <= now() GROUP BY 1, 2""")}
    assert set(by_type) == set(real)
    for key, seconds in real.items():
        assert by_type[key] <= seconds < by_type[key] + 60, key
    per_queue = metric(scrape, "jobwarden_queue_runnable_jobs", "queue")
    assert per_queue == {(q,): float(n) for q, n in rows(url, """
        SELECT queue, count(*) FROM background_jobs
        WHERE status = 'pending' AND available_at <= now() GROUP BY 1""")}


def test_last_hour_executions_and_rates(scrape, incident):
    url = incident.url
    outcomes = Counter(o for (o,) in rows(url, "SELECT outcome FROM job_executions WHERE "
                                               "finished_at > now() - interval '1 hour'"))
    # Operator moves to an outcome are outcomes too; hand-backs and snoozes are none.
    moves = Counter(s for (s,) in rows(url, """
        SELECT to_status FROM job_audit WHERE at > now() - interval '1 hour'
          AND from_status IS DISTINCT FROM to_status
          AND to_status IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')"""))
    ended = (sum(outcomes.values()) - outcomes["handed_back"] - outcomes["snoozed"]
             + sum(moves.values()))
    last_hour = metric(scrape, "jobwarden_executions_last_hour", "outcome")
    assert last_hour[("all",)] == ended
    assert last_hour[("completed",)] == outcomes["completed"] + moves["completed"]
    assert last_hour[("worker_lost",)] == outcomes["worker_lost"]
    assert last_hour[("snoozed",)] == outcomes["snoozed"] == 1
    retried = outcomes["retry"] + outcomes["worker_lost"]
    failed = outcomes["failed"] + moves["failed"]
    assert math.isclose(metric(scrape, "jobwarden_retry_rate_last_hour")[()], retried / ended)
    assert math.isclose(metric(scrape, "jobwarden_failure_rate_last_hour")[()], failed / ended)


def test_workers_by_state(scrape, incident):
    states = Counter()
    for state, age_s in rows(incident.url, "SELECT state, extract(epoch FROM now() - "
                                           "heartbeat_at) FROM job_workers"):
        states["gone" if state == "running" and age_s > GONE_S else state] += 1
    shown = metric(scrape, "jobwarden_workers", "state")
    assert {k[0]: v for k, v in shown.items() if v} == dict(states)
    assert states == {"running": 1, "gone": 1, "stopped": 1}


def test_executions_of_the_last_five_minutes(scrape, incident):
    real = Counter((q, t, o, c or "") for q, t, o, c in rows(incident.url, """
        SELECT queue, type, outcome, error_code FROM job_executions
        WHERE finished_at > now() - interval '5 minutes'"""))
    shown = metric(scrape, "jobwarden_executions_last_5m", "queue", "type", "outcome",
                   "error_code")
    assert shown == {k: float(n) for k, n in real.items()}


@pytest.fixture
def earlier(incident):
    """Executions that finished 3 minutes ago: in the 5-minute window, not the last
    minute's (every execution of the incident finished in the last few seconds)."""
    with psycopg.connect(incident.url) as conn:
        conn.execute("""
            INSERT INTO job_executions (job_id, execution_id, attempt, queue, type,
                                        worker_id, scheduled_at, started_at, finished_at,
                                        outcome, error_code, duration_ms)
            SELECT 200000 + g, gen_random_uuid(), 1, 'email', 'mail.send', 'earlier:1:aa',
                   now() - interval '4 min', now() - interval '4 min',
                   now() - interval '3 min', o, c, 5
            FROM generate_series(1, 3) AS g,
                 (VALUES ('retry', 'SMTP_TIMEOUT'), ('completed', NULL),
                         ('failed', 'EARLIER_ONLY')) AS x (o, c)""")
    return incident


def test_executions_of_the_last_minute_for_the_storm_alert(operator, earlier):
    text = operator.get("/metrics").get_data(as_text=True)
    window = Counter((q, t, o, c or "") for q, t, o, c in rows(earlier.url, """
        SELECT queue, type, outcome, error_code FROM job_executions
        WHERE finished_at > now() - interval '5 minutes'"""))
    real = Counter((q, t, o, c or "") for q, t, o, c in rows(earlier.url, """
        SELECT queue, type, outcome, error_code FROM job_executions
        WHERE finished_at > now() - interval '1 minute'"""))
    shown = metric(text, "jobwarden_executions_last_1m", "queue", "type", "outcome",
                   "error_code")
    # Every key of the 5 minutes is there, at 0 when none of its executions is recent.
    assert shown == {k: float(real.get(k, 0)) for k in window}
    assert shown[("email", "mail.send", "failed", "EARLIER_ONLY")] == 0
    assert sum(shown.values()) == sum(real.values()) > 0


def histogram(text: str, name: str) -> dict[str, tuple[dict[str, float], float, float]]:
    """{type: ({le: cumulative count}, count, sum)} of a gauge histogram."""
    out: dict[str, tuple[dict, float, float]] = {}
    for (le, type_), n in metric(text, f"{name}_bucket", "le", "type").items():
        out.setdefault(type_, ({}, 0.0, 0.0))[0][le] = n
    for (type_,), n in metric(text, f"{name}_gcount", "type").items():
        out[type_] = (out[type_][0], n, out[type_][2])
    for (type_,), s in metric(text, f"{name}_gsum", "type").items():
        out[type_] = (out[type_][0], out[type_][1], s)
    return out


def expected_histogram(values: dict[str, list[float]]):
    out = {}
    for type_, seen in values.items():
        buckets = {str(b): float(sum(v <= b for v in seen)) for b in BUCKETS}
        buckets["+Inf"] = float(len(seen))
        out[type_] = (buckets, float(len(seen)), sum(max(v, 0.0) for v in seen))
    return out


@pytest.mark.parametrize("family, sql", [
    ("jobwarden_execution_duration_seconds",
     "SELECT type, duration_ms / 1000.0 FROM job_executions "
     "WHERE finished_at > now() - interval '5 minutes' AND duration_ms IS NOT NULL"),
    ("jobwarden_time_to_start_seconds",
     "SELECT type, extract(epoch FROM started_at - scheduled_at)::float8 FROM job_executions_all "
     "WHERE started_at > now() - interval '5 minutes'"),
])
def test_histograms_bucket_every_execution(scrape, incident, family, sql):
    values: dict[str, list[float]] = {}
    for type_, v in rows(incident.url, sql):
        values.setdefault(type_, []).append(float(v))
    shown, real = histogram(scrape, family), expected_histogram(values)
    assert set(shown) == set(real)
    for type_, (buckets, count, total) in real.items():
        assert shown[type_][0] == buckets and shown[type_][1] == count, type_
        assert math.isclose(shown[type_][2], total, abs_tol=1e-6), type_
    assert sum(c for _, c, _ in real.values()) > 40


def test_stale_heartbeats_live_workers_and_sla_targets(scrape, incident):
    url = incident.url
    stale = metric(scrape, "jobwarden_stale_running_jobs", "queue", "type")
    assert stale == {(q, t): float(n) for q, t, n in rows(url, """
        SELECT queue, type, count(*) FROM background_jobs WHERE status = 'running'
          AND (heartbeat_at IS NULL OR heartbeat_at < now() - make_interval(secs => %s))
        GROUP BY 1, 2""", [STALE_S])}
    assert sum(stale.values()) == 2
    live = {r[0]: r[1] for r in rows(url, """
        SELECT q, count(*) FROM job_workers, unnest(queues) q
        WHERE state = 'running' AND heartbeat_at > now() - make_interval(secs => %s)
        GROUP BY 1""", [GONE_S])}
    shown = metric(scrape, "jobwarden_queue_live_workers", "queue")
    assert {q: n for (q,), n in shown.items()} == {
        q: float(live.get(q, 0)) for q in {"email", "reports", "billing", "exports"}}
    assert metric(scrape, "jobwarden_job_type_sla_seconds", "type") == {
        (t,): float(s) for t, s in rows(url, "SELECT type, sla_seconds FROM job_types "
                                             "WHERE sla_seconds IS NOT NULL")}


def test_recovered_and_zombie_counters(scrape, incident):
    recovered = metric(scrape, "jobwarden_recovered_total", "type")
    lost = Counter(t for (t,) in rows(incident.url, "SELECT type FROM job_executions "
                                                    "WHERE outcome = 'worker_lost'"))
    assert {k: v for k, v in recovered.items() if v} == {(t,): float(n)
                                                         for t, n in lost.items()}
    zombies = metric(scrape, "jobwarden_zombie_rejected_total", "type", "learned_by")
    published = {t for (t,) in rows(incident.url, "SELECT type FROM job_types")}
    assert set(zombies) == {(t, k) for t in published for k in ("outcome", "lease")}
    assert set(zombies.values()) == {0.0}


def alert_rows(html: str) -> dict[str, tuple[str, str]]:
    return {name: (state, re.sub(r"\s+", " ", detail).strip()) for name, state, detail in
            re.findall(r'data-alert="(\w+)".*?data-testid="alert-state">(\w+)<.*?'
                       r'data-testid="alert-detail">([^<]*)<', html, re.S)}


def alert_links(html: str) -> dict[str, list[str]]:
    """Each alert row's links, as the addresses they open."""
    return {name: [html_module.unescape(a) for a in
                   re.findall(r'<a href="([^"]+)" data-testid="alert-link">', body)]
            for name, body in re.findall(r'<tr id="alert-\w+" data-alert="(\w+)"(.*?)</tr>',
                                         html, re.S)}


@pytest.fixture
def alerts(operator, incident):
    return alert_rows(operator.get("/_overview/alerts").get_data(as_text=True))


def test_the_failed_rate_alert_judges_each_type_by_its_executions(operator, alerts, incident):
    """Every failed execution counts, retries included (a storm that is still retrying is
    failing now), each type's by error code; types under the minimum are named unjudged."""
    state, detail = alerts["JobwardenFailedRateHigh"]
    per_code = rows(incident.url, """
        SELECT type, coalesce(error_code, ''), count(*) FROM job_executions
        WHERE finished_at > now() - interval '5 minutes'
          AND outcome IN ('retry', 'failed', 'unknown', 'timeout')
        GROUP BY 1, 2 ORDER BY 1, 3 DESC, 2""")
    per_type = dict(rows(incident.url, """
        SELECT type, count(*) FROM job_executions
        WHERE finished_at > now() - interval '5 minutes' GROUP BY 1"""))
    bad = Counter()
    for t, _code, n in per_code:
        bad[t] += n
    assert any(code == "SMTP_TIMEOUT" for _, code, _ in per_code)  # retries count
    over = sorted(t for t, n in per_type.items() if n >= 20 and bad[t] / n > 0.10)
    unjudged = {t: n for t, n in per_type.items() if n < 20 and bad[t]}
    assert (state == "FIRING") == bool(over) and over == ["mail.send"]
    for t in over:
        codes = ", ".join(f"{code} {n}" for ty, code, n in per_code if ty == t)
        assert f"{t} {bad[t] / per_type[t]:.0%} of {per_type[t]} ({codes})" in detail
    for t, n in unjudged.items():
        assert f"{t} {bad[t]} of {n}" in detail
    assert unjudged  # report.build and bill.charge failed under the minimum
    # Each failing code of a type over the rate links to its own failed group.
    links = alert_links(operator.get("/_overview/alerts").get_data(as_text=True))
    assert links["JobwardenFailedRateHigh"] == [
        "/failed/group?" + urlencode({"code": code, "type": t})
        for t in over for ty, code, _n in per_code if ty == t]


def test_the_retry_storm_alert_counts_a_types_retries_by_error_code(operator, incident):
    """Over half of a type's executions of the last 5 minutes retried with one code, at
    least 20 of them: 25 more mail.send jobs retried with SMTP_TIMEOUT make one."""
    with psycopg.connect(incident.url) as conn:
        jobs = [r[0] for r in conn.execute(
            "INSERT INTO background_jobs (queue, type, payload, status, attempts, "
            "last_error_code) SELECT 'email', 'mail.send', '{}', 'pending', 1, "
            "'SMTP_TIMEOUT' FROM generate_series(1, 25) RETURNING id")]
        conn.execute("""INSERT INTO job_executions (job_id, execution_id, attempt, queue, type,
                            worker_id, scheduled_at, started_at, finished_at, outcome,
                            error_code)
                        SELECT id, gen_random_uuid(), 1, 'email', 'mail.send', 'w', now(),
                               now(), now(), 'retry', 'SMTP_TIMEOUT'
                        FROM unnest(%s::bigint[]) AS id""", [jobs])
        conn.commit()
    html = operator.get("/_overview/alerts").get_data(as_text=True)
    state, detail = alert_rows(html)["JobwardenRetryStorm"]
    retried = rows(incident.url, """
        SELECT type, coalesce(error_code, ''), count(*) FROM job_executions
        WHERE finished_at > now() - interval '5 minutes' AND outcome = 'retry'
        GROUP BY 1, 2""")
    per_type = dict(rows(incident.url, """
        SELECT type, count(*) FROM job_executions
        WHERE finished_at > now() - interval '5 minutes' GROUP BY 1"""))
    storms = [(t, c, n) for t, c, n in retried if n >= 20 and n / per_type[t] > 0.5]
    assert storms == [("mail.send", "SMTP_TIMEOUT", storms[0][2])]
    assert state == "FIRING"
    assert detail == f"mail.send {storms[0][2]} of {per_type['mail.send']} retried with SMTP_TIMEOUT"
    assert alert_links(html)["JobwardenRetryStorm"] == [
        "/failed/group?code=SMTP_TIMEOUT&type=mail.send"]


def test_an_ok_alert_links_to_where_it_would_show_and_states_its_minimum(operator, seeded):
    html = operator.get("/_overview/alerts").get_data(as_text=True)
    assert alert_rows(html)["JobwardenRetryStorm"][0] == "ok"
    links = alert_links(html)
    assert links["JobwardenRetryStorm"] == ["/failed#retrying-now"]
    assert links["JobwardenPendingOverSLA"] == ["/sla"]
    conditions = dict(re.findall(r'data-alert="(\w+)".*?data-testid="alert-condition">([^<]+)<',
                                 html, re.S))
    assert "judged on 20 executions or more" in conditions["JobwardenFailedRateHigh"]
    assert "retried" in conditions["JobwardenFailedRateHigh"]


def test_the_sla_alert_names_each_type_waiting_past_its_target(alerts, incident):
    state, detail = alerts["JobwardenPendingOverSLA"]
    over = rows(incident.url, """
        SELECT j.type, extract(epoch FROM now() - min(j.available_at)), t.sla_seconds
        FROM background_jobs j JOIN job_types t USING (type)
        WHERE j.status = 'pending' AND j.available_at <= now()
        GROUP BY j.type, t.sla_seconds
        HAVING extract(epoch FROM now() - min(j.available_at)) > t.sla_seconds""")
    assert state == "FIRING" and [t for t, _, _ in over] == ["mail.send"]
    waited = int(re.search(r"mail\.send waited (\d+)s \(SLA (\d+)s\)", detail).group(1))
    # The panel rounds its reading to the second; this count is read after it.
    assert waited - 0.5 <= float(over[0][1]) < waited + 60
    assert f"(SLA {SLA_S}s)" in detail


def test_the_sla_and_queue_alerts_link_to_their_type_and_queue(operator, incident):
    links = alert_links(operator.get("/_overview/alerts").get_data(as_text=True))
    assert links["JobwardenPendingOverSLA"] == ["/sla#sla-mail.send"]
    assert links["JobwardenNoLiveWorker"] == ["/queues#queue-exports"]
    assert links["JobwardenQueueGrowing"] == ["/queues#queue-exports"]
    assert links["JobwardenStaleHeartbeats"] == ["/#overview-health"]
    sla = operator.get("/sla").get_data(as_text=True)
    queues = operator.get("/queues").get_data(as_text=True)
    assert 'id="sla-mail.send"' in sla and 'id="queue-exports"' in queues


#: A queue and a job type whose names need quoting in a link: a space, a `#` that would
#: end the fragment early, a `&`, a `%` and a `?`.
ODD_QUEUE = "night shift#2 & co"
ODD_TYPE = "export report?x=1&y=50%"


def test_an_alerts_link_quotes_the_name_it_carries(operator, incident):
    """A queue with no live worker and a type waiting past its SLA, both named with
    characters a URL gives meaning to: each link's anchor is quoted, and unquoted it is
    the id of the row or card it opens."""
    with psycopg.connect(incident.url) as conn:
        conn.execute("INSERT INTO background_jobs (queue, type, payload, status, available_at) "
                     "VALUES (%s, %s, '{}', 'pending', now() - interval '10 min')",
                     [ODD_QUEUE, ODD_TYPE])
        conn.execute("INSERT INTO job_types (type, queue, max_attempts, lease_seconds, backoff, "
                     "sla_seconds, version, repeat_safe, published_by) "
                     "VALUES (%s, %s, 5, 60, '{}', 60, 1, true, 'w')", [ODD_TYPE, ODD_QUEUE])
        conn.commit()
    links = alert_links(operator.get("/_overview/alerts").get_data(as_text=True))
    pages = {"/queues": operator.get("/queues").get_data(as_text=True),
             "/sla": operator.get("/sla").get_data(as_text=True)}
    for alert, page, anchor in (("JobwardenNoLiveWorker", "/queues", f"queue-{ODD_QUEUE}"),
                                ("JobwardenPendingOverSLA", "/sla", f"sla-{ODD_TYPE}")):
        (link,) = [a for a in links[alert] if unquote(a.partition("#")[2]) == anchor]
        assert link == f"{page}#{quote(anchor, safe='')}", alert
        assert f'id="{html_module.escape(anchor)}"' in pages[page], alert
    # The overview's banner of SLA breaches links to the same card.
    banner = operator.get("/").get_data(as_text=True).split('data-testid="sla-breaches"')[1]
    breached = [html_module.unescape(a) for a in re.findall(r'<a href="([^"]+)"',
                                                            banner.split("</div>")[0])]
    assert f"/sla#{quote(f'sla-{ODD_TYPE}', safe='')}" in breached, breached


def test_the_heartbeat_and_worker_alerts(alerts, incident):
    stale = scalar(incident.url, "SELECT count(*) FROM background_jobs WHERE status = "
                                 "'running' AND heartbeat_at < now() - make_interval(secs => %s)",
                   [STALE_S])
    assert alerts["JobwardenStaleHeartbeats"] == (
        "FIRING", f"{stale} running job(s) without a fresh heartbeat")
    orphaned = [q for (q,) in rows(incident.url, """
        SELECT DISTINCT j.queue FROM background_jobs j
        WHERE j.status = 'pending' AND j.available_at <= now()
          AND NOT EXISTS (SELECT 1 FROM job_workers w
                          WHERE w.state = 'running'
                            AND w.heartbeat_at > now() - make_interval(secs => %s)
                            AND (j.queue = ANY(w.queues) OR '*' = ANY(w.queues)))
        ORDER BY 1""", [GONE_S])]
    assert orphaned == ["exports"]
    assert alerts["JobwardenNoLiveWorker"] == ("FIRING", "no live worker for exports")


def test_a_queue_growing_is_judged_by_how_much_its_backlog_grew(alerts, incident):
    """Growth over 15 minutes = runnable now − runnable then, where a job was runnable
    then if it is pending since before, or an execution started it only later."""
    url = incident.url
    now_depth = dict(rows(url, "SELECT queue, count(*) FROM background_jobs WHERE status = "
                               "'pending' AND available_at <= now() GROUP BY 1"))
    then_depth = Counter(dict(rows(url, """
        SELECT queue, count(*) FROM (
            SELECT queue FROM background_jobs WHERE status = 'pending'
              AND available_at <= now() - interval '15 minutes'
            UNION ALL
            SELECT queue FROM job_executions_all
            WHERE scheduled_at <= now() - interval '15 minutes'
              AND started_at > now() - interval '15 minutes') w GROUP BY 1""")))
    growth = {q: n - then_depth[q] for q, n in now_depth.items()}
    assert (growth["exports"], now_depth["exports"]) == (25, 55)
    state, detail = alerts["JobwardenQueueGrowing"]
    assert state == "FIRING"
    assert detail == ", ".join(f"{q} (+{growth[q]} in 15 min, {now_depth[q]} waiting)"
                               for q in sorted(growth) if growth[q] > 0 and now_depth[q] >= 50)


def test_the_completions_alert_compares_the_same_hour_a_day_and_a_week_ago(alerts, incident):
    last, day, week = rows(incident.url, """
        SELECT count(*) FILTER (WHERE finished_at > now() - interval '1 hour'),
               count(*) FILTER (WHERE finished_at BETWEEN now() - interval '25 hours'
                                                      AND now() - interval '24 hours'),
               count(*) FILTER (WHERE finished_at BETWEEN now() - interval '169 hours'
                                                      AND now() - interval '168 hours')
        FROM job_executions WHERE outcome = 'completed'""")[0]
    usual = (day + week) / 2
    assert (day, week) == (100, 100) and last < usual / 2
    assert alerts["JobwardenCompletionsDropped"] == (
        "FIRING", f"{last} in the last hour, usually {usual:.0f}")
