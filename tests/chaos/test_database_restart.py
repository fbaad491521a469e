"""PostgreSQL restarted under a backlog: a private cluster (its own port, started by the
test) is stopped abruptly while several workers chew through thousands of jobs, kept
down longer than a lease, and started again. The workers reconnect with backoff and
LISTEN again; afterwards every job is terminal, none is stuck in `running`, none is lost,
and every completed job's business write exists exactly once.

And after a restart a worker claims only what its heartbeat can renew: a job claimed
while its beats still failed lost its lease under the live worker and ran twice
(issue 35); the heartbeat reconnects on a backoff capped at one interval."""

from __future__ import annotations

import os
import re

import psycopg
import pytest

from jobwarden.worker.duties.recovery import recover_stale_running
from jobwarden.worker.engine.listener import LISTEN_APPLICATION_NAME
from jobwarden.worker.jobs.registry import registry
from tests.apps.chaos_app import create_tables
from tests.chaos.conftest import deadline_passed
from tests.chaos.support import add_many
from tests.helpers import scalar, status_counts, wait_for

pytestmark = pytest.mark.chaos

JOBS = 3000
WORKERS = 3


def test_a_postgresql_restart_mid_backlog_loses_and_strands_nothing(workers, private_cluster):
    url = private_cluster.url
    with psycopg.connect(url) as conn:
        create_tables(conn)
    for start in range(0, JOBS, 1000):
        add_many(url, "chaos.quick", [{"n": i, "seconds": float(os.environ.get("CHAOS_QUICK_SECONDS", 0.01))}
                                     for i in range(start, start + 1000)])
    pool = [workers.start(concurrency=4, url=url) for _ in range(WORKERS)]
    wait_for(lambda: (status_counts(url).get("completed") or 0) >= JOBS // 5, timeout=60,
             message="the backlog to be well under way")

    private_cluster.stop("immediate")  # a crash: no goodbye to any session
    # Down for longer than the 2 s lease, and until every worker has noticed.
    lease_outlived = deadline_passed(3.0)
    wait_for(lambda: lease_outlived() and all(
        w.logged("failed") or w.logged("lost") for w in pool), timeout=30,
        message="every worker to notice the outage")
    private_cluster.start()

    wait_for(lambda: set(status_counts(url)) == {"completed"}, timeout=120, interval=0.5,
             message="every job to complete after the restart")
    assert status_counts(url) == {"completed": JOBS}
    assert all(w.alive() for w in pool), "a worker died with the database"
    # Exactly one business write per job: it commits together with the completion.
    missing = scalar(url, "SELECT array_agg(id) FROM background_jobs j WHERE NOT EXISTS "
                          "(SELECT 1 FROM chaos_orders o WHERE o.job_id = j.id)")
    assert missing is None, f"completed without their business write: {missing}"
    assert scalar(url, "SELECT count(*) FROM chaos_orders") == JOBS
    assert scalar(url, "SELECT count(DISTINCT job_id) FROM chaos_orders") == JOBS
    assert scalar(url, "SELECT count(*) FROM job_executions WHERE finished_at IS NULL") == 0
    # Every worker is LISTENing again on its new claim connection (one lane each).
    wait_for(lambda: scalar(url, "SELECT count(*) FROM pg_stat_activity WHERE "
                                 "application_name = %s", [LISTEN_APPLICATION_NAME]) == WORKERS,
             message="every worker to LISTEN again")



#: Long enough for a backoff that doubles from 1 s to reach 16 s between attempts, as
#: the heartbeat's connection pool's did (its attempts 1, 3, 7, 15, 31 s after the
#: first failure; a claim connection's 0.5, 1.5, 3.5, 7.5, 15.5, 25.5 s).
OUTAGE = 17.0


def test_after_a_restart_a_worker_claims_only_what_its_heartbeat_renews(workers,
                                                                        private_cluster):
    url = private_cluster.url
    with psycopg.connect(url) as conn:
        create_tables(conn)
    # A slot for every job enqueued after the restart: all are claimed in the first claims,
    # the ones that meet a heartbeat not yet back.
    w = workers.start(concurrency=8, url=url)
    # A few jobs first: every connection of the worker is open when the server dies.
    warm = add_many(url, "chaos.plain", [{"seconds": 0.01} for _ in range(4)])
    wait_for(lambda: status_counts(url) == {"completed": len(warm)}, timeout=60,
             message="the first jobs")

    private_cluster.stop("immediate")
    outage = deadline_passed(OUTAGE)
    wait_for(lambda: outage() and w.logged("heartbeat failed"), timeout=60,
             message="the outage to outlast a growing backoff")
    private_cluster.start()
    # Enqueued once the server is back, so nothing was running when it died: no job
    # has a reason to run twice but a lease lost under the live worker. Each runs longer
    # than its 2 s lease.
    ids = add_many(url, "chaos.plain", [{"seconds": 3.0} for _ in range(8)])

    def recovered_and_done() -> bool:
        # Another worker's recovery pass, at every moment: a lease that lapses under the
        # live worker is taken at once, and the job runs again (the worker's own pass,
        # on its heartbeat's connection, may still be failing).
        with psycopg.connect(url, autocommit=True) as conn:
            recover_stale_running(conn, registry)
        return status_counts(url) == {"completed": len(warm) + len(ids)}

    wait_for(recovered_and_done, timeout=120, interval=0.2,
             message="every job to complete after the restart")
    # The oracle: each handler noted its start, committed at once.
    twice = scalar(url, "SELECT array_agg(job_id ORDER BY job_id) FROM (SELECT job_id "
                        "FROM chaos_events WHERE event = 'started' GROUP BY job_id "
                        "HAVING count(*) > 1) t")
    assert twice is None, f"jobs run twice: {twice}"
    assert scalar(url, "SELECT count(DISTINCT job_id) FROM chaos_events "
                       "WHERE event = 'started' AND job_id = ANY(%s)", [ids]) == len(ids)
    assert w.alive()
    log = w.log.read_text(errors="replace")
    # The producer waited for the heartbeat rather than claim what it could not renew,
    assert "claims wait: the heartbeat cannot renew leases" in log
    # and the heartbeat's waits between failed beats never grew past one interval (a
    # third of the chaos app's shortest lease, 1 s), however long the server was down.
    waits = [float(x) for x in re.findall(r"heartbeat failed \(.*?\); retrying in ([0-9.]+)s",
                                          log, re.DOTALL)]
    assert len(waits) >= 5 and set(waits) == {0.3}, waits
