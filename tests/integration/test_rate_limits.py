"""Rate limits and caps in the claim: a claim takes at most as many jobs of a limited
scope as its bucket holds tokens (or its cap leaves room), spends them in the same
statement, steps over a key whose bucket is empty to reach the others, and leaves a job
that must wait pending with its attempts untouched (claim_jobs, worker/engine/limits.py)."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest

from jobwarden import JobSpec, enqueue_many
from jobwarden.worker.engine.limits import Control, LimitBook, lock_scopes
from jobwarden.worker.engine.listener import Wakeup
from jobwarden.worker.engine.producer import (
    ClaimedJob,
    ClaimSpec,
    JobBuffer,
    Producer,
    claim,
    claim_limited,
)
from jobwarden.worker.jobs.registry import JobType
from jobwarden.worker.ops.operations import set_limit
from jobwarden.worker.store.db import DedicatedConnection
from tests.helpers import scalar, wait_for

#: Slow enough that no token comes back during a test (one a minute).
SLOW = 1 / 60


def _type(name: str, queue: str = "default", **limits) -> JobType:
    return JobType(name=name, handler=lambda ctx, p: None, queue=queue, **limits)


def _claim(url: str, book: LimitBook, want: int = 200, serves=lambda q: True,
           types: list[JobType] | None = None) -> list[ClaimedJob]:
    """One limited claim as a producer makes it: the scopes' locks, then claim_jobs."""
    limited = book.for_lane(serves)
    assert limited is not None
    with psycopg.connect(url, autocommit=True) as c:
        return claim_limited(c, _spec(types or book.types), limited, want)


def _spec(types: list[JobType]) -> ClaimSpec:
    return ClaimSpec(types=[t.name for t in types], leases=[60.0] * len(types),
                     worker_id="w-test", type_queues=[t.queue for t in types])


def _unlimited(url: str, types: list[str], want: int = 200) -> list[ClaimedJob]:
    with psycopg.connect(url, autocommit=True) as c:
        return claim(c, types=types, leases=[60.0] * len(types), queues=None, limit=want,
                     worker_id="w-test")


def test_a_claim_takes_no_more_jobs_than_tokens_and_the_rest_stay_pending(conn, clean_db):
    enqueue_many(conn, [JobSpec("rl.slow", {"n": i}) for i in range(20)])
    conn.commit()
    book = LimitBook([_type("rl.slow", rate_limit=SLOW, rate_burst=5)])
    first = _claim(clean_db, book)
    assert len(first) == 5  # the full bucket: its burst
    assert _claim(clean_db, book) == []  # spent, and no token back within the test
    # The tokens were spent in the claim's statement: the bucket says so.
    assert scalar(clean_db, "SELECT floor(tokens) FROM job_rate_buckets "
                            "WHERE bucket = 'type:rl.slow'") == 0
    # A job that must wait is simply not claimed: pending, no attempt, no execution.
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE status = 'pending' "
                            "AND attempts = 0") == 15
    assert scalar(clean_db, "SELECT count(*) FROM job_executions_all") == 5
    # In claim order: the first five jobs enqueued.
    assert sorted(j.payload["n"] for j in first) == [0, 1, 2, 3, 4]


def _as_if_earlier(conn, seconds: float) -> None:
    """Move every bucket's recorded starts `seconds` back, as if that time had passed."""
    conn.execute("UPDATE job_rate_buckets SET updated_at = updated_at - %(d)s, "
                 "window_starts = ARRAY(SELECT s - %(d)s FROM unnest(window_starts) s)",
                 {"d": timedelta(seconds=seconds)})
    conn.commit()


def test_tokens_come_back_once_their_starts_leave_the_window(conn, clean_db):
    enqueue_many(conn, [JobSpec("rl.fast", {}) for _ in range(50)])
    conn.commit()
    # A burst of 3 at one a minute: a window of 3 minutes holds at most 3 starts.
    book = LimitBook([_type("rl.fast", rate_limit=SLOW, rate_burst=3)])
    assert len(_claim(clean_db, book)) == 3
    # Still inside the window: no token back, though a token bucket would have two.
    _as_if_earlier(conn, 179)
    assert _claim(clean_db, book) == []
    # Out of it (past its end and the 1/64 it may be counted longer): the burst again,
    # and at most the burst however long the bucket was idle.
    _as_if_earlier(conn, 180 / 64 + 2)
    assert len(_claim(clean_db, book)) == 3
    _as_if_earlier(conn, 3600)
    assert len(_claim(clean_db, book)) == 3


