"""/failed puts what is failing now first: the retrying groups (jobs that failed with a code
and wait for another attempt) and the failed groups by their latest activity, of every
type or of one. Every figure against an independent query over the base tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import psycopg
import pytest

from jobwarden.worker.engine.producer import claim
from tests.figures.conftest import LEASE, WORKER, rows
from tests.figures.html_tree import page

#: An execution that sent its job back to pending for another attempt: a retry, or a
#: timeout or lost worker with attempts left (recorded as themselves, counted as retries).
BACK_TO_PENDING = """(e.outcome = 'retry'
    OR (e.outcome IN ('timeout', 'worker_lost') AND e.attempt < j.max_attempts))"""


@pytest.fixture
def retrying(seeded):
    """The seeded dataset with one retried SMTP_TIMEOUT job due now and running its next
    attempt, so a group has a running job and a pending one."""
    with psycopg.connect(seeded.url) as conn:
        job_id, job_type = conn.execute(
            "SELECT id, type FROM background_jobs WHERE status = 'pending' "
            "AND last_error_code = 'SMTP_TIMEOUT' ORDER BY id LIMIT 1").fetchone()
        conn.execute("UPDATE background_jobs SET available_at = now() - interval '1 hour' "
                     "WHERE id = %s", [job_id])
        conn.commit()
        # Only this job is due among the retried ones; the claim takes the most urgent.
        (taken,) = claim(conn, types=[job_type], leases=[LEASE], queues=None, limit=1,
                         worker_id=WORKER)
        conn.commit()
        assert taken.id == job_id
    return seeded


def retrying_real(url: str, job_type: str | None = None) -> dict[tuple, dict]:
    """Per (code, type): the last hour's executions that went back to pending with the code
    (to the minute, as the rollup keeps them), and the jobs of that code and type pending
    or running now."""
    retries = {(code, t): (n, first, last) for code, t, n, first, last in rows(url, f"""
        SELECT e.error_code, e.type, count(*), min(date_trunc('minute', e.finished_at)),
               max(date_trunc('minute', e.finished_at))
        FROM job_executions e JOIN background_jobs j ON j.id = e.job_id
        WHERE {BACK_TO_PENDING} AND e.error_code IS NOT NULL
          AND e.finished_at >= date_trunc('minute', now()) - interval '59 minutes'
          AND (%(type)s::text IS NULL OR e.type = %(type)s::text)
        GROUP BY 1, 2""", {"type": job_type})}
    waiting = {(code, t): (n, running, nxt, left, sample) for code, t, n, running, nxt, left,
               sample in rows(url, """
        SELECT last_error_code, type, count(*), count(*) FILTER (WHERE status = 'running'),
               min(available_at) FILTER (WHERE status = 'pending'),
               min(max_attempts - attempts), max(id)
        FROM background_jobs WHERE status IN ('pending', 'running')
          AND last_error_code IS NOT NULL GROUP BY 1, 2""")}
    return {key: {"jobs": waiting[key][0], "running": waiting[key][1],
                  "next": waiting[key][2], "left": waiting[key][3], "sample": waiting[key][4],
                  "retries": n, "first": first, "last": last}
            for key, (n, first, last) in retries.items() if key in waiting}


def retrying_shown(doc) -> dict[tuple, dict]:
    section = doc.one("retrying-now")
    shown = {}
    for tr in section.having("data-retrying-code"):
        running = tr.maybe("retrying-running")
        sample = tr.all(lambda e: e.tag == "a" and "/jobs/" in e.attrs.get("href", ""))
        shown[(tr["data-retrying-code"], tr["data-type"])] = {
            "jobs": int(tr.one("retrying-jobs").text()),
            "running": int(running.text().split()[0]) if running else 0,
            "next": tr.one("retrying-next").time(),
            "left": int(tr.one("retrying-left").text()),
            "sample": int(sample[-1].text().lstrip("#")),
            "retries": int(tr.one("retrying-retries").text().split()[0]),
            "first": tr.one("retrying-since").time(),
            "last": tr.one("retrying-last").time(),
            "order": len(shown),
        }
    return shown


def as_shown(real: dict) -> dict:
    return {k: {**v, "next": v["next"] and v["next"].isoformat(),
                "first": v["first"].isoformat(), "last": v["last"].isoformat()}
            for k, v in real.items()}


def test_retrying_now_shows_each_code_and_type_waiting_for_another_attempt(operator, retrying):
    doc = page(operator, "/failed")
    real = as_shown(retrying_real(retrying.url))
    shown = retrying_shown(doc)
    # The dataset's retries: SMTP_TIMEOUT and PROVIDER_DOWN by their handlers, WORKER_LOST
    # by recovery; the operator's retry of a DECLINED failure is no failing execution.
    assert {code for code, _ in real} == {"SMTP_TIMEOUT", "PROVIDER_DOWN", "WORKER_LOST"}
    assert any(v["running"] for v in real.values())
    assert {k: {f: v for f, v in s.items() if f != "order"} for k, s in shown.items()} == real
    # The latest retries first.
    order = sorted(shown, key=lambda k: shown[k]["order"])
    assert [shown[k]["last"] for k in order] == sorted((shown[k]["last"] for k in order),
                                                       reverse=True)


def test_a_job_that_failed_for_good_leaves_retrying_now_for_its_failed_group(operator, seeded):
    """Once its attempts are spent a job is no longer waiting: a group whose jobs all
    failed for good (or completed) is not retrying."""
    with psycopg.connect(seeded.url) as conn:
        conn.execute("UPDATE background_jobs SET status = 'failed', failed_at = now() "
                     "WHERE status = 'pending' AND last_error_code = 'PROVIDER_DOWN'")
        conn.commit()
    shown = retrying_shown(page(operator, "/failed"))
    real = as_shown(retrying_real(seeded.url))
    assert "PROVIDER_DOWN" not in {code for code, _ in real}
    assert {k: {f: v for f, v in s.items() if f != "order"} for k, s in shown.items()} == real


def failed_shown(doc, elsewhere: bool = False) -> list[dict]:
    """The failed groups' rows; with `elsewhere`, each one's `active_in` too (the other
    type its code is active in, or None)."""
    shown = []
    for tr in doc.one(lambda e: e.attrs.get("id") == "failed-groups").having("data-error-code"):
        active = tr.maybe("active-now")
        row = {"code": tr["data-error-code"], "jobs": int(tr.one("group-count").text()),
               "types": sorted(tr.one("group-types").text().split(", ")),
               "last": tr.one("last-seen").time(), "active": active is not None}
        if elsewhere:
            row["active_in"] = active.attrs.get("data-active-in") if active else None
        shown.append(row)
    return shown


def failed_real(url: str, job_type: str | None = None) -> list[dict]:
    """Failed jobs per code (of the type), each with its latest occurrence in the types it
    lists (its failed jobs'): a failure on record or an execution that failed, retried or
    ended unknown with it (to the minute), of those types; active when the code occurred
    (of any type, of `job_type` when given) 15 minutes ago or less. Latest first."""
    params = {"type": job_type}
    now = rows(url, "SELECT now()")[0][0]
    groups = rows(url, """
        SELECT last_error_code, count(*), array_agg(DISTINCT type ORDER BY type)
        FROM background_jobs WHERE status = 'failed'
          AND (%(type)s::text IS NULL OR type = %(type)s::text) GROUP BY 1""", params)
    occurred = rows(url, """
        SELECT last_error_code, type, failed_at FROM background_jobs
        WHERE status = 'failed' AND (%(type)s::text IS NULL OR type = %(type)s::text)
        UNION ALL
        SELECT error_code, type, date_trunc('minute', finished_at) FROM job_executions
        WHERE outcome IN ('retry', 'failed', 'unknown')
          AND (%(type)s::text IS NULL OR type = %(type)s::text)""", params)
    real = []
    for code, n, types in groups:
        last = max(at for c, t, at in occurred if c == code and t in types)
        anywhere = max(at for c, _t, at in occurred if c == code)
        real.append({"code": code, "jobs": n, "types": list(types), "last": last.isoformat(),
                     "active": now - anywhere <= timedelta(minutes=15), "order": anywhere})
    # the code's latest activity first, in any type
    real.sort(key=lambda g: (g.pop("order"), g["jobs"]), reverse=True)
    return real


def test_failed_groups_come_latest_activity_first_and_mark_the_active_ones(operator, seeded):
    doc = page(operator, "/failed")
    real = failed_real(seeded.url)
    assert failed_shown(doc) == real
    shown = failed_shown(doc, elsewhere=True)
    # The five-day-old failures of PROVIDER_DOWN (bill.charge) are its group; its code
    # retried today in mail.send: active, in that other type, and its row's own times
    # stay those of bill.charge.
    assert {g["code"]: g["active"] for g in shown}["PROVIDER_DOWN"] is True
    row = next(g for g in shown if g["code"] == "PROVIDER_DOWN")
    assert row["types"] == ["bill.charge"] and row["active_in"] == "mail.send"
    assert datetime.fromisoformat(row["last"]) < datetime.now(UTC) - timedelta(days=4)


def test_an_old_group_that_is_quiet_is_not_active_and_comes_after_the_live_ones(operator,
                                                                                 seeded):
    with psycopg.connect(seeded.url) as conn:
        conn.execute("""INSERT INTO background_jobs (queue, type, payload, status, attempts,
                                                     last_error_code, failed_at)
                        SELECT 'email', 'mail.send', '{}', 'failed', 3, 'OLD_QUIET',
                               now() - interval '3 days' FROM generate_series(1, 50)""")
        conn.commit()
    shown = failed_shown(page(operator, "/failed"))
    assert shown == failed_real(seeded.url)
    assert shown[-1]["code"] == "OLD_QUIET" and not shown[-1]["active"]
    assert shown[-1]["jobs"] == max(g["jobs"] for g in shown)  # the biggest, yet last


@pytest.mark.parametrize("job_type", ["bill.charge", "mail.send", "report.build"])
def test_failed_of_one_type_counts_only_that_types_jobs_and_occurrences(operator, retrying,
                                                                       job_type):
    doc = page(operator, "/failed?" + urlencode({"type": job_type}))
    assert doc.one("failed-type").text() == job_type
    assert failed_shown(doc) == failed_real(retrying.url, job_type)
    real = as_shown(retrying_real(retrying.url, job_type))
    assert {k: {f: v for f, v in s.items() if f != "order"}
            for k, s in retrying_shown(doc).items()} == real
    assert all(t == job_type for _, t in real)


def test_a_failed_group_named_by_its_type_alone_shows_that_types_failed_jobs(operator,
                                                                            retrying):
    for (job_type,) in rows(retrying.url, "SELECT DISTINCT type FROM background_jobs "
                                          "WHERE status = 'failed'"):
        doc = page(operator, "/failed/group?" + urlencode({"type": job_type}))
        by_code = {code or "": (n, last.isoformat()) for code, n, last in rows(retrying.url, """
            SELECT last_error_code, count(*), max(failed_at) FROM background_jobs
            WHERE status = 'failed' AND type = %s GROUP BY 1""", [job_type])}
        shown = {tr["data-error-code"]: (int(tr.one("code-jobs").text()),
                                         tr.one("code-last-seen").time())
                 for tr in doc.one("group-by-code").having("data-error-code")}
        assert shown == by_code, job_type
        assert doc.one("preview-count").text() == str(sum(n for n, _ in by_code.values()))
        shown_ids = [int(tr["data-job-id"]) for tr in doc.having("data-job-id")
                     if tr.tag == "tr"]
        assert shown_ids == [r[0] for r in rows(retrying.url, """
            SELECT id FROM background_jobs WHERE status = 'failed' AND type = %s
            ORDER BY id DESC""", [job_type])]


def test_a_failed_group_says_what_of_its_code_and_type_is_retrying_now(operator, retrying):
    real = retrying_real(retrying.url)
    for (code, job_type), figures in real.items():
        doc = page(operator, "/failed/group?" + urlencode({"code": code, "type": job_type}))
        (item,) = doc.one("group-retrying").having("data-retrying-code")
        assert (item["data-retrying-code"], item["data-type"]) == (code, job_type)
        assert int(item.one("retrying-jobs").text()) == figures["jobs"]
    quiet = rows(retrying.url, "SELECT last_error_code FROM background_jobs "
                               "WHERE status = 'failed' AND last_error_code = 'DECLINED' "
                               "LIMIT 1")
    assert quiet and ("DECLINED", "bill.charge") not in real
    doc = page(operator, "/failed/group?code=DECLINED")
    assert doc.maybe("group-retrying") is None
