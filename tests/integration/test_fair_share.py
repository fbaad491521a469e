"""Fair share across tenants (claim_fair_jobs, docs/guide/fair-share.md): a type with a
`fair_key` has each job's key stored at enqueue, and its claims take from each key in
turn, so one key's burst never holds another key's jobs behind it."""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter

import psycopg
import pytest

from jobwarden import EnqueueError, JobSpec, Registry, enqueue, enqueue_many, job
from jobwarden.worker.engine.listener import Wakeup
from jobwarden.worker.engine.producer import (
    ClaimedJob,
    ClaimSpec,
    JobBuffer,
    Producer,
    ProducerSettings,
    claim_fair,
    fair_cursor,
    fair_rounds,
)
from jobwarden.worker.jobs.job_types import adopt_defaulted, publish_job_types
from jobwarden.worker.store.db import DedicatedConnection
from tests.helpers import running_worker, scalar, status_counts, stop_processes, wait_for
from tests.integration.test_claim_race import start_worker


def _registry(**options) -> Registry:
    reg = Registry()
    job("tenant.work", fair_key="tenant", registry=reg, **options)(lambda ctx, p: None)
    job("plain.work", registry=reg)(lambda ctx, p: None)
    return reg


def _spec(weights: dict[str, int] | None = None) -> ClaimSpec:
    return ClaimSpec(types=["tenant.work", "plain.work"], leases=[60.0, 60.0],
                     worker_id="w-fair", fair_types=["tenant.work"], fair_weights=weights)


def _claim(url: str, want: int, after: str | None = None,
           weights: dict[str, int] | None = None) -> list[ClaimedJob]:
    with psycopg.connect(url, autocommit=True) as c:
        return claim_fair(c, _spec(weights), want, after)


def _burst(conn, reg: Registry, big: int, small_keys: int, small: int) -> None:
    """`big` jobs of key 'big', enqueued first, then `small` of each of the small keys."""
    specs = [JobSpec("tenant.work", {"tenant": "big", "n": i}) for i in range(big)]
    specs += [JobSpec("tenant.work", {"tenant": f"t{k:02d}", "n": i})
              for k in range(small_keys) for i in range(small)]
    enqueue_many(conn, specs, registry=reg)
    conn.commit()


def test_the_fair_key_is_stored_at_enqueue_and_only_for_fair_types(conn, clean_db):
    reg = _registry()
    a = enqueue(conn, "tenant.work", {"tenant": "acme"}, registry=reg)
    b = enqueue(conn, "tenant.work", {"tenant": 42}, registry=reg)
    c = enqueue(conn, "tenant.work", {"other": 1}, registry=reg)  # no key: the empty key
    d = enqueue(conn, "plain.work", {"tenant": "acme"}, registry=reg)
    conn.commit()
    keys = dict(conn.execute("SELECT id, fair_key FROM background_jobs").fetchall())
    assert keys == {a: "acme", b: "42", c: "", d: None}


def test_a_late_key_is_claimed_before_the_burst_drains(conn, clean_db):
    reg = _registry()
    _burst(conn, reg, big=2000, small_keys=0, small=0)
    enqueue(conn, "tenant.work", {"tenant": "late"}, registry=reg)
    conn.commit()
    got = _claim(clean_db, 10)
    # FIFO would give ten of 'big'; the fair claim gives 'late' its turn at once. Its
    # share of the batch was half: the batch is short...
    assert Counter(j.fair_key for j in got) == {"big": 5, "late": 1}
    # ... and the producer's next round fills it from the keys that still have work.
    with psycopg.connect(clean_db, autocommit=True) as c:
        more, after = fair_rounds(c, _spec(), 10, None)
    assert Counter(j.fair_key for j in more) == {"big": 10} and after == "big"


def test_each_key_gets_its_turn_and_the_batch_is_split_evenly(conn, clean_db):
    reg = _registry()
    _burst(conn, reg, big=3000, small_keys=50, small=10)
    got = _claim(clean_db, 200)
    per_key = Counter(j.fair_key for j in got)
    assert len(got) == 200
    assert set(per_key) == {"big"} | {f"t{k:02d}" for k in range(50)}
    assert max(per_key.values()) - min(per_key.values()) <= 1


def test_a_weighted_key_takes_its_weight_per_turn(conn, clean_db):
    reg = _registry(fair_weights={"gold": 3})
    enqueue_many(conn, [JobSpec("tenant.work", {"tenant": t, "n": i})
                        for t in ("gold", "iron") for i in range(100)], registry=reg)
    conn.commit()
    got = _claim(clean_db, 40, weights={"gold": 3})
    assert Counter(j.fair_key for j in got) == {"gold": 30, "iron": 10}