def test_one_keys_backlog_does_not_starve_the_others(conn, clean_db):
    # Key a's whole backlog ranks ahead of key b's and c's.
    jobs = [JobSpec("rl.keyed", {"account": {"id": "a"}}) for _ in range(300)]
    jobs += [JobSpec("rl.keyed", {"account": {"id": k}}) for k in "bc" for _ in range(4)]
    enqueue_many(conn, jobs)
    conn.commit()
    book = LimitBook([_type("rl.keyed", rate_limit=SLOW, rate_burst=2,
                            rate_limit_key="account.id")])
    def per_key(jobs: list[ClaimedJob]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for j in jobs:
            counts[j.payload["account"]["id"]] = counts.get(j.payload["account"]["id"], 0) + 1
        return counts

    # The first claim's batch holds a's jobs only: a gets its tokens. The next one steps
    # over a (its bucket is empty) to b and c, however long a's backlog.
    assert per_key(_claim(clean_db, book, want=20)) == {"a": 2}
    assert per_key(_claim(clean_db, book, want=20)) == {"b": 2, "c": 2}
    # Each key's bucket holds its own tokens.
    assert scalar(clean_db, "SELECT count(*) FROM job_rate_buckets "
                            "WHERE bucket LIKE 'type:rl.keyed#%%' AND tokens < 1") == 3
    assert _claim(clean_db, book, want=20) == []


def test_unlimited_types_are_claimed_without_the_limits(conn, clean_db):
    enqueue_many(conn, [JobSpec("rl.slow", {}) for _ in range(10)]
                 + [JobSpec("rl.free", {}) for _ in range(10)])
    conn.commit()
    book = LimitBook([_type("rl.slow", rate_limit=SLOW, rate_burst=1), _type("rl.free")])
    limited = _claim(clean_db, book)
    # The limited claim takes limited work only.
    assert [j.type for j in limited] == ["rl.slow"]
    assert {j.type for j in _unlimited(clean_db, ["rl.free"])} == {"rl.free"}
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE status = 'running'"
                            " AND type = 'rl.free'") == 10


def test_live_queue_rate_and_caps(conn, clean_db):
    enqueue_many(conn, [JobSpec("rl.q", {}, queue="emails") for _ in range(30)]
                 + [JobSpec("rl.q", {}, queue="other") for _ in range(30)])
    conn.commit()
    types = [_type("rl.q", queue="emails")]
    book = LimitBook(types)
    assert book.for_lane(lambda q: True) is None  # nothing limited: the plain claim
    book.set_controls([Control("queue", "emails", None, SLOW, 4.0)])
    got = _claim(clean_db, book)
    assert [j.queue for j in got] == ["emails"] * 4
    # A cap on the type: no more running than it allows, whatever the queue.
    book.set_controls([Control("type", "rl.q", 6, None, None)])
    got = _claim(clean_db, book)
    assert len(got) == 2  # 4 already run
    assert _claim(clean_db, book) == []
    # A lane that does not serve the queue is not limited by it.
    book.set_controls([Control("queue", "emails", 1, None, None)])
    assert book.for_lane(lambda q: q == "other") is None


def test_a_live_rate_overrides_the_declared_one_and_clearing_restores_it(conn, clean_db):
    enqueue_many(conn, [JobSpec("rl.d", {}) for _ in range(40)])
    conn.commit()
    book = LimitBook([_type("rl.d", rate_limit=SLOW, rate_burst=2)])
    assert len(_claim(clean_db, book)) == 2
    conn.execute("DELETE FROM job_rate_buckets")
    conn.commit()
    book.set_controls([Control("type", "rl.d", None, SLOW, 7.0)])
    assert len(_claim(clean_db, book)) == 7
    conn.execute("DELETE FROM job_rate_buckets")
    conn.commit()
    book.set_controls([])
    assert len(_claim(clean_db, book)) == 2


@pytest.mark.parametrize("rate", ["100/s", "6000/m", "360000/h", 100, 100.0])
def test_rates_read_alike(rate):
    from jobwarden.worker.jobs.registry import Registry, job
    reg = Registry()
    t = job("rl.parse", rate_limit=rate, registry=reg)(lambda ctx, p: None)
    assert t.rate_limit == 100.0 and t.rate_burst == 100.0


