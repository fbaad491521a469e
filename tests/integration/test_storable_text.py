"""Text a handler hands back is stored even when PostgreSQL would refuse it as given:
NUL characters and lone surrogates in errors, codes, progress, checkpoints and ledger
results never cost a job its real outcome."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from jobwarden import PermanentError, job
from tests.helpers import executions, job_row, running_worker, wait_for

TERMINAL = ("completed", "failed", "skipped", "cancelled", "unknown")
#: Long enough that a job left in `running` could only end through recovery after the
#: test's deadline, so "settled" means its own outcome was written.
LONG_LEASE = 600


@pytest.fixture
def reg(default_registry):
    return default_registry


def settle(url, job_id):
    return wait_for(lambda: (r := job_row(url, job_id))["status"] in TERMINAL and r,
                    message=f"job {job_id} to settle")


def add(conn, type_):
    from jobwarden import enqueue

    job_id = enqueue(conn, type_, {})
    conn.commit()
    return job_id


def test_an_error_with_a_nul_inside_ends_failed_with_a_readable_error(reg, conn, clean_db):
    @job("nul_error", lease=LONG_LEASE, registry=reg)
    def nul_error(ctx, payload):
        raise PermanentError("X", "nul\x00inside")

    job_id = add(conn, "nul_error")
    with running_worker(reg, clean_db):
        row = settle(clean_db, job_id)
    assert (row["status"], row["last_error_code"]) == ("failed", "X")
    assert row["last_error"].startswith("nul") and row["last_error"].endswith("inside")
    assert "\x00" not in row["last_error"]


def test_codes_progress_checkpoints_and_ledger_results_with_bad_text_are_stored(
        reg, conn, clean_db):
    @job("bad_text", lease=LONG_LEASE, max_attempts=1, registry=reg)
    def bad_text(ctx, payload):
        ctx.progress(1, 2, note="half\x00way \ud800")
        ctx.save_checkpoint({"cursor\x00": "at \udfff"})
        ctx.heartbeat()
        eff = ctx.effect(ctx.idempotency_key("mail\x00"))
        eff.complete({"id": "msg\x00\ud83d"})
        raise PermanentError("CODE\x00\ud800", "lone \ud800 surrogate")

    job_id = add(conn, "bad_text")
    with running_worker(reg, clean_db):
        row = settle(clean_db, job_id)
    assert row["status"] == "failed", row
    assert "\x00" not in row["last_error_code"] and row["last_error_code"].startswith("CODE")
    assert row["last_error"].startswith("lone ") and row["last_error"].endswith(" surrogate")
    assert row["progress"]["processed"] == 1 and row["progress"]["note"].startswith("half")
    assert list(row["checkpoint"].values())[0].startswith("at ")
    (ex,) = executions(clean_db, job_id)
    assert ex["outcome"] == "failed"


def test_an_outcome_that_still_cannot_be_stored_is_recorded_as_unstorable(
        reg, conn, clean_db, monkeypatch):
    """If PostgreSQL refuses the outcome anyway, the job fails at once with a code that
    says so, instead of waiting a whole lease to be declared lost."""
    from jobwarden.worker.engine import runner

    @job("refused", lease=LONG_LEASE, registry=reg)
    def refused(ctx, payload):
        raise PermanentError("X", "nul\x00inside")

    # Without the normalisation the NUL reaches PostgreSQL, which refuses it.
    monkeypatch.setattr(runner, "storable_text", lambda text: text)
    job_id = add(conn, "refused")
    with running_worker(reg, clean_db):
        row = settle(clean_db, job_id)
    assert (row["status"], row["last_error_code"]) == ("failed", "OUTCOME_UNSTORABLE")
    assert "could not be stored" in row["last_error"]


def test_an_audit_reason_with_a_nul_and_a_lone_surrogate_is_stored(reg, conn, clean_db):
    from jobwarden.worker.ops import operations

    job_id = add(conn, "anything")
    result = operations.cancel_job(conn, job_id, actor="otto", role="operator",
                                   reason="typo\x00 here \ud800", request_id="r1")
    conn.commit()
    assert result.ok
    reason = conn.execute("SELECT reason FROM job_audit WHERE job_id = %s",
                          [job_id]).fetchone()[0]
    assert reason == "typo\\x00 here \ufffd"


def test_one_unstorable_outcome_does_not_cost_its_batch_the_others(reg, conn, clean_db,
                                                                   monkeypatch):
    """Outcomes are written in batches: a refused value is isolated to its own job, and
    the jobs written with it keep their real outcomes."""
    from jobwarden.worker.engine import runner

    @job("refused_one", lease=LONG_LEASE, max_attempts=1, registry=reg)
    def refused_one(ctx, payload):
        raise PermanentError("X" if payload["bad"] else "FINE",
                             "nul\x00inside" if payload["bad"] else "plain text")

    monkeypatch.setattr(runner, "storable_text", lambda text: text)
    from jobwarden import enqueue

    ids = [enqueue(conn, "refused_one", {"bad": i == 2}) for i in range(6)]
    conn.commit()
    with running_worker(reg, clean_db, concurrency=6):
        rows = [settle(clean_db, job_id) for job_id in ids]
    codes = [r["last_error_code"] for r in rows]
    assert codes == ["FINE", "FINE", "OUTCOME_UNSTORABLE", "FINE", "FINE", "FINE"]
    assert all(r["status"] == "failed" for r in rows)


def test_progress_or_a_checkpoint_json_cannot_hold_is_settled_at_the_call(
        reg, conn, clean_db, caplog):
    """NaN, infinity or a datetime: a progress report is dropped, said once, and the job
    goes on (progress is never worth failing a job for); a checkpoint is refused with
    ValueError in one line, in the handler, which may go on. What was saved stays as it
    was when saved, whatever the handler changes in it afterwards."""
    refusals: list[str] = []

    @job("json_refused", lease=LONG_LEASE, max_attempts=1, registry=reg)
    def json_refused(ctx, payload):
        ctx.progress(1, 4)
        ctx.progress(2, 4, rate=float("nan"))
        ctx.progress(3, 4, at=datetime.now(UTC))
        ctx.heartbeat()  # writes what is pending now
        for bad in (float("nan"), {"x": float("-inf")}, {"at": datetime.now(UTC)}):
            try:
                ctx.save_checkpoint(bad)
            except ValueError as exc:
                refusals.append(str(exc))
        cursor = {"page": 7}
        ctx.save_checkpoint(cursor)
        cursor["at"] = datetime.now(UTC)  # after the save: not in it, and no failure
        return {"ok": 1}

    job_id = add(conn, "json_refused")
    with caplog.at_level(logging.WARNING, logger="jobwarden.job"), \
            running_worker(reg, clean_db):
        row = settle(clean_db, job_id)
    assert (row["status"], row["progress"], row["checkpoint"]) == (
        "completed", {"processed": 1, "total": 4}, {"page": 7})
    assert len(refusals) == 3, refusals
    assert all(r.startswith("save_checkpoint: the value cannot be stored as JSON: ")
               and "\n" not in r for r in refusals), refusals
    assert "NaN" in refusals[0] and "datetime" in refusals[2]
    said = [r for r in caplog.records if getattr(r, "action", "") == "progress_refused"]
    assert [r.job_id for r in said] == [job_id]  # once, though refused twice


def test_a_ledger_result_json_cannot_hold_is_refused_before_anything_is_written(
        reg, conn, clean_db):
    """Sent as written by json.dumps, a NaN reached PostgreSQL, whose refusal (several
    lines, a psycopg error) failed the job; now a ValueError in one line, the effect
    still reserved, so the handler can record it as it should."""
    refusals: list[str] = []

    @job("ledger_nan", lease=LONG_LEASE, max_attempts=1, registry=reg)
    def ledger_nan(ctx, payload):
        eff = ctx.effect(ctx.idempotency_key("send"))
        try:
            eff.complete({"score": float("nan")})
        except ValueError as exc:
            refusals.append(str(exc))
        eff.complete({"score": None})

    job_id = add(conn, "ledger_nan")
    with running_worker(reg, clean_db):
        row = settle(clean_db, job_id)
    assert row["status"] == "completed", row
    assert len(refusals) == 1 and "cannot be stored as JSON" in refusals[0]
    assert "\n" not in refusals[0]
    stored = conn.execute("SELECT state, result FROM processed_effects").fetchall()
    assert stored == [("done", {"score": None})]
