"""Uniqueness windows and debounce (docs/guide/uniqueness.md): what an enqueue folds into
the job holding its key, on real connections racing each other and the claim."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest

from jobwarden import Enqueued, EnqueueError, JobSpec, Registry, enqueue, enqueue_many, job
from jobwarden.worker.engine.producer import claim
from tests.helpers import job_row, scalar, wait_for


def _jobs_of(url: str, key: str) -> list[dict]:
    with psycopg.connect(url) as c:
        c.row_factory = psycopg.rows.dict_row
        return c.execute("SELECT id, status, payload FROM background_jobs "
                         "WHERE unique_key = %s ORDER BY id", [key]).fetchall()


def _folds(url: str, job_id: int) -> int:
    return scalar(url, "SELECT count(*) FROM job_folds WHERE job_id = %s", [job_id])


def _race(url: str, n: int, enqueue_one) -> list[int]:
    """`n` enqueuers on connections of their own, started together by a barrier, each
    committing its enqueue; their answers in thread order."""
    barrier = threading.Barrier(n)

    def one(i: int) -> int:
        with psycopg.connect(url) as c:
            barrier.wait()
            job_id = enqueue_one(c, i)
            c.commit()
            return job_id

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(one, range(n)))


MODES = [pytest.param({}, id="key-only"),
         pytest.param({"unique_for": "10m"}, id="window"),
         pytest.param({"replace": True}, id="replace"),
         pytest.param({"unique_for": "10m", "replace": True}, id="window-and-replace")]


@pytest.mark.parametrize("mode", MODES)
def test_eight_concurrent_enqueuers_of_one_key_create_exactly_one_job(clean_db, mode):
    answers = _race(clean_db, 8, lambda c, i: enqueue(c, "t", {"edit": i},
                                                       unique_key="doc:1", **mode))
    jobs = _jobs_of(clean_db, "doc:1")
    assert len(jobs) == 1
    assert set(answers) == {jobs[0]["id"]}
    assert sum(not a.folded for a in answers) == 1
    assert _folds(clean_db, jobs[0]["id"]) == 7
    if mode.get("replace"):
        # The last committed enqueue's payload: one of the eight, the one whose fold came last.
        assert jobs[0]["payload"]["edit"] in range(8)


@pytest.mark.parametrize("mode", [pytest.param({"unique_for": "10m"}, id="window"),
                                  pytest.param({}, id="key-only")])
def test_eight_concurrent_enqueuers_after_the_holder_finished(clean_db, conn, mode):
    """Inside its window a finished job still holds its key; without one, one new job."""
    first = enqueue(conn, "t", {}, unique_key="report:7", **mode)
    conn.execute("UPDATE background_jobs SET status = 'completed', completed_at = now() "
                 "WHERE id = %s", [first])
    conn.commit()
    answers = _race(clean_db, 8, lambda c, i: enqueue(c, "t", {}, unique_key="report:7",
                                                       **mode))
    jobs = _jobs_of(clean_db, "report:7")
    if mode:
        assert [j["id"] for j in jobs] == [first] and set(answers) == {first}
        assert all(a.folded for a in answers)
    else:
        assert len(jobs) == 2 and set(answers) == {jobs[1]["id"]}


def test_the_window_ends_and_the_next_enqueue_creates_a_job(clean_db, conn):
    first = enqueue(conn, "t", {}, unique_key="k", unique_for="1h")
    conn.execute("UPDATE background_jobs SET status = 'completed' WHERE id = %s", [first])
    assert enqueue(conn, "t", {}, unique_key="k", unique_for="1h") == first
    # The window, as the database's clock sees it, is over.
    conn.execute("UPDATE job_unique_keys SET held_until = now() - interval '1 s'")
    second = enqueue(conn, "t", {}, unique_key="k", unique_for="1h")
    conn.commit()
    assert second != first and not second.folded


def test_fifty_edits_run_one_job_with_the_last_payload(clean_db, conn):
    for edit in range(50):
        job_id = enqueue(conn, "t", {"text": f"v{edit}"}, unique_key="doc:9", replace=True,
                         delay=60)
        conn.commit()
    assert [j["payload"] for j in _jobs_of(clean_db, "doc:9")] == [{"text": "v49"}]
    assert _folds(clean_db, job_id) == 49
    assert scalar(clean_db, "SELECT count(*) FROM job_folds WHERE replaced") == 49


def test_bulk_enqueue_folds_like_enqueues_one_after_another(clean_db, conn):
    ids = enqueue_many(conn, [JobSpec("t", {"n": n}, unique_key="bulk", replace=True)
                              for n in range(5)] + [JobSpec("t", {"plain": True})])
    later = enqueue_many(conn, [JobSpec("t", {"n": 9}, unique_key="bulk", replace=True),
                                JobSpec("t", {"n": 1}, unique_key="w", unique_for="5m"),
                                JobSpec("t", {"n": 2}, unique_key="w", unique_for="5m")])
    conn.commit()
    (held,) = _jobs_of(clean_db, "bulk")
    assert ids[:5] == [held["id"]] * 5 and held["payload"] == {"n": 9}
    assert [i.folded for i in ids[:5]] == [True] * 4 + [False]
    assert later[0] == held["id"] and later[0].replaced
    assert later[1] == later[2] and not later[1].folded and later[2].folded
    assert job_row(clean_db, later[1])["payload"] == {"n": 1}
    assert job_row(clean_db, ids[5])["payload"] == {"plain": True}
    assert _folds(clean_db, held["id"]) == 5


def _claim_one(c: psycopg.Connection) -> list:
    return claim(c, types=["t"], leases=[60.0], queues=None, limit=1, worker_id="w1")


def _waits_for_a_lock(url: str) -> bool:
    return scalar(url, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                       "AND datname = current_database()") > 0


def test_a_replace_that_meets_the_claim_never_changes_the_running_job(clean_db, conn):
    """The claim locks the job first: the replace waits, sees it running, makes a new job."""
    first = enqueue(conn, "t", {"v": 1}, unique_key="d", replace=True)
    conn.commit()
    with psycopg.connect(clean_db) as claimer:
        (claimed,) = _claim_one(claimer)  # uncommitted: the row stays locked
        with ThreadPoolExecutor(1) as pool:
            late = pool.submit(lambda: _enqueue_committed(clean_db, {"v": 2}))
            wait_for(lambda: _waits_for_a_lock(clean_db))
            claimer.commit()
            second = late.result(timeout=30)
    assert claimed.id == first and claimed.payload == {"v": 1}
    assert job_row(clean_db, first)["payload"] == {"v": 1}
    assert second != first and not second.folded
    assert [(j["status"], j["payload"]) for j in _jobs_of(clean_db, "d")] == [
        ("running", {"v": 1}), ("pending", {"v": 2})]


def test_a_replace_that_lands_first_is_what_the_claim_runs(clean_db, conn):
    first = enqueue(conn, "t", {"v": 1}, unique_key="d", replace=True)
    conn.commit()
    again = enqueue(conn, "t", {"v": 2}, unique_key="d", replace=True)  # uncommitted
    with psycopg.connect(clean_db) as claimer:
        assert _claim_one(claimer) == []  # SKIP LOCKED: the replace holds the row
        claimer.commit()
        conn.commit()
        (claimed,) = _claim_one(claimer)
        claimer.commit()
    assert again == first and again.replaced
    assert claimed.id == first and claimed.payload == {"v": 2}


def test_a_replace_of_a_finished_or_cancelled_job_creates_a_new_one(clean_db, conn):
    first = enqueue(conn, "t", {"v": 1}, unique_key="d", replace=True)
    conn.execute("UPDATE background_jobs SET status = 'cancelled', cancelled_at = now() "
                 "WHERE id = %s", [first])
    second = enqueue(conn, "t", {"v": 2}, unique_key="d", replace=True)
    conn.commit()
    assert second != first and not second.folded
    assert job_row(clean_db, first)["payload"] == {"v": 1}


def _enqueue_committed(url: str, payload: dict) -> Enqueued:
    with psycopg.connect(url) as c:
        job_id = enqueue(c, "t", payload, unique_key="d", replace=True)
        c.commit()
        return job_id


def test_a_rolled_back_enqueue_leaves_the_key_as_it_was(clean_db, conn):
    enqueue(conn, "t", {}, unique_key="k", unique_for="1h")
    conn.rollback()
    assert scalar(clean_db, "SELECT count(*) FROM job_unique_keys") == 0
    job_id = enqueue(conn, "t", {}, unique_key="k", unique_for="1h")
    conn.commit()
    assert not job_id.folded


def test_a_type_declared_window_keys_by_payload(clean_db, conn):
    reg = Registry()
    job("digest", unique_for="10m", registry=reg)(lambda ctx, p: None)
    a = enqueue(conn, "digest", {"user": 1, "day": "mon"}, registry=reg)
    b = enqueue(conn, "digest", {"day": "mon", "user": 1}, registry=reg)  # same, reordered
    c = enqueue(conn, "digest", {"user": 2, "day": "mon"}, registry=reg)
    # An idempotency key names one operation: the plain path, whatever the type declares.
    d = enqueue(conn, "digest", {"user": 1, "day": "mon"}, idempotency_key="op", registry=reg)
    conn.commit()
    assert b == a and b.folded and c != a and d not in (a, c)


def test_the_idempotency_keys_duplicate_says_it_was_folded(clean_db, conn):
    a = enqueue(conn, "t", {}, idempotency_key="op:1")
    b = enqueue(conn, "t", {}, idempotency_key="op:1")
    assert b == a and b.folded and not a.folded


@pytest.mark.parametrize(("options", "message"), [
    ({"unique_key": "k" * 10_000}, "at most 500 characters"),
    ({"unique_key": "k", "unique_for": "0s"}, "must be more than 0"),
    ({"unique_key": "k", "unique_for": "-1m"}, "negative"),
    ({"unique_key": "k", "unique_for": "100y"}, "not a duration"),
    ({"unique_key": "k", "unique_for": 10 * 366 * 86400 + 1}, "longer than"),
    ({"replace": True}, "replace needs a unique_key"),
    ({"replace": "yes", "unique_key": "k"}, "replace must be True or False"),
    ({"unique_key": "k", "idempotency_key": "k"}, "give one, not both"),
    ({"unique_key": "k", "after": [1]}, "cannot be folded"),
])
def test_bad_uniqueness_is_one_line_and_writes_nothing(clean_db, conn, options, message):
    with pytest.raises(EnqueueError, match=message) as raised:
        enqueue(conn, "t", {}, **options)
    assert "\n" not in str(raised.value)
    conn.commit()  # the caller's transaction is still usable
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0
    assert scalar(clean_db, "SELECT count(*) FROM job_unique_keys") == 0


def test_a_type_that_debounces_needs_a_key(clean_db, conn):
    reg = Registry()
    job("reindex", replace=True, registry=reg)(lambda ctx, p: None)
    with pytest.raises(EnqueueError, match="give the job a unique_key"):
        enqueue(conn, "reindex", {}, registry=reg)
    with pytest.raises(ValueError, match="unique_for="):
        job("bad", unique_for="0s", registry=reg)(lambda ctx, p: None)


def test_retention_takes_the_key_with_its_job(clean_db, conn):
    job_id = enqueue(conn, "t", {}, unique_key="k", unique_for="1h")
    enqueue(conn, "t", {}, unique_key="k", unique_for="1h")
    conn.execute("DELETE FROM background_jobs WHERE id = %s", [job_id])
    conn.commit()
    assert scalar(clean_db, "SELECT count(*) FROM job_unique_keys") == 0
    assert scalar(clean_db, "SELECT count(*) FROM job_folds") == 0


def test_a_process_without_the_handler_applies_the_published_declaration(clean_db, conn):
    """A web process that never imported the handler (§5 of docs/architecture.md): the
    window, the debounce and the deadline come from the policy its workers published."""
    from jobwarden.worker.jobs.job_types import publish_job_types

    declared = Registry()
    job("digest", unique_for="10m", expires_after="1h", registry=declared)(lambda c, p: None)
    job("reindex", replace=True, registry=declared)(lambda c, p: None)
    publish_job_types(conn, list(declared), "w1")
    conn.commit()
    elsewhere = Registry()  # knows neither type
    a = enqueue(conn, "digest", {"user": 1}, registry=elsewhere)
    b = enqueue(conn, "digest", {"user": 1}, registry=elsewhere)
    c = enqueue(conn, "reindex", {"v": 1}, unique_key="doc", registry=elsewhere)
    d = enqueue(conn, "reindex", {"v": 2}, unique_key="doc", registry=elsewhere)
    conn.commit()
    assert b == a and b.folded and d == c and d.replaced
    row = job_row(clean_db, a)
    assert (row["expires_at"] - row["available_at"]).total_seconds() == 3600


def test_a_refused_payload_writes_no_key(clean_db, conn):
    """Checked before the key's row is written: a payload over the limit, or one that does
    not fit the type's model, leaves no key locked or committed."""
    with pytest.raises(EnqueueError, match="over the"):
        enqueue(conn, "t", {"blob": "x" * 2_000_000}, unique_key="k", replace=True)
    conn.commit()
    assert scalar(clean_db, "SELECT count(*) FROM job_unique_keys") == 0


def test_async_enqueues_fold_alike(clean_db):
    from jobwarden import enqueue_async
    from tests.helpers import run_async

    async def scenario():
        async with await psycopg.AsyncConnection.connect(clean_db) as c:
            a = await enqueue_async(c, "t", {"v": 1}, unique_key="d", replace=True)
            b = await enqueue_async(c, "t", {"v": 2}, unique_key="d", replace=True)
            await c.commit()
            return a, b

    a, b = run_async(scenario())
    assert b == a and b.replaced and job_row(clean_db, a)["payload"] == {"v": 2}