def test_a_session_frozen_holding_a_scopes_lock_stops_its_claims_only_for_a_bound(
        conn, clean_db):
    enqueue_many(conn, [JobSpec("rl.held", {}) for _ in range(10)])
    conn.commit()
    book = LimitBook([_type("rl.held", rate_limit=SLOW, rate_burst=5)])
    limited = book.for_lane(lambda q: True)
    assert limited is not None
    # A worker frozen (SIGSTOP, a long GC pause) between its limited claim's lock
    # statement and its claim: its session sits idle in the transaction, holding the locks.
    frozen = psycopg.connect(clean_db, autocommit=True)
    frozen.execute("BEGIN")
    lock_scopes(frozen, limited.scopes)  # the producer's lock statement, as it sends it
    # Another worker's claims go on once the bound has passed: the server ends the frozen
    # session, which releases the locks. (Without a bound, this claim would wait for ever:
    # the guard's statement timeout fails the test instead.)
    with psycopg.connect(clean_db, autocommit=True,
                         options="-c statement_timeout=30s") as other:
        claimed = wait_for(lambda: claim_limited(other, _spec(book.types), limited, 8),
                           timeout=30, message="another worker's limited claim")
    assert len(claimed) == 5
    # The frozen worker claimed nothing. When it wakes, the rest of its claim (here inside
    # the frozen transaction) finds its session gone, as a lost connection (the claim
    # loop's outage path reconnects), not as an error that would end the lane.
    with pytest.raises(psycopg.OperationalError):
        claim_limited(frozen, _spec(book.types), limited, 8)
    assert frozen.closed
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE status = 'running' "
                            "AND worker_id = 'w-test'") == 5


def test_a_key_behind_a_long_backlog_is_reached_though_the_walk_outlasts_a_refill(
        conn, clean_db):
    # Key a's backlog ranks ahead of key b's; a refills a token every 100 ms, less time
    # than a claim takes to walk past 20,000 of a's jobs. A claim that read the clock row
    # by row found a's bucket refilled part way through its walk, filled its batch with
    # a's jobs again, and never reached b.
    backlog = 20_000
    enqueue_many(conn, [JobSpec("rl.walk", {"account": {"id": "a"}}) for _ in range(backlog)]
                 + [JobSpec("rl.walk", {"account": {"id": "b"}}) for _ in range(50)])
    conn.commit()
    book = LimitBook([_type("rl.walk", rate_limit=10.0, rate_burst=1,
                            rate_limit_key="account.id")])
    keys: list[str] = []

    def claims_reach_b() -> bool:
        keys.extend(j.payload["account"]["id"] for j in _claim(clean_db, book, want=8))
        return "b" in keys

    wait_for(claims_reach_b, timeout=30, interval=0, message="a claim of key b's jobs")
    # Each key got no more than its bucket allowed: a's jobs came one per token.
    started = scalar(clean_db, "SELECT extract(epoch FROM max(started_at) - min(started_at)) "
                               "FROM job_executions_all")
    assert keys.count("a") <= 1 + 10 * float(started)


def test_a_live_rate_without_a_burst_takes_the_burst_of_its_own_rate(conn, clean_db):
    # A type that declares fast bursts, slowed live by an operator (console or
    # `jobwarden limits set --rate 1/m`, no burst): the declared burst of 20 belongs to the
    # declared rate, not to the live one, which gets its own second's worth (one job).
    enqueue_many(conn, [JobSpec("rl.slowed", {}) for _ in range(30)])
    conn.commit()
    book = LimitBook([_type("rl.slowed", rate_limit=100.0, rate_burst=20)])
    assert set_limit(conn, "type", "rl.slowed", actor="ops@example.com", role="operator",
                     reason="partner 429s", rate="1/m").ok
    conn.commit()
    book.refresh(conn)  # as a worker's duty thread re-reads the live limits
    assert len(_claim(clean_db, book)) == 1
    assert _claim(clean_db, book) == []
    # A live rate that names its burst gets that one.
    conn.execute("DELETE FROM job_rate_buckets")
    assert set_limit(conn, "type", "rl.slowed", actor="ops@example.com", role="operator",
                     reason="partner 429s", rate="1/m", burst=3).ok
    conn.commit()
    book.refresh(conn)
    assert len(_claim(clean_db, book)) == 3


