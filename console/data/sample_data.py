"""Realistic rows in every state, written straight into the tables.

For the console's tests, its screenshots and its benchmark: they need failed groups,
unknown outcomes, stale heartbeats and an hour of execution history without waiting an
hour for a worker to produce them. `conn` is a SQLAlchemy Connection in a transaction.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, func, insert, select, text

from jobwarden.worker.store.schema import background_jobs, job_executions, job_workers


def insert_job(conn: Connection, type: str = "send_email", status: str = "pending", *,
               payload: dict[str, Any] | None = None, ago: float = 0.0, **fields: Any) -> int:
    """One job in `status`, created `ago` seconds before the database's now()."""
    now = conn.execute(select(func.now())).scalar_one()
    created = now - timedelta(seconds=ago)
    values: dict[str, Any] = {
        "type": type, "status": status, "payload": payload or {"n": 1},
        "created_at": created, "available_at": created,
    }
    if status == "running":
        values.update(execution_id=uuid.uuid4(), worker_id=fields.pop("worker_id", "w-test"),
                      started_at=now, heartbeat_at=now, attempts=1,
                      lease_expires_at=now + timedelta(seconds=60))
    elif status == "completed":
        values.update(completed_at=now, attempts=1)
    elif status == "failed":
        values.update(failed_at=now, attempts=fields.get("max_attempts", 5),
                      last_error_code=fields.pop("error_code", "NETWORK_TIMEOUT"),
                      last_error=fields.pop("error", "timed out after 30s"))
    elif status == "unknown":
        values.update(attempts=1, last_error_code="UNKNOWN",
                      last_error=fields.pop("error", "connection reset after sending"))
    elif status == "cancelled":
        values.update(cancelled_at=now)
    elif status == "skipped":
        values.update(skipped_at=now)
    values.update(fields)
    job_id: int = conn.execute(
        insert(background_jobs).values(**values).returning(background_jobs.c.id)).scalar_one()
    return job_id


def insert_execution(conn: Connection, job_id: int, *, attempt: int = 1,
                     outcome: str | None = "completed", started_ago: float = 60.0,
                     wait_s: float = 1.0, duration_ms: float = 250.0,
                     worker_id: str = "w-test", error_code: str | None = None,
                     error: str | None = None) -> uuid.UUID:
    """One execution of a job, started `started_ago` seconds ago after waiting `wait_s`."""
    job = conn.execute(select(background_jobs.c.queue, background_jobs.c.type)
                       .where(background_jobs.c.id == job_id)).one()
    now = conn.execute(select(func.now())).scalar_one()
    started = now - timedelta(seconds=started_ago)
    execution_id = uuid.uuid4()
    finished = started + timedelta(milliseconds=duration_ms) if outcome else None
    conn.execute(insert(job_executions).values(
        job_id=job_id, execution_id=execution_id, attempt=attempt, queue=job.queue,
        type=job.type, worker_id=worker_id, scheduled_at=started - timedelta(seconds=wait_s),
        started_at=started, heartbeat_at=finished or now, finished_at=finished, outcome=outcome,
        error_code=error_code, error=error, duration_ms=duration_ms if outcome else None))
    return execution_id


def insert_worker(conn: Connection, worker_id: str, *, host: str = "app-1", pid: int = 4242,
                  queues: tuple[str, ...] = ("default",), concurrency: int = 4,
                  heartbeat_ago: float = 1.0, state: str = "running",
                  version: str = "0.1.0", lanes: list[dict[str, Any]] | None = None) -> None:
    now = conn.execute(select(func.now())).scalar_one()
    conn.execute(insert(job_workers).values(
        worker_id=worker_id, host=host, pid=pid, queues=list(queues), job_types=[],
        concurrency=concurrency, version=version, state=state, lanes=lanes,
        started_at=now - timedelta(minutes=30),
        heartbeat_at=now - timedelta(seconds=heartbeat_ago)))


