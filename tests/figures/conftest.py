"""The figures tier: one dataset written through the runtime's own statements, and an
independent count over the base tables for each figure the console shows.

The dataset (`seeded`) holds every status in three queues and types (a job waiting for
a pending one among them): completions,
retries (one code also retried by jobs that never failed), permanent failures with two
codes, an old failure of a code that is retried today, unknown outcomes, a graceful
hand-back, a lost worker recovered, running and pending jobs, and operator actions (a
skip of an old failure, a retry, a cancel). Each test reads what a page rendered (by
`data-testid` and row attributes) and compares it with SQL over `background_jobs`,
`job_executions` and `job_audit` written in the test, never with the page's own query.
"""

from __future__ import annotations

from dataclasses import dataclass

import psycopg
import pytest
from psycopg.types.json import Jsonb

from jobwarden import Registry, RetryPolicy, enqueue, job
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.duties.recovery import recover_stale_running
from jobwarden.worker.engine.completer import Completion, hand_back, write_batch
from jobwarden.worker.engine.producer import ClaimedJob, claim
from jobwarden.worker.jobs.job_types import publish_job_types
from jobwarden.worker.ops.operations import cancel_job, retry_job, skip_job
from jobwarden.worker.store.queries import Q

LEASE = 30.0
TYPES = {"mail.send": "email", "report.build": "reports", "bill.charge": "billing"}
WORKER = "figures-host:4242:abcdef"
LATER = RetryPolicy(base=3600, cap=3600, jitter=0)  # retried jobs stay pending


@dataclass
class Seeded:
    url: str
    ids: dict[str, list[int]]


def registry() -> Registry:
    reg = Registry()
    for name, queue in TYPES.items():
        job(name, queue=queue, lease=LEASE, max_attempts=3, backoff=LATER,
            registry=reg)(lambda ctx, payload: None)
    return reg


def take(conn, n: int) -> list[ClaimedJob]:
    jobs = claim(conn, types=list(TYPES), leases=[LEASE] * len(TYPES), queues=None, limit=n,
                 worker_id=WORKER)
    conn.commit()
    assert len(jobs) == n
    return jobs


def _finish(conn, jobs: list[ClaimedJob], status: S, outcome: O, code: str | None = None,
            delay: float = 0.0) -> list[int]:
    written = write_batch(conn, [
        Completion(job_id=j.id, execution_id=j.execution_id, type=j.type, attempt=j.attempt,
                   lease=LEASE, status=status, outcome=outcome, error_code=code,
                   error=f"{code or outcome.value} (seeded)", delay=delay, queue=j.queue)
        for j in jobs])
    conn.commit()
    assert len(written) == len(jobs)
    return [j.id for j in jobs]


@pytest.fixture
def seeded(clean_db) -> Seeded:
    reg = registry()
    ids: dict[str, list[int]] = {}
    with psycopg.connect(clean_db) as conn:
        conn.execute(Q.register_worker, {
            "worker_id": WORKER, "host": "figures-host", "pid": 4242,
            "queues": sorted(TYPES.values()),
            "lanes": Jsonb([{"queues": sorted(TYPES.values()), "slots": 8, "shared": True}]),
            "job_types": list(TYPES), "concurrency": 8, "version": "test"})
        # An old failure, five days ago: its code is retried again today.
        ids["old_failed"] = [r[0] for r in conn.execute(
            "INSERT INTO background_jobs (queue, type, payload, status, attempts, "
            "last_error_code, last_error, failed_at, created_at) "
            "SELECT 'billing', 'bill.charge', '{}', 'failed', 3, 'PROVIDER_DOWN', "
            "'provider down (seeded)', now() - interval '5 days', now() - interval '5 days' "
            "FROM generate_series(1, 3) RETURNING id")]
        conn.commit()
        for name in TYPES:
            for _ in range({"mail.send": 30, "report.build": 12, "bill.charge": 14}[name]):
                enqueue(conn, name, {"to": "someone"}, registry=reg)
        conn.commit()
        ids["completed"] = _finish(conn, take(conn, 20), S.COMPLETED, O.COMPLETED)
        ids["retried"] = _finish(conn, take(conn, 5), S.PENDING, O.RETRY, "SMTP_TIMEOUT",
                                 delay=3600)
        ids["retried_down"] = _finish(conn, take(conn, 2), S.PENDING, O.RETRY,
                                      "PROVIDER_DOWN", delay=3600)
        ids["failed_declined"] = _finish(conn, take(conn, 4), S.FAILED, O.FAILED, "DECLINED")
        ids["failed_timeout"] = _finish(conn, take(conn, 2), S.FAILED, O.FAILED,
                                        "SMTP_TIMEOUT")
        ids["unknown"] = _finish(conn, take(conn, 2), S.UNKNOWN, O.UNKNOWN, "AMBIGUOUS")
        ids["skipped"] = _finish(conn, take(conn, 1), S.SKIPPED, O.SKIPPED, "USER_GONE")
        ids["snoozed"] = _finish(conn, take(conn, 1), S.PENDING, O.SNOOZED, delay=3600)
        handed = take(conn, 3)
        assert hand_back(conn, [(j, None, None) for j in handed]) == {j.id for j in handed}
        conn.commit()
        ids["handed_back"] = [j.id for j in handed]
        lost = take(conn, 2)
        conn.execute("UPDATE background_jobs SET lease_expires_at = now() - interval '1 s' "
                     "WHERE id = ANY(%s)", [[j.id for j in lost]])
        conn.commit()
        assert recover_stale_running(conn, reg) == {"pending": 2}
        conn.commit()
        ids["recovered"] = [j.id for j in lost]
        ids["running"] = [j.id for j in take(conn, 4)]
        who = {"actor": "ann", "role": "operator", "reason": "figures tier"}
        assert skip_job(conn, ids["old_failed"][0], **who).ok
        assert retry_job(conn, ids["failed_declined"][0], **who).ok
        pending = conn.execute("SELECT id FROM background_jobs WHERE status = 'pending' "
                               "AND attempts = 0 ORDER BY id LIMIT 1").fetchone()[0]
        assert cancel_job(conn, pending, **who).ok
        conn.commit()
        # A job waiting for a pending one (docs/guide/flows.md): every status is here.
        parent = conn.execute("SELECT id FROM background_jobs WHERE status = 'pending' "
                              "AND attempts = 0 ORDER BY id LIMIT 1").fetchone()[0]
        ids["waiting"] = [enqueue(conn, "mail.send", {"to": "someone"}, after=[parent],
                                  registry=reg)]
        conn.commit()
    return Seeded(clean_db, ids)


