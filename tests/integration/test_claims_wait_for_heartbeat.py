"""A worker claims only what its heartbeat can renew (docs/faults.md, "Heartbeat, claims
and recovery").

After a PostgreSQL restart the claim connection came back within seconds while the
heartbeat's pool backed off without a cap: the worker claimed jobs whose leases then
lapsed under it, and they ran twice (issue 35). Here the producer and the heartbeat run
in-process against the real database, and the heartbeat's connection is pointed at a
server that is not there (a refused connection, as during the restart): every beat
fails, the producer claims nothing, and the waits between beats stop growing at one
interval. Pointed back at the database, the next beat goes through and the producer
claims at once. The restart itself, with real worker processes, is
tests/chaos/test_database_restart.py.
"""

from __future__ import annotations

import logging
import threading

import psycopg
import pytest
from psycopg_pool import ConnectionPool

from jobwarden import Registry, enqueue, job
from jobwarden.worker.duties.recovery import recover_stale_running
from jobwarden.worker.engine.completer import Completer
from jobwarden.worker.engine.executor import Executor
from jobwarden.worker.engine.heartbeat import Heartbeat
from jobwarden.worker.engine.listener import Wakeup
from jobwarden.worker.engine.producer import ClaimSpec, JobBuffer, Producer, ProducerSettings
from jobwarden.worker.store.db import DedicatedConnection
from tests.helpers import scalar, wait_for

TYPE = "renewed.work"
#: Nothing listens on port 1: a connection there is refused at once.
NOWHERE = "postgresql://postgres@127.0.0.1:1/postgres"
INTERVAL = 1.0


@pytest.fixture
def registry():
    reg = Registry()

    @job(TYPE, lease=30, registry=reg)
    def work(ctx, payload):
        raise AssertionError("nothing runs these: no slot thread is started")

    return reg


class Scene:
    """A lane's producer and the worker's heartbeat, on threads of their own."""

    def __init__(self, url: str, registry: Registry, pool: ConnectionPool,
                 heartbeat_url: str) -> None:
        self.buffer = JobBuffer()
        self.wake = Wakeup()
        self.stop = threading.Event()
        self.closing = threading.Event()
        self.beat_conn = DedicatedConnection(heartbeat_url)
        executor = Executor(registry=registry, pool=pool, buffer=self.buffer, completer=None,
                            concurrency=4, on_slot_free=lambda job: None,
                            on_abandoned=lambda: None)
        self.heartbeat = Heartbeat(
            conn=self.beat_conn, worker_id="w-renew", executors=[executor],
            completer=Completer(DedicatedConnection(url)), interval=INTERVAL,
            recovery_interval=60.0, recover=lambda conn: recover_stale_running(conn, registry),
            draining=lambda: False, on_recovered=lambda: None, on_renewing=self.wake.set)
        self.producer = Producer(
            conn=DedicatedConnection(url),
            claims=ClaimSpec(types=[TYPE], leases=[30.0], worker_id="w-renew"),
            buffer=self.buffer, concurrency=4, running=lambda: 0, job_seconds=lambda: None,
            wake=self.wake, stop=self.stop, settings=ProducerSettings(poll_interval=0.05),
            renewal=self.heartbeat)
        self.threads = [threading.Thread(target=self.producer.run, daemon=True)]

    def start(self, *, heartbeat: bool = True) -> None:
        if heartbeat:
            self.threads.append(threading.Thread(target=self.heartbeat.run,
                                                 args=(self.closing,), daemon=True))
        for t in self.threads:
            t.start()

    def close(self) -> None:
        self.stop.set()
        self.closing.set()
        self.wake.set()
        for t in self.threads:
            t.join(20)
        assert not any(t.is_alive() for t in self.threads)


@pytest.fixture
def scene(clean_db, registry, request):
    with ConnectionPool(clean_db, min_size=1, max_size=3) as pool:
        s = Scene(clean_db, registry, pool, heartbeat_url=request.param)
        try:
            yield s
        finally:
            s.close()


def actions(caplog, action: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "action", None) == action]


def statuses(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT status, count(*) FROM background_jobs "
                                 "GROUP BY status").fetchall())


@pytest.mark.parametrize("scene", [NOWHERE], indirect=True)
def test_no_claim_while_every_beat_fails_and_the_beats_back_off_to_one_interval(
        scene, clean_db, conn, registry, caplog):
    caplog.set_level(logging.INFO, logger="jobwarden")
    for n in range(3):
        enqueue(conn, TYPE, {"n": n}, registry=registry)
    conn.commit()
    scene.start()
    # Four failed beats: waits of 0.5 s, then 1 s (one interval), where a pool's went on
    # doubling (1, 2, 4, 8, 16 s ...). The producer polls every 50 ms meanwhile.
    wait_for(lambda: len(actions(caplog, "heartbeat_failed")) >= 4, timeout=30,
             message="four failed beats")
    assert statuses(clean_db) == {"pending": 3}
    assert len(scene.buffer) == 0
    waits = [r.retry_in for r in actions(caplog, "heartbeat_failed")]
    assert waits[:4] == [0.5, INTERVAL, INTERVAL, INTERVAL]
    assert max(waits) == INTERVAL

    scene.beat_conn.url = clean_db  # the server answers again
    wait_for(lambda: statuses(clean_db) == {"running": 3}, timeout=30,
             message="the claim once a beat went through")
    assert len(scene.buffer) == 3
    # A start's wait for the first beat is no news: nothing said.
    assert not actions(caplog, "claims_paused") and not actions(caplog, "claims_resumed")


@pytest.mark.parametrize("scene", [None], indirect=True)
def test_after_its_own_connection_failed_a_producer_waits_for_a_beat_sent_since(
        scene, clean_db, conn, registry, caplog):
    """The beat before the failure proves nothing about the heartbeat's connection now:
    a restart ends every session at once. The heartbeat is beaten by hand here, so that
    no beat comes but the ones the test sends."""
    caplog.set_level(logging.INFO, logger="jobwarden")
    scene.beat_conn.url = clean_db
    scene.heartbeat.beat()  # went through: the producer may claim
    enqueue(conn, TYPE, {"n": 0}, registry=registry)
    conn.commit()
    scene.start(heartbeat=False)
    wait_for(lambda: statuses(clean_db) == {"running": 1}, message="the first claim")
    # The claim connection's session ends (as in a restart); its next claim fails.
    assert scalar(clean_db, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                            "WHERE datname = current_database() AND pid <> "
                            "pg_backend_pid() AND query LIKE '%%claim_jobs%%'") == 1
    enqueue(conn, TYPE, {"n": 1}, registry=registry)
    conn.commit()
    scene.wake.set()
    wait_for(lambda: actions(caplog, "claims_paused"), message="the claims to wait")
    for _ in range(3):  # woken again and again: still no claim without a beat
        scene.wake.set()
        wait_for(lambda: not scene.wake.is_set(), message="the producer to wake")
    assert statuses(clean_db) == {"running": 1, "pending": 1}

    scene.heartbeat.beat()  # a beat sent since the failure went through
    scene.wake.set()
    wait_for(lambda: statuses(clean_db) == {"running": 2}, message="the claim after the beat")
    assert actions(caplog, "claims_resumed")
