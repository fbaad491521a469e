"""The producers' own LISTEN (worker/engine/producer.py, docs/architecture.md §6, "Waking a
producer"): each lane's claim connection LISTENs, a notification wakes the producers of
the lanes serving its queue, and that thread claims at once on that connection.

Every worker here polls once a minute, so a job that starts within seconds was started
by a notification; the tests' 20 s deadlines stay far below that poll.
"""

from __future__ import annotations

import threading

import pytest

from jobwarden import Registry, enqueue, job
from jobwarden.worker.engine.listener import LISTEN_APPLICATION_NAME
from jobwarden.worker.engine.producer import Producer
from jobwarden.worker.process import WorkerProcess
from tests.helpers import job_row, running_worker, scalar, wait_for, with_query

POLL = 60.0
LISTENERS = ("SELECT array_agg(pid ORDER BY pid) FROM pg_stat_activity "
             "WHERE datname = current_database() AND application_name = %s")


def ping_registry() -> Registry:
    reg = Registry()

    @job("ping", registry=reg)
    def ping(ctx, payload):
        pass

    @job("mail", queue="email", registry=reg)
    def mail(ctx, payload):
        pass

    return reg


def listeners(url: str) -> list[int]:
    return scalar(url, LISTENERS, [LISTEN_APPLICATION_NAME]) or []


def listening(worker: WorkerProcess) -> bool:
    return all(rt.producer.listening for rt in worker._lanes)


def run_notified(conn, url: str, reg: Registry, job_type: str) -> int:
    job_id = enqueue(conn, job_type, {}, registry=reg)
    conn.commit()
    wait_for(lambda: job_row(url, job_id)["status"] == "completed", timeout=20,
             message=f"the notified worker to run {job_type}")
    return job_id


def count_claims(worker: WorkerProcess) -> dict[str, list[int]]:
    """Claims per lane from now on (a wrapper around each producer's claim: the claims
    themselves run on the real database)."""
    counts: dict[str, list[int]] = {}
    for rt in worker._lanes:
        n = counts.setdefault(rt.lane.label, [0])
        real = rt.producer._claim

        def counted(limit, real=real, n=n):
            n[0] += 1
            return real(limit)
        rt.producer._claim = counted  # type: ignore[method-assign]
    return counts


def claimed_sizes(worker: WorkerProcess) -> list[int]:
    """How many jobs each claim of the worker's lanes took, in order, from now on."""
    sizes: list[int] = []
    for rt in worker._lanes:
        real = rt.producer._claim

        def counted(limit, real=real):
            jobs = real(limit)
            sizes.append(len(jobs))
            return jobs
        rt.producer._claim = counted  # type: ignore[method-assign]
    return sizes


def test_the_claim_connection_listens_and_a_notification_starts_the_job(conn, clean_db):
    reg = ping_registry()
    with running_worker(reg, clean_db, poll_interval=POLL) as worker:
        wait_for(lambda: listening(worker), timeout=10, message="the producer to LISTEN")
        # One LISTEN session, the producer's claim connection: no listener thread.
        assert worker.producers_listen
        assert len(listeners(clean_db)) == 1
        assert not [t for t in threading.enumerate() if t.name == "listener"]
        run_notified(conn, clean_db, reg, "ping")


def test_a_notification_wakes_only_the_lanes_serving_its_queue(conn, clean_db):
    reg = ping_registry()
    with running_worker(reg, clean_db, poll_interval=POLL, queues="email=1,*") as worker:
        wait_for(lambda: listening(worker), timeout=10, message="both producers to LISTEN")
        assert len(listeners(clean_db)) == 2  # one claim connection per lane
        counts = count_claims(worker)
        run_notified(conn, clean_db, reg, "mail")
        assert counts["email"][0] >= 1
        # The other lane got the notification too, and went back to sleep unclaimed.
        assert counts["* (other queues)"][0] == 0, counts
        run_notified(conn, clean_db, reg, "ping")
        assert counts["* (other queues)"][0] >= 1


def test_a_terminated_listen_connection_reconnects_and_listens_again(conn, clean_db):
    reg = ping_registry()
    with running_worker(reg, clean_db, poll_interval=POLL) as worker:
        wait_for(lambda: listening(worker), timeout=10, message="the producer to LISTEN")
        [old] = listeners(clean_db)
        assert scalar(clean_db, "SELECT pg_terminate_backend(%s)", [old])
        # Noticed on the socket it waits on: a new claim connection, LISTENing again,
        # long before the next poll would have reconnected it.
        wait_for(lambda: listeners(clean_db) not in ([], [old]) and listening(worker),
                 timeout=20, message="the producer to reconnect and LISTEN again")
        run_notified(conn, clean_db, reg, "ping")


