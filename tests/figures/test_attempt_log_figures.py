"""The job page's log figures (each attempt's lines kept, and dropped past the cap) equal
counts over job_execution_logs made here: its JSON array's elements, one by one, and
its `dropped` column, per execution (worker/engine/attempt_log.py)."""

from __future__ import annotations

import json

import psycopg

from jobwarden import Registry, enqueue, job
from jobwarden.worker.core.states import ExecutionOutcome, JobStatus
from jobwarden.worker.engine.completer import Completion, write_batch
from jobwarden.worker.engine.producer import claim
from tests.figures.conftest import WORKER, rows
from tests.figures.html_tree import page

#: Per attempt: how many lines it kept and how many it dropped (None: it logged nothing).
ATTEMPTS = [(3, 0), None, (1, 41), (0, 5)]


def _lines(n: int, attempt: int) -> str | None:
    return json.dumps([[1765000000.0 + i, "INFO", "app", f"attempt {attempt} line {i}"]
                       for i in range(n)])


def test_each_attempts_kept_and_dropped_lines_are_the_tables(operator, clean_db):
    reg = Registry()
    job("logs.many", lease=30.0, max_attempts=len(ATTEMPTS),
        registry=reg)(lambda ctx, payload: None)
    with psycopg.connect(clean_db) as conn:
        job_id = enqueue(conn, "logs.many", {}, registry=reg)
        conn.commit()
        for attempt, logged in enumerate(ATTEMPTS, start=1):
            (j,) = claim(conn, types=["logs.many"], leases=[30.0], queues=None, limit=1,
                         worker_id=WORKER)
            conn.commit()
            last = attempt == len(ATTEMPTS)
            write_batch(conn, [Completion(
                job_id=j.id, execution_id=j.execution_id, type=j.type, attempt=j.attempt,
                lease=30.0, status=JobStatus.FAILED if last else JobStatus.PENDING,
                outcome=ExecutionOutcome.FAILED if last else ExecutionOutcome.RETRY,
                error_code="E", queue=j.queue,
                log_lines=None if logged is None else _lines(logged[0], attempt),
                log_dropped=0 if logged is None else logged[1])])
            conn.execute("UPDATE background_jobs SET available_at = now() WHERE id = %s",
                         [job_id])
            conn.commit()
    expected = dict(rows(clean_db, """
        SELECT e.attempt, (SELECT count(*) FROM jsonb_array_elements(l.lines))
        FROM job_executions e JOIN job_execution_logs l USING (execution_id)
        WHERE e.job_id = %s""", [job_id]))
    dropped = dict(rows(clean_db, """
        SELECT e.attempt, l.dropped FROM job_executions e
        JOIN job_execution_logs l USING (execution_id)
        WHERE e.job_id = %s AND l.dropped > 0""", [job_id]))
    assert expected == {1: 3, 3: 1, 4: 0} and dropped == {3: 41, 4: 5}  # the dataset
    tree = page(operator, f"/jobs/{job_id}")
    for attempt in range(1, len(ATTEMPTS) + 1):
        box = tree.maybe(f"log-{attempt}")
        if attempt not in expected:
            assert box is None
            continue
        assert box is not None
        assert int(box.one(f"log-kept-{attempt}").text()) == expected[attempt]
        assert len(box.all("log-line")) == expected[attempt]
        shown = box.maybe(f"log-dropped-{attempt}")
        assert (int(shown.text()) if shown else 0) == dropped.get(attempt, 0)