def test_a_short_batch_is_taken_turn_by_turn(conn, clean_db):
    # Shares (5, 2, 2) are more than the 7 wanted: turn 1 takes gold 3, iron 1, lead 1,
    # turn 2 begins with gold's next two.
    reg = _registry(fair_weights={"gold": 3})
    enqueue_many(conn, [JobSpec("tenant.work", {"tenant": t, "n": i})
                        for t in ("gold", "iron", "lead") for i in range(20)], registry=reg)
    conn.commit()
    got = _claim(clean_db, 7, weights={"gold": 3})
    assert Counter(j.fair_key for j in got) == {"gold": 5, "iron": 1, "lead": 1}


def test_a_walk_that_wraps_meets_each_key_once(conn, clean_db):
    reg = _registry()
    enqueue_many(conn, [JobSpec("tenant.work", {"tenant": k, "n": i})
                        for k in "abc" for i in range(2)], registry=reg)
    conn.commit()
    # After 'b': c, then round to a and b, and stop (a second c would take a share
    # of the batch and give it the same rows again).
    got = _claim(clean_db, 4, after="b")
    assert len({j.id for j in got}) == len(got) == 4
    assert Counter(j.fair_key for j in got) == {"c": 2, "a": 1, "b": 1}


def test_the_walk_goes_round_every_key_over_claims(conn, clean_db, monkeypatch):
    # More keys than one claim walks: the cursor moves on, and wraps.
    monkeypatch.setattr("jobwarden.worker.engine.producer.FAIR_WALK_KEYS", 3)
    reg = _registry()
    enqueue_many(conn, [JobSpec("tenant.work", {"tenant": k, "n": i})
                        for k in "abcde" for i in range(4)], registry=reg)
    conn.commit()
    after, order = None, []
    for _ in range(4):
        got = _claim(clean_db, 3, after)
        order.append("".join(sorted(j.fair_key or "?" for j in got)))
        after = fair_cursor(got)
    assert order == ["abc", "ade", "bcd", "abe"]


def _producer(url: str, *, listens: bool = False, poll: float = 2.0) -> Producer:
    """A lane of tenant.work (fair) and plain.work, claimed by hand (Producer._claim)."""
    return Producer(conn=DedicatedConnection(url), claims=_spec(), buffer=JobBuffer(),
                    concurrency=4, running=lambda: 0, job_seconds=lambda: None,
                    wake=Wakeup(), stop=threading.Event(), listens=listens,
                    settings=ProducerSettings(poll_interval=poll))


def test_a_lane_claims_fair_work_through_its_own_prepared_statement(conn, clean_db):
    # As the plain claim: prepared by name on the claim connection, every parameter but
    # the batch size and the walk's start dumped once; the start NULL at first, then the
    # last key taken, so each claim gives every key its turn.
    reg = _registry()
    enqueue_many(conn, [JobSpec("tenant.work", {"tenant": k, "n": i})
                        for k in "abc" for i in range(6)], registry=reg)
    conn.commit()
    p = _producer(clean_db)
    got = [p._claim(3) for _ in range(4)]
    assert [sorted(j.fair_key or "?" for j in g) for g in got] == [["a", "b", "c"]] * 4
    assert len({j.id for g in got for j in g}) == 12
    # The first claim made two fair rounds around its plain one (half the batch each
    # way, then the rest), each later one a single round: five runs of one statement,
    # and psycopg prepared none of its own for it.
    assert p._conn.get().execute(
        "SELECT name, generic_plans FROM pg_prepared_statements "
        "WHERE statement LIKE '-- jobwarden: claim_fair_jobs%'").fetchall() == [
        ("jobwarden_claim_fair_jobs", 5)]
    # The next claim's walk starts after the last key this one took.
    assert fair_cursor(got[-1]) == "c"


def test_a_job_without_a_fair_key_is_left_to_the_plain_claim(conn, clean_db):
    reg = _registry()
    enqueue(conn, "plain.work", {"tenant": "x"}, registry=reg)
    conn.commit()
    assert _claim(clean_db, 10) == []
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE status = 'pending'") == 1


#: 10 kB that do not compress: stored raw, its index entry would pass the btree's limit
#: (about 2,700 bytes) and fail the enqueue.
NOISE = random.Random(40).randbytes(5_000).hex()


@pytest.mark.parametrize("value", ["<script>alert(1)</script>&amp;\"'", "é" * 5000,
                                   "x" * 10_000, NOISE])
