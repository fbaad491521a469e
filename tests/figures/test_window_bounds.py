"""The trailing windows of the console's figures, with records on both sides of each
bound: the last hour of outcomes (the minute rollup: this minute and the 59 before it;
/failed's retrying and failed groups read it too), the last hour of recoveries, the SLA
page's hour of executions (its timings rollup: the 5 minutes now and the 11 before), a
worker's last 5 minutes of executions (per minute) and the metrics' 5-minute families.

Records are written into the base tables at times relative to the database clock and
the rollup is rebuilt from them (jobwarden_rollup_rebuild, the runtime's own function).
Each figure a page shows is compared with a count over `job_executions` and
`job_audit` written here, and with the number of records seeded inside its window.
A window that reaches too far (every recovery ever, 60 minutes of rollup instead of 59,
10 minutes of executions) counts records seeded outside it and shows a different figure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

import psycopg
import pytest

from tests.figures.conftest import WORKER, rows
from tests.figures.test_console_figures import metric_samples
from tests.figures.test_overview_figures import by_testid
from tests.figures.test_sla_figures import HOUR, PERIOD, cards, shown

#: How far from a bound that is not a minute's edge a record is written: the clock moves
#: while a page is read, and a record must stay on its side (checked, see `stable`).
MARGIN = timedelta(seconds=30)
#: The marker of the records written here (removed before each new try).
MARK = '{"bounds": true}'
LOST_WORKER = "bounds-lost:2:ee"
OTHER_WORKER = "bounds-host:1:ff"


@dataclass
class Seeded:
    """What a try wrote: the clock and its minute, and how many records each window holds
    of those written for it (inside) and leaves out (outside)."""

    now: datetime
    minute: datetime
    inside: dict[str, int]
    outside: dict[str, int]


def _execution(conn, *, job_type: str, queue: str, status: str, outcome: str,
               finished: datetime, worker: str, code: str | None = None,
               attempts: int = 1) -> None:
    """A job and the execution that ended it at `finished`."""
    ended_at = {"completed": "completed_at", "failed": "failed_at"}.get(status)
    job_id = conn.execute(
        "INSERT INTO background_jobs (queue, type, payload, status, attempts, max_attempts, "
        "last_error_code, created_at, available_at"
        + (f", {ended_at}" if ended_at else "") + ") "
        "VALUES (%(q)s, %(t)s, %(mark)s, %(s)s, %(a)s, 3, %(code)s, %(at)s - interval '1 s', "
        "%(available)s" + (", %(at)s" if ended_at else "") + ") RETURNING id",
        {"q": queue, "t": job_type, "mark": MARK, "s": status, "a": attempts, "code": code,
         "at": finished,
         # A recovered job waits for its next attempt a day from now: not runnable.
         "available": finished + timedelta(days=1) if status == "pending" else finished,
         }).fetchone()[0]
    conn.execute(
        "INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id, "
        "scheduled_at, started_at, finished_at, outcome, error_code, duration_ms) "
        "VALUES (%s, gen_random_uuid(), %s, %s, %s, %s, %s - interval '1 s', "
        "%s - interval '1 s', %s, %s, %s, 1000)",
        [job_id, attempts, queue, job_type, worker, finished, finished, finished, outcome,
         code])


def seed(url: str) -> Seeded:
    """Write the records of every window, both sides of its bound, and rebuild the rollup."""
    with psycopg.connect(url) as conn:
        conn.execute("DELETE FROM job_executions WHERE job_id IN (SELECT id FROM "
                     "background_jobs WHERE payload @> %s::jsonb)", [MARK])
        conn.execute("DELETE FROM background_jobs WHERE payload @> %s::jsonb", [MARK])
        now, minute = conn.execute("SELECT now(), date_trunc('minute', now())").fetchone()
        # The rollup's hour starts at the minute 59 minutes before this one: a record at
        # that instant is in, one a millisecond earlier is in the minute before it.
        first = minute - timedelta(minutes=59)
        just_before = first - timedelta(milliseconds=1)
        inside = {"completed": 3, "failed": 2, "recovered": 2, "rate": 4}
        outside = {"completed": 7, "failed": 5, "recovered": 3 + 4, "rate": 6 + 8}
        for at, n in ((first, inside["completed"]), (just_before, outside["completed"])):
            for _ in range(n):
                _execution(conn, job_type="mail.send", queue="email", status="completed",
                           outcome="completed", finished=at, worker=OTHER_WORKER)
        for at, n in ((first, inside["failed"]), (just_before, outside["failed"])):
            for _ in range(n):
                _execution(conn, job_type="report.build", queue="reports", status="failed",
                           outcome="failed", finished=at, worker=OTHER_WORKER,
                           code="BOUND_FAIL", attempts=3)
        # Retries with a code, at the rollup hour's first instant and just before: their
        # jobs wait (a day from now) for another attempt.
        for at, n in ((first, 2), (just_before, 3)):
            for _ in range(n):
                _execution(conn, job_type="mail.send", queue="email", status="pending",
                           outcome="retry", finished=at, worker=OTHER_WORKER,
                           code="BOUND_RETRY")
        inside["retried"], outside["retried"] = 2, 3
        # Recoveries: an hour ago by the clock, either side; and one three days ago.
        hour = now - timedelta(hours=1)
        for at, n in ((hour + MARGIN, 2), (hour - MARGIN, 3), (now - timedelta(days=3), 4)):
            for _ in range(n):
                _execution(conn, job_type="bill.charge", queue="billing", status="pending",
                           outcome="worker_lost", finished=at, worker=LOST_WORKER,
                           code="WORKER_LOST")
        # The figures' worker: 5 minutes ago either side, and 10 minutes ago.
        five = now - timedelta(minutes=5)
        for at, n in ((five + MARGIN, 4), (five - MARGIN, 6),
                      (now - timedelta(minutes=10) + MARGIN, 8)):
            for _ in range(n):
                _execution(conn, job_type="mail.send", queue="email", status="completed",
                           outcome="completed", finished=at, worker=WORKER)
        # The same hour a day and a week ago (the completions alert's usual figure): each
        # window's records either side of both its bounds.
        for hours in (24, 168):
            end, start = now - timedelta(hours=hours), now - timedelta(hours=hours + 1)
            for at, n in ((end - MARGIN, 2), (start + MARGIN, 3), (end + MARGIN, 5),
                          (start - MARGIN, 7)):
                for _ in range(n):
                    _execution(conn, job_type="mail.send", queue="email", status="completed",
                               outcome="completed", finished=at, worker=OTHER_WORKER)
        inside["usual"], outside["usual"] = 2 + 3, 5 + 7
        # The SLA page's hour (its timings rollup, migration 0086): the 5 minutes now and
        # the 11 before, executions started at its first instant and a millisecond before.
        # Handed back (no outcome any other window counts), their jobs waiting a day.
        (period,) = conn.execute(f"SELECT {PERIOD.format('now()')}").fetchone()
        first_period = period - timedelta(minutes=55)
        for at, n in ((first_period, 2), (first_period - timedelta(milliseconds=1), 3)):
            for _ in range(n):
                _execution(conn, job_type="sla.bound", queue="sla", status="pending",
                           outcome="handed_back", finished=at + timedelta(seconds=1),
                           worker=OTHER_WORKER)
        inside["sla"], outside["sla"] = 2, 3
        conn.execute("SELECT jobwarden_rollup_rebuild()")
        conn.commit()
    return Seeded(now, minute, inside, outside)


def stable(url: str, seeded: Seeded) -> bool:
    """Whether every record is still on the side of its bound it was written for: the same
    minute (the rollup's hour moves with it), and the clock less than MARGIN further."""
    now, minute = rows(url, "SELECT now(), date_trunc('minute', now())")[0]
    return minute == seeded.minute and now - seeded.now < MARGIN


def read_stable(url: str, read):
    """Seed, then `read()` the pages and their independent counts, again if the clock moved
    a record across its bound meanwhile (a minute's edge comes every minute)."""
    for _ in range(5):
        seeded = seed(url)
        found = read()
        if stable(url, seeded):
            return seeded, found
    pytest.fail("the database clock crossed a minute's edge in each of 5 tries")


#: The last hour's outcomes as the rollup counts them, from the records: executions that
#: ended the job or sent it back for another attempt, and operators' moves.
HOUR_OUTCOMES = """
    SELECT outcome, count(*) FROM (
        SELECT CASE WHEN outcome IN ('retry', 'worker_lost', 'timeout')
                         AND j.status IN ('pending', 'running') THEN 'retried'
                    ELSE e.outcome END AS outcome
        FROM job_executions e JOIN background_jobs j ON j.id = e.job_id
        WHERE e.finished_at >= date_trunc('minute', now()) - interval '59 minutes'
          AND e.outcome NOT IN ('handed_back', 'snoozed')
        UNION ALL
        SELECT to_status FROM job_audit
        WHERE at >= date_trunc('minute', now()) - interval '59 minutes'
          AND from_status IS DISTINCT FROM to_status
          AND to_status IN ('completed', 'failed', 'cancelled', 'skipped', 'unknown')
    ) o GROUP BY 1"""


def marked_in_hour(url: str, outcome: str) -> int:
    """Records written here with `outcome` in the rollup's hour."""
    return rows(url, """
        SELECT count(*) FROM job_executions e JOIN background_jobs j ON j.id = e.job_id
        WHERE j.payload @> %s::jsonb AND e.outcome = %s
          AND e.finished_at >= date_trunc('minute', now()) - interval '59 minutes'""",
                [MARK, outcome])[0][0]


def test_the_overview_and_metrics_count_only_the_last_hour(operator, seeded):
    url = seeded.url

    def read():
        html = operator.get("/").get_data(as_text=True)
        text = operator.get("/metrics").get_data(as_text=True)
        outcomes = dict(rows(url, HOUR_OUTCOMES))
        (lost,) = rows(url, "SELECT count(*) FROM job_executions WHERE outcome = "
                            "'worker_lost' AND finished_at > now() - interval '1 hour'")[0]
        recovered_jobs = {j for (j,) in rows(
            url, "SELECT job_id FROM job_executions WHERE outcome = 'worker_lost' "
                 "AND finished_at > now() - interval '1 hour'")}
        marked = {o: marked_in_hour(url, o) for o in ("completed", "failed")}
        return html, text, outcomes, lost, recovered_jobs, marked

    bounds, (html, text, outcomes, lost, recovered_jobs, marked) = read_stable(url, read)
    finished = sum(outcomes.values())
    # The fixture's own records all ended this minute; these are ours inside the hour.
    assert lost == bounds.inside["recovered"] + len(seeded.ids["recovered"])
    assert int(by_testid(html, "recovered-last-hour")) == lost
    shown_recovered = {int(j) for j in re.findall(
        r'data-job="(\d+)"', html.split('data-testid="recovered-jobs"')[1].split("</table>")[0])}
    assert shown_recovered == recovered_jobs
    assert int(by_testid(html, "outcomes-last-hour")) == finished
    assert int(by_testid(html, "completed-last-hour")) == outcomes["completed"]
    # Of the records written here, those inside the hour: the completions at its first
    # instant and the worker's (10 minutes ago at most), not the 7 a millisecond before.
    assert marked["completed"] == bounds.inside["completed"] + 4 + 6 + 8
    last_hour = {k[0]: v for k, v in metric_samples(
        text, "jobwarden_executions_last_hour", "outcome").items()}
    assert last_hour == {"all": finished, "completed": outcomes["completed"],
                         "worker_lost": lost, "snoozed": 1}
    failure_rate = float(re.search(r"^jobwarden_failure_rate_last_hour (\S+)$", text,
                                   re.M).group(1))
    assert failure_rate == pytest.approx(outcomes["failed"] / finished)


def test_the_sla_pages_failure_rate_counts_only_the_last_hour(operator, seeded):
    url = seeded.url

    def read():
        page = cards(operator.get("/sla").get_data(as_text=True))
        per_type = {}
        for t in page:
            per_type[t] = dict(rows(url, """
                SELECT outcome, count(*) FROM (
                    SELECT e.outcome FROM job_executions e
                    WHERE e.type = %(t)s
                      AND e.finished_at >= date_trunc('minute', now()) - interval '59 minutes'
                      AND e.outcome IN ('completed', 'failed', 'cancelled', 'skipped',
                                        'unknown')
                    UNION ALL
                    SELECT a.to_status FROM job_audit a JOIN background_jobs j ON j.id = a.job_id
                    WHERE j.type = %(t)s
                      AND a.at >= date_trunc('minute', now()) - interval '59 minutes'
                      AND a.from_status IS DISTINCT FROM a.to_status
                      AND a.to_status IN ('completed', 'failed', 'cancelled', 'skipped',
                                          'unknown')
                ) o GROUP BY 1""", {"t": t}))
        started = {t: rows(url, f"""
            SELECT count(*), count(finished_at),
                   count(*) FILTER (WHERE outcome IN ('retry', 'failed', 'timeout', 'unknown'))
            FROM job_executions_all WHERE type = %s AND {HOUR}
            """, [t])[0] for t in page}
        (sla_started,) = rows(url, f"""
            SELECT count(*) FROM job_executions e JOIN background_jobs j ON j.id = e.job_id
            WHERE j.payload @> %s::jsonb AND e.type = 'sla.bound' AND e.{HOUR}""", [MARK])[0]
        return page, per_type, marked_in_hour(url, "failed"), started, sla_started

    bounds, (page, per_type, marked_failed, started, sla_started) = read_stable(url, read)
    assert marked_failed == bounds.inside["failed"]
    assert sla_started == bounds.inside["sla"]
    assert shown(page["sla.bound"], "raised-rate").endswith(
        f"0 of {bounds.inside['sla']} finished executions, {bounds.inside['sla']} started")
    for type_, outcomes in per_type.items():
        final = sum(n for o, n in outcomes.items() if o != "unknown")
        failed = outcomes.get("failed", 0)
        assert f"{failed} failed of {final} finished jobs" in shown(page[type_],
                                                                      "failure-rate"), type_
        n, finished, raised = started[type_]
        assert f"{raised} of {finished} finished executions, {n} started" in shown(
            page[type_], "raised-rate"), type_


def test_the_five_minute_metrics_count_only_the_last_5_minutes(operator, seeded):
    """jobwarden_executions_last_5m and the duration and time-to-start histograms' counts."""
    url = seeded.url

    def read():
        text = operator.get("/metrics").get_data(as_text=True)
        finished = dict(((q, t, o, c), float(n)) for q, t, o, c, n in rows(url, """
            SELECT queue, type, outcome, coalesce(error_code, ''), count(*) FROM job_executions
            WHERE finished_at > now() - interval '5 minutes' GROUP BY 1, 2, 3, 4"""))
        timed = dict((t, float(n)) for t, n in rows(url, """
            SELECT type, count(*) FROM job_executions WHERE duration_ms IS NOT NULL
              AND finished_at > now() - interval '5 minutes' GROUP BY 1"""))
        waited = dict((t, float(n)) for t, n in rows(url, """
            SELECT type, count(*) FROM job_executions_all
            WHERE started_at > now() - interval '5 minutes' GROUP BY 1"""))
        (marked,) = rows(url, """
            SELECT count(*) FROM job_executions e JOIN background_jobs j ON j.id = e.job_id
            WHERE j.payload @> %s::jsonb AND e.finished_at > now() - interval '5 minutes'""",
                         [MARK])[0]
        return text, finished, timed, waited, marked

    bounds, (text, finished, timed, waited, marked) = read_stable(url, read)
    assert marked == bounds.inside["rate"]
    assert metric_samples(text, "jobwarden_executions_last_5m", "queue", "type", "outcome",
                          "error_code") == finished
    for family, real in (("jobwarden_execution_duration_seconds", timed),
                         ("jobwarden_time_to_start_seconds", waited)):
        counts = {k[0]: v for k, v in metric_samples(text, f"{family}_gcount", "type").items()}
        assert {t: n for t, n in counts.items() if n} == real, family


def test_a_workers_rate_is_its_last_5_minutes_per_minute(operator, seeded):
    url = seeded.url

    def read():
        html = operator.get("/workers").get_data(as_text=True)
        (done,) = rows(url, """
            SELECT count(*) FROM job_executions WHERE worker_id = %s
              AND finished_at > now() - interval '5 minutes'
              AND outcome NOT IN ('handed_back', 'worker_lost')""", [WORKER])[0]
        return html, done

    bounds, (html, done) = read_stable(url, read)
    card = html.split(f'id="{WORKER}"')[1].split("</article>")[0]
    # The fixture's executions by this worker (all of them this minute) and our 4 inside.
    (own,) = rows(url, """
        SELECT count(*) FROM job_executions e JOIN background_jobs j ON j.id = e.job_id
        WHERE e.worker_id = %s AND NOT j.payload @> %s::jsonb
          AND e.outcome NOT IN ('handed_back', 'worker_lost')""", [WORKER, MARK])[0]
    assert done == own + bounds.inside["rate"]
    rate = re.search(r'data-testid="worker-rate">([\d.]+) ', card).group(1)
    assert rate == f"{done / 5:.1f}"


def test_the_completions_alert_compares_exactly_the_same_hour_a_day_and_a_week_ago(
        operator, seeded):
    url = seeded.url

    def read():
        html = operator.get("/_overview/alerts").get_data(as_text=True)
        counts = rows(url, """
            SELECT count(*) FILTER (WHERE finished_at > now() - interval '1 hour'),
                   count(*) FILTER (WHERE finished_at > now() - interval '25 hours'
                                      AND finished_at <= now() - interval '24 hours'),
                   count(*) FILTER (WHERE finished_at > now() - interval '169 hours'
                                      AND finished_at <= now() - interval '168 hours')
            FROM job_executions WHERE outcome = 'completed'""")[0]
        return html, counts

    bounds, (html, (last_hour, day_ago, week_ago)) = read_stable(url, read)
    assert day_ago == week_ago == bounds.inside["usual"]
    detail = re.search(r'data-alert="JobwardenCompletionsDropped".*?'
                       r'data-testid="alert-detail">([^<]*)<', html, re.S).group(1)
    assert detail.strip() == (f"{last_hour} in the last hour, "
                              f"usually {(day_ago + week_ago) / 2:.0f}")


def test_failing_now_counts_only_the_last_hours_failures_and_retries(operator, seeded):
    """/failed: a retrying group's retries and a failed group's occurrences of the last
    hour (the sparklines' 60 minutes, this one included)."""
    url = seeded.url

    def read():
        html = operator.get("/failed").get_data(as_text=True)
        occurred = dict(rows(url, """
            SELECT e.error_code, count(*) FROM job_executions e
            WHERE e.error_code IN ('BOUND_RETRY', 'BOUND_FAIL')
              AND e.finished_at >= date_trunc('minute', now()) - interval '59 minutes'
            GROUP BY 1"""))
        return html, occurred

    bounds, (html, occurred) = read_stable(url, read)
    assert occurred == {"BOUND_RETRY": bounds.inside["retried"],
                        "BOUND_FAIL": bounds.inside["failed"]}
    retrying = re.search(r'<tr data-retrying-code="BOUND_RETRY" data-type="mail.send">(.*?)</tr>',
                         html, re.S).group(1)
    assert re.search(r'data-testid="retrying-retries">(\d+) retries', retrying).group(1) == \
        str(occurred["BOUND_RETRY"])
    assert f'aria-label="{occurred["BOUND_RETRY"]} retries in the last hour"' in retrying
    failed = re.search(r'<tr data-error-code="BOUND_FAIL">(.*?)</tr>', html, re.S).group(1)
    assert f'aria-label="{occurred["BOUND_FAIL"]} in the last hour"' in failed

