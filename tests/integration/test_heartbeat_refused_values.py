"""A value PostgreSQL refuses in one job's progress costs no other job its lease.

The heartbeat renews every running job of its worker in one statement, progress and
checkpoints with it. The handler's calls refuse what JSON cannot hold (NaN, a datetime)
before it gets here; should a value slip past them all the same, PostgreSQL refuses the
whole statement. The beat then renews the leases without the values, writes each job's
on its own, and drops only the one refused again, saying so: kept for the next beat, it
would fail that one too, and every one after it. In-process against the real database.
"""

from __future__ import annotations

import logging
import threading
import time

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from jobwarden import Registry, enqueue, job
from jobwarden.worker.duties.recovery import recover_stale_running
from jobwarden.worker.engine.completer import Completer
from jobwarden.worker.engine.context import ExecutionControl
from jobwarden.worker.engine.executor import Execution
from jobwarden.worker.engine.heartbeat import Heartbeat
from jobwarden.worker.engine.producer import JobBuffer, claim
from jobwarden.worker.store.db import DedicatedConnection

LEASE = 30.0
TYPE = "beat.values"


class Lane:
    """What the heartbeat reads of a lane's executor: its running executions and buffer."""

    def __init__(self, executions: list[Execution]) -> None:
        self.buffer = JobBuffer()
        self._executions = executions

    def running(self) -> list[Execution]:
        return self._executions

    def loop_lag(self) -> None:
        return None


@pytest.fixture
def registry():
    reg = Registry()

    @job(TYPE, lease=LEASE, registry=reg)
    def values(ctx, payload):
        raise AssertionError("the executions are driven by the test, not by a worker")

    return reg


def test_one_jobs_refused_progress_is_dropped_and_every_lease_still_renewed(
        clean_db, registry, caplog):
    with psycopg.connect(clean_db, autocommit=True) as db, \
            ConnectionPool(clean_db, min_size=1, max_size=2) as pool:
        for n in range(2):
            enqueue(db, TYPE, {"n": n}, registry=registry)
        jobs = sorted(claim(db, types=[TYPE], leases=[LEASE], queues=None, limit=2,
                            worker_id="w-values"), key=lambda j: j.id)
        controls = [ExecutionControl.for_job(j, pool=pool, timeout=None, async_pool=None,
                                             started=time.monotonic()) for j in jobs]
        bad, good = controls
        # Past the call's checks: a NUL escaped in JSON, which jsonb refuses as text.
        bad.stage_progress({"processed": 1})
        bad._pending_progress = '{"note": "\\u0000"}'
        bad.stage_checkpoint('{"page": 1}')
        good.stage_progress({"processed": 2, "total": 4})
        good.stage_checkpoint('{"page": 2}')
        db.execute("UPDATE background_jobs SET heartbeat_at = now() - interval '1 hour'")
        executions = [Execution(job=j, job_type=registry.get(TYPE), control=c,
                                thread=threading.current_thread())
                      for j, c in zip(jobs, controls, strict=True)]
        beat = Heartbeat(conn=DedicatedConnection(clean_db), worker_id="w-values",
                         executors=[Lane(executions)],
                         completer=Completer(DedicatedConnection(clean_db)),
                         interval=1.0, recovery_interval=60.0,
                         recover=lambda conn: recover_stale_running(conn, registry),
                         draining=lambda: False, on_recovered=lambda: None)

        with caplog.at_level(logging.WARNING, logger="jobwarden.heartbeat"):
            beat.beat()

        rows = {r[0]: r[1:] for r in db.execute(
            "SELECT id, status, heartbeat_at > now() - interval '1 minute', progress, "
            "checkpoint FROM background_jobs").fetchall()}
        assert rows[good.job_id] == ("running", True, {"processed": 2, "total": 4},
                                     {"page": 2})
        # Its progress alone is dropped: its checkpoint is written on its own.
        assert rows[bad.job_id] == ("running", True, None, {"page": 1})
        assert beat.renewing()
        dropped = [r for r in caplog.records if getattr(r, "action", "") == "progress_dropped"]
        assert [r.job_id for r in dropped] == [bad.job_id]
        assert "progress (UntranslatableCharacter" in dropped[0].getMessage()
        # Dropped, not kept for the next beat: that one goes through as it is.
        assert bad.take_pending() == (None, None)
        caplog.clear()
        beat.beat()
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