def test_a_hostile_key_is_stored_and_claimed_like_any(conn, clean_db, value):
    reg = _registry()
    enqueue(conn, "tenant.work", {"tenant": value}, registry=reg)
    enqueue(conn, "tenant.work", {"tenant": "other"}, registry=reg)
    conn.commit()
    stored = {r[0] for r in conn.execute("SELECT fair_key FROM background_jobs")}
    # Over 200 characters a key goes by its hash: the index entry stays small.
    want = value if len(value) <= 200 else next(k for k in stored if k.startswith("sha256:"))
    assert stored == {want, "other"} and len(want) <= 200
    assert {j.fair_key for j in _claim(clean_db, 2)} == {want, "other"}


def test_a_nul_in_the_key_is_refused_at_enqueue_and_writes_nothing(conn, clean_db):
    reg = _registry()
    with pytest.raises(EnqueueError):
        enqueue(conn, "tenant.work", {"tenant": "a\x00b"}, registry=reg)
    conn.rollback()
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0


@pytest.mark.parametrize("options, message", [
    ({"fair_key": "a b"}, "fair_key must be a dotted payload path"),
    ({"fair_key": "t", "fair_weights": {"x": 0}}, "from 1 to 100"),
    ({"fair_key": "t", "fair_weights": {"x": True}}, "from 1 to 100"),
    ({"fair_weights": {"x": 2}}, "fair_weights need a fair_key"),
])
def test_a_bad_declaration_is_one_line(options, message):
    with pytest.raises(ValueError, match=message):
        job("bad.fair", registry=Registry(), **options)(lambda ctx, p: None)


# --- Through real workers ---------------------------------------------------------------

def test_a_real_worker_starts_late_keys_before_the_burst_drains(conn, clean_db):
    reg = _registry()
    job("tenant.slow", fair_key="tenant", registry=reg)(lambda ctx, p: time.sleep(0.005))
    enqueue_many(conn, [JobSpec("tenant.slow", {"tenant": "big", "n": i})
                        for i in range(3000)], registry=reg)
    conn.commit()
    with running_worker(reg, clean_db, concurrency=2):
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM background_jobs "
                                          "WHERE status = 'completed'") >= 20)
        # Ten tenants arrive behind a backlog that takes this worker many seconds.
        enqueue_many(conn, [JobSpec("tenant.slow", {"tenant": f"late{k}"})
                            for k in range(10)], registry=reg)
        conn.commit()
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM background_jobs "
                                          "WHERE fair_key LIKE 'late%%' "
                                          "AND status = 'completed'") == 10, timeout=60)
        # FIFO would have run them last; they ran while most of the burst still waits.
        assert scalar(clean_db, "SELECT count(*) FROM background_jobs "
                                "WHERE fair_key = 'big' AND status = 'pending'") > 1500


def test_a_job_enqueued_without_the_key_in_its_payload_runs_under_the_empty_key(
        conn, clean_db):
    reg = _registry()
    enqueue(conn, "tenant.work", {"no_tenant": True}, registry=reg)
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: scalar(clean_db, "SELECT status FROM background_jobs") == "completed")
    assert scalar(clean_db, "SELECT fair_key FROM background_jobs") == ""


def test_fair_claims_of_racing_and_restarted_workers_run_each_job_once(conn, clean_db):
    conn.execute("CREATE TABLE fair_log (job_id bigint, execution_id uuid, pid int, "
                 "tenant text)")
    reg = Registry()
    job("fair.race", fair_key="tenant", registry=reg)(lambda ctx, p: None)
    jobs = 1500
    procs = [start_worker("tests.apps.fair_app", "--concurrency", "4") for _ in range(3)]
    try:
        # Enqueued once all three are up, so all three race for the first claims: one
        # started sooner on a busy machine drained most of them alone.
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM job_workers") >= 3,
                 timeout=60, message="the three workers to register")
        enqueue_many(conn, [JobSpec("fair.race", {"tenant": f"t{i % 25}", "n": i})
                            for i in range(jobs)], registry=reg)
        conn.commit()
        # One worker stops part way and a new one takes its place.
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM fair_log") >= jobs // 3,
                 timeout=120)
        stop_processes(procs[:1], signal.SIGTERM)
        procs.append(start_worker("tests.apps.fair_app", "--concurrency", "4"))
        # Registered, so it handles the SIGTERM below: on a busy machine the others may
        # drain the rest before it has started, and a stop that came sooner killed it.
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM job_workers") >= 4,
                 timeout=60, message="the new worker to register")
        wait_for(lambda: status_counts(clean_db).get("completed") == jobs, timeout=120,
                 interval=0.2, message=f"{jobs} jobs to complete")
    finally:
        errors = [err.decode()[-2000:] for _, err in stop_processes(procs[1:], signal.SIGTERM)]
    assert [p.returncode for p in procs] == [0] * len(procs), errors
    assert scalar(clean_db, "SELECT count(*) FROM fair_log") == jobs
    assert scalar(clean_db, "SELECT count(DISTINCT job_id) FROM fair_log") == jobs
    assert scalar(clean_db, "SELECT max(attempts) FROM background_jobs") == 1
    assert scalar(clean_db, "SELECT count(DISTINCT pid) FROM fair_log") >= 3


