"""A job type's policy follows its handler, wherever the job was enqueued.

Workers publish the policies of their types to `job_types`; an enqueuing process that
never imported the handler (modelled by an empty Registry) takes its defaults from
there, and jobs enqueued before any worker published take the handler's policy when a
worker of their type claims them, or when its duty brings them over in small batches:
never by one statement that rewrites them all when the worker starts.
"""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

from jobwarden import JobSpec, Registry, enqueue, enqueue_many, job
from jobwarden.worker.jobs.job_types import publish_job_types
from jobwarden.worker.ops.operations import pause_queue, resume_queue
from tests.helpers import executions, job_row, running_worker, scalar, wait_for


def declare_email(version: int = 1, **policy) -> Registry:
    """The application's registry: `send_email` as its handler module declares it."""
    reg = Registry()
    options = dict(queue="email", max_attempts=3, timeout=45, lease="20s", backoff="2s",
                   sla="30s", repeat_safe=False, version=version, concurrency_limit=4) | policy

    @job("send_email", registry=reg, **options)
    def send_email(ctx, payload):
        return {"sent": payload["userId"]}

    return reg


def published(url: str) -> dict[str, dict]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        return {r["type"]: r for r in conn.execute("SELECT * FROM job_types")}


def test_a_starting_worker_publishes_every_policy_field_of_its_types(clean_db):
    with running_worker(declare_email(), clean_db) as worker:
        row = wait_for(lambda: published(clean_db).get("send_email"), message="publication")
    assert {k: row[k] for k in ("queue", "max_attempts", "timeout_seconds", "lease_seconds",
                                "backoff", "sla_seconds", "version", "repeat_safe",
                                "concurrency_limit", "published_by")} == {
        "queue": "email", "max_attempts": 3, "timeout_seconds": 45.0, "lease_seconds": 20.0,
        "backoff": {"base": 2.0, "cap": 3600.0, "jitter": 0.2}, "sla_seconds": 30.0,
        "version": 1, "repeat_safe": False, "concurrency_limit": 4,
        "published_by": worker.worker_id}


def test_enqueue_without_the_handler_takes_the_published_policy(conn, clean_db):
    publish_job_types(conn, declare_email(version=2), published_by="w1")
    conn.commit()
    elsewhere = Registry()  # a process that never imported the handler module
    plain = enqueue(conn, "send_email", {"userId": 52}, registry=elsewhere)
    explicit = enqueue(conn, "send_email", {"userId": 53}, queue="urgent", max_attempts=9,
                       version=1, registry=elsewhere)
    conn.commit()
    row = job_row(clean_db, plain)
    assert (row["queue"], row["max_attempts"], row["version"], row["policy_defaults"]) == (
        "email", 3, 2, None)
    row = job_row(clean_db, explicit)  # arguments given at enqueue still win
    assert (row["queue"], row["max_attempts"], row["version"], row["policy_defaults"]) == (
        "urgent", 9, 1, None)


def test_a_type_nobody_registered_gets_the_documented_defaults_and_says_so(conn, clean_db):
    plain = enqueue(conn, "never_declared", {}, registry=Registry())
    queued = enqueue(conn, "never_declared", {}, queue="reports", registry=Registry())
    conn.commit()
    row = job_row(clean_db, plain)
    assert (row["queue"], row["max_attempts"], row["version"]) == ("default", 5, 1)
    assert row["policy_defaults"] == ["queue", "max_attempts"]
    assert job_row(clean_db, queued)["policy_defaults"] == ["max_attempts"]


def test_the_first_worker_of_a_type_applies_its_policy_to_jobs_enqueued_before(conn, clean_db):
    elsewhere = Registry()
    before = enqueue(conn, "send_email", {"userId": 1}, registry=elsewhere)
    kept = enqueue(conn, "send_email", {"userId": 2}, max_attempts=7, registry=elsewhere)
    other = enqueue(conn, "other_type", {}, registry=elsewhere)
    conn.commit()
    assert job_row(clean_db, before)["queue"] == "default"
    # This worker claims only the "email" queue: the job is run because it was moved there.
    with running_worker(declare_email(), clean_db, queues=["email"]):
        wait_for(lambda: job_row(clean_db, before)["status"] == "completed"
                 and job_row(clean_db, kept)["status"] == "completed",
                 timeout=30, message="both jobs completed")
    row = job_row(clean_db, before)
    assert (row["queue"], row["max_attempts"], row["policy_defaults"]) == ("email", 3, None)
    row = job_row(clean_db, kept)
    assert (row["queue"], row["max_attempts"], row["policy_defaults"]) == ("email", 7, None)
    row = job_row(clean_db, other)  # a type this worker does not handle is left alone
    assert (row["queue"], row["status"], row["policy_defaults"]) == (
        "default", "pending", ["queue", "max_attempts"])