def rows(url: str, sql: str, params=None) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql, params).fetchall()


#: The SLA target the incident dataset declares for mail.send.
SLA_S = 120


@pytest.fixture
def incident(seeded) -> Seeded:
    """The seeded dataset and what makes the alerts' conditions true: a job type with an
    SLA whose oldest job waited past it, running jobs whose heartbeat stopped, a worker
    gone and one stopped, a queue nobody serves whose backlog grew in the last 15 minutes
    although a worker drained part of it, and the usual completions of the same hour a
    day and a week ago. Times are written relative to the database clock."""
    url = seeded.url
    exports = Registry()
    job("export.csv", queue="exports", lease=LEASE, backoff=LATER, registry=exports)(
        lambda ctx, payload: None)
    with psycopg.connect(url) as conn:
        sla_reg = Registry()
        for spec in registry():
            job(spec.name, queue=spec.queue, lease=LEASE, max_attempts=3, backoff=LATER,
                sla=SLA_S if spec.name == "mail.send" else None, registry=sla_reg)(
                lambda ctx, payload: None)
        publish_job_types(conn, list(sla_reg), "figures")
        # The oldest runnable mail.send job has waited 10 minutes (SLA 2 minutes).
        conn.execute("""UPDATE background_jobs SET available_at = now() - interval '10 min'
                        WHERE id = (SELECT min(id) FROM background_jobs WHERE type = 'mail.send'
                                    AND status = 'pending' AND available_at <= now())""")
        # Two running jobs' heartbeats stopped 10 minutes ago.
        conn.execute("UPDATE background_jobs SET heartbeat_at = now() - interval '10 min' "
                     "WHERE id = ANY(%s)", [seeded.ids["running"][:2]])
        for worker_id, state, ago in (("gone-host:1:aa", "running", 3600),
                                      ("stopped-host:2:bb", "stopped", 30)):
            conn.execute(Q.register_worker, {
                "worker_id": worker_id, "host": worker_id.split(":")[0], "pid": 1,
                "queues": ["email"], "lanes": Jsonb([]), "job_types": ["mail.send"],
                "concurrency": 1, "version": "test"})
            conn.execute("UPDATE job_workers SET state = %s, "
                         "heartbeat_at = now() - make_interval(secs => %s) "
                         "WHERE worker_id = %s", [state, ago, worker_id])
        # `exports`, served by no worker: 50 jobs became runnable 5 minutes ago and an
        # exporter ran 25 of them; 30 more have waited 20 minutes. The backlog grew by
        # 25 in the last 15 minutes (30 then, 55 now).
        for _ in range(50):
            enqueue(conn, "export.csv", {}, registry=exports)
        conn.execute("UPDATE background_jobs SET available_at = now() - interval '5 min' "
                     "WHERE type = 'export.csv'")
        conn.commit()
        ran = claim(conn, types=["export.csv"], leases=[LEASE], queues=["exports"], limit=25,
                    worker_id="exporter:3:cc")
        conn.commit()
        write_batch(conn, [Completion(job_id=j.id, execution_id=j.execution_id, type=j.type,
                                      attempt=j.attempt, lease=LEASE, status=S.COMPLETED,
                                      outcome=O.COMPLETED, queue=j.queue)
                           for j in ran])
        for _ in range(30):
            enqueue(conn, "export.csv", {}, registry=exports)
        conn.execute("UPDATE background_jobs SET available_at = now() - interval '20 min' "
                     "WHERE type = 'export.csv' AND status = 'pending' "
                     "AND available_at > now() - interval '1 min'")
        # 100 completions in the same hour a day ago and a week ago.
        conn.execute("""
            WITH j AS (
                INSERT INTO background_jobs (queue, type, payload, status, completed_at,
                                             created_at)
                SELECT 'email', 'mail.send', '{}', 'completed', now() - h * interval '1 hour',
                       now() - h * interval '1 hour'
                FROM unnest(ARRAY[24.5, 168.5]) AS h, generate_series(1, 100)
                RETURNING id, created_at)
            INSERT INTO job_executions (job_id, execution_id, attempt, queue, type,
                                        worker_id, scheduled_at, started_at, finished_at,
                                        outcome, duration_ms)
            SELECT id, gen_random_uuid(), 1, 'email', 'mail.send', 'old-host:9:dd',
                   created_at, created_at, created_at, 'completed', 5 FROM j""")
        conn.commit()
    return seeded