@pytest.mark.parametrize("where", ["pooled, polling", "pooled, direct LISTEN"])
def test_behind_a_transaction_pooler_the_claim_connections_do_not_listen(
        conn, clean_db, monkeypatch, where):
    monkeypatch.setenv("JOBWARDEN_POOLER", "transaction")
    if where == "pooled, direct LISTEN":
        # A URL that differs from the claims' (pooled) one: a LISTEN thread of its own.
        monkeypatch.setenv("JOBWARDEN_LISTEN_URL", with_query(clean_db, application_name="direct"))
    else:
        monkeypatch.delenv("JOBWARDEN_LISTEN_URL", raising=False)
    reg = ping_registry()
    poll = POLL if where == "pooled, direct LISTEN" else 0.3
    with running_worker(reg, clean_db, poll_interval=poll) as worker:
        assert not worker.producers_listen
        if where == "pooled, direct LISTEN":
            wait_for(lambda: len(listeners(clean_db)) == 1, timeout=10,
                     message="the listener thread to LISTEN")
        run_notified(conn, clean_db, reg, "ping")  # by the listener's wake-up, or a poll
        assert not any(rt.producer.listening for rt in worker._lanes)
        assert len(listeners(clean_db)) == (1 if where == "pooled, direct LISTEN" else 0)


def test_a_wakeup_set_by_another_thread_ends_a_wait_on_the_socket(clean_db):
    """The producer's sleep on its socket still ends on the other reasons (a freed slot,
    a low buffer, recovered jobs, a stop), each a `wake.set()` from another thread."""
    reg = ping_registry()
    worker = WorkerProcess(reg, url=clean_db, poll_interval=POLL)
    producer: Producer = worker._lanes[0].producer
    # Its claims wait for beats that go through (Producer._renewable).
    threading.Thread(target=worker.heartbeat.run, args=(worker._closing,),
                     daemon=True).start()
    thread = threading.Thread(target=producer.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: producer.listening, timeout=10, message="the producer to LISTEN")
        counts = count_claims(worker)
        producer.wake.set()  # what on_slot_free and on_low do
        wait_for(lambda: counts["*"][0] == 1, timeout=20, message="the woken claim")
    finally:
        worker._stop.set()
        worker._closing.set()
        producer.wake.set()  # what request_stop does
        thread.join(timeout=20)
    assert not thread.is_alive(), "the producer slept through its stop"



def hold_registry(started: threading.Event, release: threading.Event) -> Registry:
    reg = Registry()

    @job("hold", registry=reg, concurrency_limit=1)
    def hold(ctx, payload):
        started.set()
        release.wait(20)

    return reg


def test_a_short_claims_one_job_claims_nothing_beside_its_start_or_after_its_end(conn,
                                                                                  clean_db):
    """The notified claim finds the one job there is; the slot that takes it empties the
    buffer, and after such a short claim that is no reason to claim again: a claim then
    would run beside the handler's start (it did: one empty claim per job of an idle
    worker). Nor is the job's end, when it had no concurrency key: nothing it held can
    let another job start (Producer.slot_freed), and a claim then would be empty too, with
    a notification that came meanwhile waiting for it."""
    started, release = threading.Event(), threading.Event()
    reg = hold_registry(started, release)
    with running_worker(reg, clean_db, poll_interval=POLL) as worker:
        wait_for(lambda: listening(worker), timeout=10, message="the producer to LISTEN")
        # The start's own claim (woken by the first beat) has found nothing: else it can
        # take the job before its notification is read, and the notification then wakes
        # a claim that finds nothing, after the one this test is about.
        wait_for(lambda: not any(rt.producer._last_full for rt in worker._lanes),
                 timeout=10, message="the producer's first claim")
        taken = claimed_sizes(worker)
        job_id = enqueue(conn, "hold", {}, registry=reg)
        conn.commit()
        try:
            assert started.wait(20), "the notified job did not start"
            # While its handler runs, the producer sleeps: nothing was left to claim.
            threading.Event().wait(0.5)
            assert taken == [1], taken
        finally:
            release.set()
        wait_for(lambda: job_row(clean_db, job_id)["status"] == "completed", timeout=20,
                 message="the job to complete")
        threading.Event().wait(0.5)
        assert taken[-1] == 1, taken


def test_the_end_of_a_job_with_a_concurrency_key_claims_its_keys_next_job(conn, clean_db):
    """A freed slot whose job had a concurrency key wakes the producer: the key's next job,
    which the claim skipped while the key had no room, is claimed at once, not at the
    next poll (a minute away here)."""
    started, release = threading.Event(), threading.Event()
    reg = hold_registry(started, release)
    with running_worker(reg, clean_db, poll_interval=POLL) as worker:
        wait_for(lambda: listening(worker), timeout=10, message="the producer to LISTEN")
        first = enqueue(conn, "hold", {}, concurrency_key="k", registry=reg)
        conn.commit()
        assert started.wait(20), "the notified job did not start"
        second = enqueue(conn, "hold", {}, concurrency_key="k", registry=reg)
        conn.commit()
        # Its notification's claim skips it: its key's one slot is taken.
        threading.Event().wait(0.5)
        assert job_row(clean_db, second)["status"] == "pending"
        release.set()
        wait_for(lambda: job_row(clean_db, second)["status"] == "completed", timeout=20,
                 message="the key's next job, claimed when the first one freed its slot")
        assert job_row(clean_db, first)["status"] == "completed"
