"""Snooze: a handler puts its job off without spending an attempt (a real worker)."""

from __future__ import annotations

import psycopg
import pytest

from jobwarden import Registry, Snooze, enqueue, job
from tests.helpers import running_worker, scalar, wait_for


def one(url: str, sql: str, params) -> tuple:
    with psycopg.connect(url) as c:
        return c.execute(sql, params).fetchone()


def settled(url: str, job_id: int) -> tuple:
    wait_for(lambda: scalar(url, "SELECT status FROM background_jobs WHERE id = %s",
                            [job_id]) not in ("pending", "running"),
             message="the job to settle")
    return one(url, "SELECT status, attempts, snoozes, last_error_code "
                    "FROM background_jobs WHERE id = %s", [job_id])


def outcomes(url: str, job_id: int) -> list[tuple]:
    return [tuple(r) for r in scalar(url, """
        SELECT coalesce(array_agg(ARRAY[outcome, coalesce(error_code, '')] ORDER BY started_at),
                        '{}')
        FROM job_executions WHERE job_id = %s""", [job_id])]


def counted(url: str) -> dict[str, int]:
    rows = scalar(url, "SELECT coalesce(jsonb_object_agg(outcome, jobs), '{}') FROM "
                       "(SELECT outcome, sum(jobs)::int AS jobs FROM job_minute_counts "
                       "GROUP BY 1) o")
    return dict(rows)


def test_a_job_snoozes_without_spending_attempts_then_completes(conn, clean_db):
    reg = Registry()
    seen = []

    @job("poll", registry=reg, max_attempts=1)
    def poll(ctx, payload):
        seen.append((ctx.attempt, ctx.snoozes))
        if ctx.snoozes < 3:
            ctx.snooze(0.05)

    job_id = enqueue(conn, "poll", {}, registry=reg)
    conn.commit()
    with running_worker(reg, clean_db):
        state = settled(clean_db, job_id)
    # One attempt allowed, four runs: the three snoozes gave theirs back.
    assert state == ("completed", 1, 3, None)
    assert seen == [(1, 0), (1, 1), (1, 2), (1, 3)]
    assert outcomes(clean_db, job_id) == [("snoozed", "")] * 3 + [("completed", "")]
    assert counted(clean_db) == {"snoozed": 3, "completed": 1}  # never a retry


def test_a_snooze_puts_the_job_off_for_its_seconds(conn, clean_db):
    reg = Registry()

    @job("later", registry=reg)
    def later(ctx, payload):
        raise Snooze(3600)

    job_id = enqueue(conn, "later", {}, registry=reg)
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: scalar(clean_db, "SELECT snoozes FROM background_jobs WHERE id = %s",
                                [job_id]) == 1, message="the snooze")
    wait = scalar(clean_db, "SELECT extract(epoch FROM available_at - e.finished_at) "
                            "FROM background_jobs j JOIN job_executions e ON e.job_id = j.id "
                            "WHERE j.id = %s", [job_id])
    assert 3599 <= float(wait) <= 3601
    assert one(clean_db, "SELECT status, attempts, last_error, traceback IS NULL FROM "
                            "background_jobs j JOIN job_executions e ON e.job_id = j.id "
                            "WHERE j.id = %s", [job_id]) == ("pending", 0, None, True)


def test_a_job_that_keeps_snoozing_fails_at_its_types_limit(conn, clean_db):
    reg = Registry()

    @job("forever", registry=reg, max_snoozes=2)
    def forever(ctx, payload):
        ctx.snooze(0)

    job_id = enqueue(conn, "forever", {}, registry=reg)
    conn.commit()
    with running_worker(reg, clean_db):
        state = settled(clean_db, job_id)
    assert state == ("failed", 1, 2, "SNOOZE_LIMIT")
    assert outcomes(clean_db, job_id) == [("snoozed", "")] * 2 + [("failed", "SNOOZE_LIMIT")]


@pytest.mark.parametrize("seconds", [-1, float("nan"), 400 * 86400])
def test_a_snooze_of_no_sensible_length_is_refused_with_a_clear_error(seconds):
    with pytest.raises(ValueError, match="Snooze takes 0 to"):
        Snooze(seconds)


def test_max_snoozes_must_be_a_count():
    with pytest.raises(ValueError, match="max_snoozes"):
        job("bad", registry=Registry(), max_snoozes=-1)(lambda ctx, payload: None)


def test_the_job_page_and_metrics_show_snoozes_as_their_own_figure(operator, conn, clean_db):
    reg = Registry()

    @job("wait_for_data", registry=reg)
    def wait_for_data(ctx, payload):
        if ctx.snoozes < 2:
            ctx.snooze(0)

    job_id = enqueue(conn, "wait_for_data", {}, registry=reg)
    conn.commit()
    with running_worker(reg, clean_db):
        settled(clean_db, job_id)
    page = operator.get(f"/jobs/{job_id}").get_data(as_text=True)
    assert 'data-testid="snoozes">2×' in page
    assert page.count('data-testid="execution-outcome">snoozed<') == 2
    metrics = operator.get("/metrics").get_data(as_text=True)
    assert 'jobwarden_executions_last_hour{outcome="snoozed"} 2.0' in metrics
    assert 'jobwarden_retry_rate_last_hour 0.0' in metrics