def seed_console_scenario(conn: Connection) -> dict[str, Any]:
    """A small incident: every page has something on it. Returns the notable job ids."""
    insert_worker(conn, "w-app1-1", host="app-1", pid=1201, queues=("default", "email"))
    insert_worker(conn, "w-app2-7", host="app-2", pid=877, queues=("reports",), concurrency=2,
                  state="draining", heartbeat_ago=3)
    insert_worker(conn, "w-app3-2", host="app-3", pid=310, queues=("default",), heartbeat_ago=900)
    ids: dict[str, Any] = {}
    for i in range(40):
        job_id = insert_job(conn, "send_email", "completed", queue="email",
                            payload={"userId": i, "template": "welcome"}, ago=3000 - i * 60)
        insert_execution(conn, job_id, started_ago=3000 - i * 60, wait_s=2 + (i % 5),
                         duration_ms=180 + 7 * i, worker_id="w-app1-1")
    for i in range(12):
        job_id = insert_job(conn, "export_report", "completed", queue="reports",
                            payload={"reportId": 900 + i}, ago=3400 - i * 250)
        insert_execution(conn, job_id, started_ago=3400 - i * 250, wait_s=20 + 15 * (i % 4),
                         duration_ms=4000 + 500 * i, worker_id="w-app2-7")
    for i in range(6):
        job_id = insert_job(conn, "send_email", "failed", queue="email", error_code="AUTH_FAILED",
                            error="SMTP 535 for https://mailer:hunter2@smtp.example.com",
                            payload={"userId": 500 + i, "api_key": "sk_live_abcdefgh12345"})
        insert_execution(conn, job_id, outcome="failed", error_code="AUTH_FAILED",
                         error="SMTP 535 authentication failed", started_ago=600 + i)
        ids.setdefault("auth_failed", []).append(job_id)
    for i in range(3):
        job_id = insert_job(conn, "charge_card", "failed", queue="default",
                            error_code="PROVIDER_5XX", error="502 from payments provider",
                            payload={"orderId": 7000 + i, "amount_cents": 1999})
        insert_execution(conn, job_id, outcome="failed", error_code="PROVIDER_5XX",
                         error="502 Bad Gateway", started_ago=1200 + i)
        ids.setdefault("provider_5xx", []).append(job_id)
    ids["unknown"] = insert_job(conn, "charge_card", "unknown", queue="default",
                                payload={"orderId": 7100, "amount_cents": 4999},
                                idempotency_key="charge:order:7100")
    insert_execution(conn, ids["unknown"], outcome="unknown", error_code="UNKNOWN",
                     error="connection reset after request was sent", started_ago=300)
    now = conn.execute(select(func.now())).scalar_one()
    # A running execution is its job row (migration 0061): started 95 s ago, 12 s after
    # the job became available.
    ids["running"] = insert_job(conn, "export_report", "running", queue="reports",
                                worker_id="w-app2-7", progress={"done": 42, "total": 100},
                                payload={"reportId": 1001}, ago=107,
                                started_at=now - timedelta(seconds=95))
    ids["stale"] = insert_job(conn, "send_email", "running", queue="email",
                              worker_id="w-app3-2", payload={"userId": 99},
                              heartbeat_at=now - timedelta(minutes=15),
                              lease_expires_at=now - timedelta(minutes=14))
    lost = insert_job(conn, "send_email", "pending", queue="email", payload={"userId": 77},
                      attempts=1)
    insert_execution(conn, lost, outcome="worker_lost", error_code="WORKER_LOST",
                     error="lease expired: worker w-app3-2 stopped heartbeating", started_ago=900)
    for i in range(25):
        insert_job(conn, "export_report", "pending", queue="reports", ago=420 - i * 10,
                   payload={"reportId": 2000 + i})
    ids["pending"] = insert_job(conn, "send_email", "pending", queue="email", ago=5,
                                payload={"userId": 1, "html": "<script>alert('x')</script>",
                                         "password": "hunter2"})
    insert_job(conn, "send_email", "cancelled", queue="email", payload={"userId": 3})
    insert_job(conn, "cleanup_tmp", "skipped", queue="default", payload={"dir": "/tmp/x"})
    # The rows above were inserted in their final states: the per-minute rollup learns
    # their outcomes from their timestamps, as the migration does for existing jobs.
    conn.execute(text("SELECT jobwarden_rollup_rebuild()"))
    return ids


