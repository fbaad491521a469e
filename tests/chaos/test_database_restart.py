"""PostgreSQL restarted under a backlog: a private cluster (its own port, started by the
test) is stopped abruptly while several workers chew through thousands of jobs, kept
down longer than a lease, and started again. The workers reconnect with backoff and
LISTEN again; afterwards every job is terminal, none is stuck in `running`, none is lost,
and every completed job's business write exists exactly once."""

from __future__ import annotations

import os

import psycopg
import pytest

from tests.apps.chaos_app import create_tables
from tests.chaos.conftest import deadline_passed
from tests.chaos.support import add_many
from tests.helpers import scalar, status_counts, wait_for
from worker.engine.listener import LISTEN_APPLICATION_NAME

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