def test_a_restarting_older_worker_does_not_undo_a_newer_declaration(conn, clean_db):
    publish_job_types(conn, declare_email(version=2, max_attempts=4), published_by="new")
    counts = publish_job_types(conn, declare_email(version=1, max_attempts=8),
                               published_by="old")
    conn.commit()
    assert counts == {"published": 0}
    row = published(clean_db)["send_email"]
    assert (row["version"], row["max_attempts"], row["published_by"]) == (2, 4, "new")


def enqueue_defaulted(url: str, type_name: str, count: int) -> None:
    """`count` jobs of a type no policy is known for: each takes the defaults."""
    with psycopg.connect(url) as conn:
        for offset in range(0, count, 5_000):
            enqueue_many(conn, [JobSpec(type_name, {"n": i})
                                for i in range(offset, min(count, offset + 5_000))],
                         registry=Registry())
        conn.commit()


def test_jobs_committed_after_the_worker_published_still_follow_its_policy(conn, clean_db):
    # The enqueuer read job_types before the worker published and commits after: its job
    # took the defaults, and no worker start-up comes after it to apply the policy.
    late = enqueue(conn, "send_email", {"userId": 3}, registry=Registry())
    with running_worker(declare_email(), clean_db, queues=["email"]):
        wait_for(lambda: published(clean_db).get("send_email"), message="publication")
        conn.commit()
        wait_for(lambda: job_row(clean_db, late)["status"] == "completed",
                 message="the late job to run on the declared queue's lane")
    row = job_row(clean_db, late)
    assert (row["queue"], row["max_attempts"], row["policy_defaults"]) == ("email", 3, None)
    assert [e["queue"] for e in executions(clean_db, late)] == ["email"]


def test_a_paused_declared_queue_holds_jobs_that_took_the_default_queue(conn, clean_db):
    # No job or worker names "email" yet: it is paused ahead of the type's first deploy.
    assert pause_queue(conn, "email", actor="ann", role="operator", reason="SMTP outage",
                       new=True).ok
    conn.commit()
    late = enqueue(conn, "send_email", {"userId": 4}, registry=Registry())
    # This worker serves every queue, "default" too: only the pause may hold the job.
    reg = declare_email()
    job("ping", queue="default", registry=reg)(lambda ctx, payload: None)
    with running_worker(reg, clean_db):
        wait_for(lambda: published(clean_db).get("send_email"), message="publication")
        conn.commit()
        witness = enqueue(conn, "ping", {}, registry=reg)
        conn.commit()
        wait_for(lambda: job_row(clean_db, witness)["status"] == "completed",
                 message="a job of the default queue to run")
        assert job_row(clean_db, late)["status"] == "pending"
        assert resume_queue(conn, "email", actor="ann", role="operator", reason="fixed").ok
        conn.commit()
        wait_for(lambda: job_row(clean_db, late)["status"] == "completed",
                 message="the resumed queue's job to run")
    row = job_row(clean_db, late)
    assert (row["queue"], row["max_attempts"]) == ("email", 3)


def test_publishing_policies_rewrites_none_of_the_jobs_waiting_for_them(conn, clean_db):
    enqueue_defaulted(clean_db, "send_email", 20_000)
    publish_job_types(conn, declare_email(), published_by="w1")
    (xid,) = conn.execute("SELECT pg_current_xact_id()::xid::text").fetchone()
    conn.commit()
    # Every row the publishing transaction wrote carries its transaction id as xmin.
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE xmin::text = %s",
                  [xid]) == 0


#: Jobs waiting for a policy: three times the most one transaction may move, six of the
#: duty's transactions of 500 over two of its passes.
WAITING = 3_000


def test_a_worker_brings_waiting_jobs_over_in_small_transactions(conn, clean_db, monkeypatch):
    monkeypatch.setenv("JOBWARDEN_DUTY_INTERVAL", "0.1")
    enqueue_defaulted(clean_db, "send_email", WAITING)
    enqueue_defaulted(clean_db, "other_type", 10)
    # Paused, so that no claim takes them: every one moved is the duty's doing. (New: the
    # jobs wait on the default queue, and no worker has declared "email" yet.)
    assert pause_queue(conn, "email", actor="ann", role="operator", reason="hold", new=True).ok
    conn.commit()
    with running_worker(declare_email(), clean_db):
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM background_jobs "
                                "WHERE type = 'send_email' AND policy_defaults IS NULL "
                                "AND queue = 'email' AND max_attempts = 3") == WAITING,
                 timeout=120, message="every waiting job to take the published policy")
    # The console's counts and the CLI's read the stored queue: they agree now.
    assert dict(conn.execute("SELECT queue, count(*) FROM background_jobs "
                             "WHERE type = 'send_email' GROUP BY queue")) == {"email": WAITING}
    # A row's xmin is the transaction that last wrote it: no transaction wrote many.
    largest = scalar(clean_db, "SELECT max(n) FROM (SELECT count(*) AS n FROM background_jobs "
                     "WHERE type = 'send_email' GROUP BY xmin::text) AS per_transaction")
    assert largest <= 1_000
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE type = 'other_type' "
                  "AND policy_defaults IS NOT NULL AND queue = 'default'") == 10