def test_a_job_enqueued_before_the_type_was_published_gets_its_key_when_adopted(
        conn, clean_db):
    # No declaration where it is enqueued, none published: no key yet, and the fair claim
    # does not see it.
    job_id = enqueue(conn, "tenant.work", {"tenant": "early"}, registry=Registry())
    conn.commit()
    assert scalar(clean_db, "SELECT fair_key FROM background_jobs") is None
    assert _claim(clean_db, 10) == []
    # Its worker publishes the type, and its duty adopts the job: it has its key.
    publish_job_types(conn, list(_registry()), "w-fair")
    conn.commit()
    with psycopg.connect(clean_db, autocommit=True) as c:
        assert adopt_defaulted(c, ["tenant.work"]) == 1
    assert [j.id for j in _claim(clean_db, 10)] == [job_id]


def test_a_plain_type_beside_a_fair_burst_is_not_held_behind_it(conn, clean_db):
    # One lane serves both kinds: the fair claim takes half the batch, the plain claim the
    # rest, so a plain job enqueued after a fair burst starts while the burst still waits.
    reg = _registry()
    job("tenant.slow", fair_key="tenant", registry=reg)(lambda ctx, p: time.sleep(0.005))
    enqueue_many(conn, [JobSpec("tenant.slow", {"tenant": "big", "n": i})
                        for i in range(3000)], registry=reg)
    conn.commit()
    with running_worker(reg, clean_db, concurrency=2):
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM background_jobs "
                                          "WHERE status = 'completed'") >= 20)
        enqueue(conn, "plain.work", {"n": 1}, registry=reg)
        conn.commit()
        wait_for(lambda: scalar(clean_db, "SELECT status FROM background_jobs "
                                          "WHERE type = 'plain.work'") == "completed",
                 timeout=60)
        assert scalar(clean_db, "SELECT count(*) FROM background_jobs "
                                "WHERE fair_key = 'big' AND status = 'pending'") > 1500


def _claimed_types(jobs: list[ClaimedJob]) -> Counter:
    return Counter(j.type for j in jobs)


def test_a_notification_ends_the_plain_claims_rest_behind_a_fair_backlog(conn, clean_db):
    # The plain claim found nothing beside a fair backlog: it rests, for a poll interval
    # of 30 s here. A plain job's notification ends the rest within moments (a few
    # times the empty claim's own time), not at the poll.
    reg = _registry()
    enqueue_many(conn, [JobSpec("tenant.work", {"tenant": "big", "n": i})
                        for i in range(2000)], registry=reg)
    conn.commit()
    p = _producer(clean_db, listens=True, poll=30.0)
    assert _claimed_types(p._claim(10)) == {"tenant.work": 10}  # its plain claim: none
    assert _claimed_types(p._claim(10)) == {"tenant.work": 10}  # resting
    job_id = enqueue(conn, "plain.work", {"n": 1}, registry=reg)
    conn.commit()
    p._sleep(5.0)  # as the claim loop waits: the notification wakes it
    assert p._notified
    deadline, ids = time.monotonic() + 5.0, set()
    while job_id not in ids and time.monotonic() < deadline:
        ids |= {j.id for j in p._claim(10)}
        time.sleep(0.02)
    assert job_id in ids


def test_the_rest_ends_when_fair_work_no_longer_fills_the_batch(conn, clean_db):
    # No notification (this lane does not listen): once the fair jobs are fewer than
    # the batch, the same claim makes the plain one.
    reg = _registry()
    enqueue_many(conn, [JobSpec("tenant.work", {"tenant": "big", "n": i})
                        for i in range(25)], registry=reg)
    conn.commit()
    p = _producer(clean_db, poll=30.0)
    assert _claimed_types(p._claim(10)) == {"tenant.work": 10}
    enqueue(conn, "plain.work", {"n": 1}, registry=reg)
    conn.commit()
    assert _claimed_types(p._claim(10)) == {"tenant.work": 10}  # resting: fair fills it
    assert _claimed_types(p._claim(10)) == {"tenant.work": 5, "plain.work": 1}