def test_a_producer_claims_no_limited_work_but_through_the_limited_claim(conn, clean_db):
    # The producer's fast prepared claim takes every type it handles: while a limited
    # type's jobs wait for tokens it must not be used, or it takes them all at once.
    enqueue_many(conn, [JobSpec("rl.slow", {}) for _ in range(20)]
                 + [JobSpec("rl.free", {}) for _ in range(5)])
    conn.commit()
    types = [_type("rl.slow", rate_limit=SLOW, rate_burst=2), _type("rl.free")]
    book = LimitBook(types)
    p = Producer(conn=DedicatedConnection(clean_db), claims=_spec(types), buffer=JobBuffer(),
                 concurrency=8, running=lambda: 0, job_seconds=lambda: None, wake=Wakeup(),
                 stop=threading.Event(), limits=lambda: book.for_lane(lambda q: True))
    try:
        first = p._claim(8)
        second = p._claim(8)
    finally:
        p._conn.drop()
    assert sorted(j.type for j in first) == ["rl.free"] * 5 + ["rl.slow"] * 2
    assert second == []
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE type = 'rl.slow' "
                            "AND status = 'running'") == 2


#: The most executions whose started_at fall in any one-second window [s, s + 1 s) that
#: starts at one of them: a sliding second, as a provider counts requests.
MOST_IN_A_SECOND = """
    SELECT coalesce(max((SELECT count(*) FROM job_executions_all b
                         WHERE b.started_at >= a.started_at
                           AND b.started_at < a.started_at + interval '1 second')), 0)
    FROM job_executions_all a
"""


def test_with_the_default_burst_n_per_second_is_at_most_n_in_any_sliding_second(
        conn, clean_db):
    rate = 50
    enqueue_many(conn, [JobSpec("rl.window", {}) for _ in range(10 * rate)])
    conn.commit()
    book = LimitBook([_type("rl.window", rate_limit=float(rate))])  # the default burst
    # Two workers claiming in turn, as fast as they can, for a second and a half.
    with psycopg.connect(clean_db, autocommit=True) as one, \
            psycopg.connect(clean_db, autocommit=True) as two:
        turn = [one, two]
        limited = book.for_lane(lambda q: True)
        assert limited is not None

        def a_second_and_a_half_of_claims() -> bool:
            turn.reverse()
            claim_limited(turn[0], _spec(book.types), limited, rate)
            return bool(scalar(clean_db, "SELECT clock_timestamp() > min(started_at) "
                                         "+ interval '1.5 seconds' FROM job_executions_all"))

        wait_for(a_second_and_a_half_of_claims, timeout=30, interval=0.01,
                 message="a second and a half of claims")
    # No sliding second held more than the rate: no burst on top of it ...
    assert scalar(clean_db, MOST_IN_A_SECOND) == rate
    # ... and the rate itself went on: the second second's jobs were claimed.
    assert scalar(clean_db, "SELECT count(*) FROM job_executions_all") >= 2 * rate


def test_a_bucket_is_let_go_only_once_its_starts_left_the_window(conn, clean_db):
    # (bucket, rate, burst, seconds since its last claim): a window of 120 s (2 at one a
    # minute) and one of 1 s, each on both sides of what keeps it.
    rows = [("slow.young", SLOW, 2, 61), ("slow.old", SLOW, 2, 241),
            ("fast.young", 10.0, 10, 59), ("fast.old", 10.0, 10, 61)]
    for bucket, rate, burst, ago in rows:
        conn.execute(
            "INSERT INTO job_rate_buckets (bucket, tokens, rate, burst, updated_at, "
            "window_starts, window_counts) VALUES (%(b)s, %(burst)s - 1, %(rate)s, %(burst)s,"
            " now() - %(ago)s, ARRAY[now() - %(ago)s], ARRAY[1])",
            {"b": bucket, "rate": rate, "burst": burst, "ago": timedelta(seconds=ago)})
    conn.commit()
    LimitBook([]).refresh(conn)  # a worker's duty thread prunes the buckets
    conn.commit()
    # slow.young's start is still in its window: forgetting it would let a claim take
    # its whole burst again within the window.
    assert [r[0] for r in conn.execute("SELECT bucket FROM job_rate_buckets ORDER BY 1")] \
        == ["fast.young", "slow.young"]
