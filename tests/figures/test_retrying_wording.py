"""What /failed and a failed group's page say of jobs still retrying, against independent
counts: a next attempt in the past reads "overdue by …" with what its queue's jobs wait
now (the median wait of those started in the last 5 minutes, or that none started, or
that the queue is paused), one in the future reads "in …"; and a group's page says how
many jobs of its code still wait for (or run) another attempt, beside its failed ones."""

from __future__ import annotations

import statistics
from datetime import datetime
from urllib.parse import urlencode

import psycopg
import pytest

from tests.figures.conftest import rows
from tests.figures.html_tree import page


def make_overdue(url: str, minutes: int = 4) -> tuple[int, str]:
    """One retried SMTP_TIMEOUT job due `minutes` ago: its id and queue."""
    with psycopg.connect(url) as conn:
        job_id, queue = conn.execute(
            "UPDATE background_jobs SET available_at = now() - make_interval(mins => %s) "
            "WHERE id = (SELECT min(id) FROM background_jobs WHERE status = 'pending' "
            "AND last_error_code = 'SMTP_TIMEOUT') RETURNING id, queue", [minutes]).fetchone()
    return job_id, queue


def next_cell(doc, code: str, job_type: str):
    row = doc.one(lambda e: e.attrs.get("data-retrying-code") == code
                  and e.attrs.get("data-type") == job_type and e.tag == "tr")
    return row.one("retrying-next")


def queue_wait(url: str, queue: str) -> tuple[int, float] | None:
    waits = [w for (w,) in rows(url, """
        SELECT extract(epoch FROM started_at - scheduled_at)::float8 FROM job_executions
        WHERE queue = %s AND started_at > now() - interval '5 minutes'""", [queue])]
    return (len(waits), statistics.median(waits)) if waits else None


def test_an_overdue_next_attempt_says_so_with_its_queues_wait(operator, seeded):
    queue = make_overdue(seeded.url)[1]
    doc = page(operator, "/failed")
    cell = next_cell(doc, "SMTP_TIMEOUT", "mail.send")
    overdue = cell.one("next-overdue")
    due = rows(seeded.url, "SELECT min(available_at) FROM background_jobs WHERE status = "
                           "'pending' AND last_error_code = 'SMTP_TIMEOUT' AND type = "
                           "'mail.send'")[0][0]
    assert datetime.fromisoformat(overdue["datetime"]) == due
    assert overdue.text().startswith("overdue by 4m ")
    wait = cell.one("queue-wait")
    assert wait["data-queue"] == queue == "email"
    started, median = queue_wait(seeded.url, queue)
    assert (int(wait["data-started"]), float(wait["data-wait-s"])) == (started,
                                                                       round(median, 3))
    assert f"queue {queue} waits ~" in wait.text() and f"its {started} job(s)" in wait.text()
    assert "ago" not in cell.text()
    # The other side of the line: PROVIDER_DOWN's next attempt is an hour ahead.
    ahead = next_cell(doc, "PROVIDER_DOWN", "mail.send")
    assert ahead.maybe("next-overdue") is None and ahead.maybe("queue-wait") is None
    assert " in 59m " in f" {ahead.text()} " or " in 1h " in f" {ahead.text()} "

    # The group's page says the same.
    group = page(operator, "/failed/group?" + urlencode({"code": "SMTP_TIMEOUT"}))
    assert group.one("group-retrying").one("next-overdue").text().startswith("overdue by 4m ")
    assert group.one("group-retrying").one("queue-wait")["data-queue"] == queue


@pytest.mark.parametrize("state", ["paused", "idle"])
def test_an_overdue_attempts_queue_paused_or_idle_says_so(operator, seeded, state):
    queue = make_overdue(seeded.url)[1]
    with psycopg.connect(seeded.url) as conn:
        if state == "paused":
            conn.execute("INSERT INTO queue_controls (queue, paused, changed_by) "
                         "VALUES (%s, true, 'ann')", [queue])
        else:  # nothing of the queue started in the last 5 minutes
            conn.execute("UPDATE job_executions SET started_at = started_at - "
                         "interval '10 minutes', scheduled_at = scheduled_at - "
                         "interval '10 minutes' WHERE queue = %s", [queue])
    wait = next_cell(page(operator, "/failed"), "SMTP_TIMEOUT", "mail.send").one("queue-wait")
    if state == "paused":
        assert wait.text().endswith(f"queue {queue} is paused")
    else:
        assert queue_wait(seeded.url, queue) is None
        assert wait.text().endswith(f"queue {queue}: none of its jobs started in the last "
                                    "5 min") and "data-wait-s" not in wait.attrs


def retrying_real(url: str, code: str | None, job_type: str | None) -> int:
    return rows(url, """
        SELECT count(*) FROM background_jobs
        WHERE status IN ('pending', 'running') AND last_error_code IS NOT NULL
          AND (%(code)s::text IS NULL OR last_error_code = %(code)s::text)
          AND (%(type)s::text IS NULL OR type = %(type)s::text)""",
                {"code": code, "type": job_type})[0][0]


def test_each_groups_page_counts_its_codes_jobs_still_retrying(operator, seeded):
    with psycopg.connect(seeded.url) as conn:  # a code whose jobs all still retry
        conn.execute("INSERT INTO background_jobs (queue, type, payload, status, attempts, "
                     "max_attempts, last_error_code) SELECT 'email', 'mail.send', '{}', "
                     "'pending', 1, 3, 'ONLY_RETRYING' FROM generate_series(1, 3)")
    codes = [c for (c,) in rows(seeded.url, "SELECT DISTINCT last_error_code FROM "
                                            "background_jobs WHERE last_error_code IS NOT NULL")]
    types = [t for (t,) in rows(seeded.url, "SELECT DISTINCT type FROM background_jobs")]
    pages = [(c, None) for c in codes] + [(None, t) for t in types] + \
        [(c, t) for c in codes for t in types]
    seen = set()
    for code, job_type in pages:
        doc = page(operator, "/failed/group?" + urlencode(
            {k: v for k, v in (("code", code), ("type", job_type)) if v}))
        real = retrying_real(seeded.url, code, job_type)
        shown = doc.maybe("retrying-count")
        assert (int(shown.text()) if shown else 0) == real, (code, job_type)
        seen.add(real > 0)
    assert seen == {True, False}  # both sides: pages with retrying jobs, and without
    only = page(operator, "/failed/group?code=ONLY_RETRYING")
    assert only.one("preview-count").text() == "0" and only.one("retrying-count").text() == "3"