def seed_retry_storm(conn: Connection, job_type: str = "sync_crm", *, queue: str = "crm",
                     code: str = "CRM_UNAVAILABLE", jobs: int = 40,
                     error: str = "CRM answered 503 Service Unavailable", since: float = 240.0,
                     rebuild: bool = True) -> list[int]:
    """An outage still retrying: `jobs` pending jobs of `job_type` whose attempts so far
    (1 or 2 of 5) all failed with `code` over the last `since` seconds, each waiting for
    its next attempt within minutes. The rollup is rebuilt from the executions unless
    `rebuild` is False (a caller that rebuilds it once for everything)."""
    now = conn.execute(select(func.now())).scalar_one()
    ids = []
    for i in range(jobs):
        attempts = 1 + i % 2
        job_id = insert_job(conn, job_type, "pending", queue=queue, ago=since,
                            payload={"accountId": 300 + i}, attempts=attempts, max_attempts=5,
                            last_error_code=code, last_error=error,
                            available_at=now + timedelta(seconds=30 + 5 * i))
        for attempt in range(1, attempts + 1):
            insert_execution(conn, job_id, attempt=attempt, outcome="retry", error_code=code,
                             error=error, started_ago=since * (attempts - attempt + 1) / 2
                             - i * since / (2 * jobs), duration_ms=120)
        ids.append(job_id)
    if rebuild:
        conn.execute(text("SELECT jobwarden_rollup_rebuild()"))
    return ids


def insert_edge(conn: Connection, job_id: int, parent_id: int, *, run_anyway: bool = False,
                released: bool = False) -> None:
    """A dependency edge: `job_id` waits for `parent_id` (docs/guide/flows.md), counted on
    both as the runtime counts it (the parent's `dependents`, the dependent's
    `waiting_on` while the edge is not released). Statuses are the caller's to set."""
    conn.execute(text(
        "INSERT INTO job_dependencies (job_id, parent_id, run_anyway, released_at) "
        "VALUES (:job, :parent, :anyway, CASE WHEN :released THEN now() END)"),
        {"job": job_id, "parent": parent_id, "anyway": run_anyway, "released": released})
    conn.execute(text("UPDATE background_jobs SET dependents = dependents + 1 WHERE id = :p"),
                 {"p": parent_id})
    if not released:
        conn.execute(text("UPDATE background_jobs SET waiting_on = waiting_on + 1 "
                          "WHERE id = :j"), {"j": job_id})


def seed_duration_history(conn: Connection, job_type: str = "export_report", *,
                          queue: str = "reports") -> None:
    """A day of `job_type`'s executions, a few every 5 minutes, whose durations grew when
    version 2 of its handler was deployed 6 hours ago (its workers restarting then), for
    the type page's duration chart. Set-based: one statement for the executions."""
    conn.execute(text("""
        INSERT INTO job_executions (job_id, execution_id, attempt, queue, type, worker_id,
                                    scheduled_at, started_at, finished_at, outcome,
                                    duration_ms)
        SELECT 0, gen_random_uuid(), 1, :queue, :type,
               CASE WHEN f > now() - interval '6 hours' THEN 'w-app2-9' ELSE 'w-app2-7' END,
               f - d * interval '1 ms' - interval '2 s', f - d * interval '1 ms', f,
               CASE WHEN g % 23 = 0 THEN 'retry' ELSE 'completed' END, d
        FROM generate_series(1, 288 * 4) g
        CROSS JOIN LATERAL (SELECT now() - interval '24 hours' + g * interval '75 s' AS f) t
        CROSS JOIN LATERAL (SELECT (CASE WHEN f > now() - interval '6 hours' THEN 900 ELSE 400 END)
                                   * (0.6 + (g * 37 % 100) / 100.0)
                                   * (CASE WHEN g % 20 = 0 THEN 4 ELSE 1 END) AS d) x
    """), {"type": job_type, "queue": queue})
    conn.execute(text("""
        INSERT INTO job_type_versions (type, version, first_at, first_by)
        VALUES (:type, 2, now() - interval '6 hours', 'w-app2-9')
        ON CONFLICT DO NOTHING
    """), {"type": job_type})
    conn.execute(text("""
        INSERT INTO job_workers (worker_id, host, pid, queues, job_types, concurrency,
                                 version, started_at, heartbeat_at, state)
        VALUES ('w-app2-9', 'app-2', 9, ARRAY[:queue], ARRAY[:type], 4, '0.1.0',
                now() - interval '6 hours 1 minute', now(), 'running')
        ON CONFLICT DO NOTHING
    """), {"type": job_type, "queue": queue})
