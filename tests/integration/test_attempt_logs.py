"""Each attempt's log lines: captured per attempt (threads, tasks, two at once), redacted,
capped, stored with the outcome in its transaction, and pruned with the execution
(worker/engine/attempt_log.py; docs/guide/logging.md; attack list in docs/security-runtime.md)."""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import threading
import uuid

import psycopg
import pytest
from psycopg.rows import dict_row

from jobwarden import enqueue, job
from jobwarden.worker.core.states import ExecutionOutcome, JobStatus
from jobwarden.worker.duties import partitions
from jobwarden.worker.engine import attempt_log
from jobwarden.worker.engine.attempt_log import ATTEMPT_LOG_BYTES, LINE_CHARS
from jobwarden.worker.engine.completer import Completion, write_batch
from tests.helpers import executions, job_row, running_worker, scalar, wait_for

app_log = logging.getLogger("tests.attempt_app")


@pytest.fixture
def reg(default_registry):
    return default_registry


@pytest.fixture(autouse=True)
def info_level():
    """The worker command logs at INFO; here the loggers the handlers use do too."""
    loggers = [logging.getLogger(n) for n in ("tests.attempt_app", "jobwarden.job")]
    saved = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.INFO)
    yield
    for lg, level in zip(loggers, saved, strict=True):
        lg.setLevel(level)


def log_rows(url: str, job_id: int) -> list[dict]:
    """The job's stored lines, one dict per execution that logged, by attempt."""
    with psycopg.connect(url, row_factory=dict_row) as conn:
        return conn.execute(
            "SELECT e.attempt, l.* FROM job_execution_logs l "
            "JOIN job_executions e USING (execution_id) WHERE l.job_id = %s "
            "ORDER BY e.attempt", [job_id]).fetchall()


def settled(url: str, *job_ids: int) -> bool:
    return all(job_row(url, j)["status"] in ("completed", "failed") for j in job_ids)


def test_two_thread_handlers_logging_interleaved_keep_their_own_lines(reg, conn, clean_db):
    turn = threading.Barrier(2, timeout=20)
    outside = logging.getLogger("tests.attempt_app.outside")

    @job("chatty", registry=reg)
    def chatty(ctx, payload):
        for i in range(20):
            turn.wait()  # both handlers are inside their attempts, line for line
            if i % 2:
                ctx.log.info("%s line %d", payload["tag"], i)
            else:
                app_log.warning("%s line %d", payload["tag"], i)
        # A thread started without the attempt's context is not the attempt's.
        t = threading.Thread(target=lambda: app_log.warning("%s stray", payload["tag"]))
        t.start()
        t.join()

    a = enqueue(conn, "chatty", {"tag": "A"})
    b = enqueue(conn, "chatty", {"tag": "B"})
    conn.commit()
    with running_worker(reg, clean_db, concurrency=2):
        outside.warning("not in any attempt")
        wait_for(lambda: settled(clean_db, a, b), message="both to complete")
    for job_id, tag in ((a, "A"), (b, "B")):
        (row,) = log_rows(clean_db, job_id)
        lines = row["lines"]
        assert [line[3] for line in lines] == [f"{tag} line {i}" for i in range(20)]
        assert [line[1] for line in lines] == ["WARNING", "INFO"] * 10
        assert {line[2] for line in lines} == {"tests.attempt_app", "jobwarden.job"}
        times = [line[0] for line in lines]
        assert times == sorted(times) and row["dropped"] == 0
        (ex,) = executions(clean_db, job_id)
        assert row["execution_id"] == ex["execution_id"]
        assert row["finished_at"] == ex["finished_at"]  # written in the outcome's transaction
    assert scalar(clean_db, "SELECT count(*) FROM job_execution_logs") == 2


def test_two_coroutine_handlers_on_one_loop_keep_their_own_lines(reg, conn, clean_db):
    @job("achatty", registry=reg)
    async def achatty(ctx, payload):
        for i in range(10):
            await asyncio.sleep(0.01)  # the other task runs in between
            ctx.log.info("%s line %d", payload["tag"], i)
        # A task it starts and a thread via asyncio.to_thread copy its context: its lines.
        await asyncio.gather(asyncio.sleep(0), _alog(f"{payload['tag']} from a subtask"))
        await asyncio.to_thread(app_log.warning, "%s from to_thread", payload["tag"])

    a = enqueue(conn, "achatty", {"tag": "A"})
    b = enqueue(conn, "achatty", {"tag": "B"})
    conn.commit()
    with running_worker(reg, clean_db, concurrency=2):
        wait_for(lambda: settled(clean_db, a, b), message="both to complete")
    for job_id, tag in ((a, "A"), (b, "B")):
        (row,) = log_rows(clean_db, job_id)
        assert [line[3] for line in row["lines"]] == (
            [f"{tag} line {i}" for i in range(10)]
            + [f"{tag} from a subtask", f"{tag} from to_thread"])


async def _alog(message: str) -> None:
    app_log.warning(message)


def test_a_handler_that_logs_nothing_has_no_row(reg, conn, clean_db):
    @job("quiet", registry=reg)
    def quiet(ctx, payload):
        return None

    job_id = enqueue(conn, "quiet", {})
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: settled(clean_db, job_id), message="the job to complete")
    assert log_rows(clean_db, job_id) == []


def test_each_attempt_keeps_its_own_lines_and_a_secret_is_redacted_before_storage(
        reg, conn, clean_db):
    @job("flaky_logger", registry=reg, max_attempts=2, backoff=0.05)
    def flaky_logger(ctx, payload):
        ctx.log.warning("attempt %d: calling https://bob:hunter2secret@api.example.com",
                        ctx.attempt)
        app_log.warning("Authorization: Bearer q1w2e3r4t5y6 password=swordfish42")
        if ctx.attempt == 1:
            try:
                raise ValueError("token=tok_abcdef123456 refused")
            except ValueError:
                app_log.exception("upstream failed")
            raise RuntimeError("try again")

    job_id = enqueue(conn, "flaky_logger", {})
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: settled(clean_db, job_id), message="the job to settle")
    first, second = log_rows(clean_db, job_id)
    assert (first["attempt"], second["attempt"]) == (1, 2)
    assert first["lines"][0][3].startswith("attempt 1:")
    assert second["lines"][0][3].startswith("attempt 2:")
    assert first["lines"][2][1] == "ERROR" and "Traceback" in first["lines"][2][3]
    stored = scalar(clean_db, "SELECT string_agg(lines::text, ' ') FROM job_execution_logs")
    for secret in ("hunter2secret", "q1w2e3r4t5y6", "swordfish42", "tok_abcdef123456"):
        assert secret not in stored
    assert "[REDACTED]" in stored


@pytest.fixture
def flood_log():
    """A logger whose lines reach the attempt's handler alone: a million lines through
    pytest's own capture (formatted and kept) would take a minute and a gigabyte."""
    logger = logging.getLogger("tests.attempt_flood")
    logger.propagate = False
    handler = attempt_log.install(logger)
    yield logger
    logger.removeHandler(handler)
    logger.propagate = True


def test_a_10mb_line_a_million_lines_and_nul_characters_are_bounded(reg, conn, clean_db,
                                                                     flood_log):
    @job("flood", registry=reg, timeout=300)
    def flood(ctx, payload):
        flood_log.warning("nul\x00byte \udcff lone bytes %r", b"\x00\xff\xfe")
        flood_log.warning("x" * 10_000_000)
        for i in range(1_000_000):
            flood_log.warning("line %d", i)

    job_id = enqueue(conn, "flood", {})
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: settled(clean_db, job_id), timeout=120, message="the flood to end")
    assert job_row(clean_db, job_id)["status"] == "completed"
    (row,) = log_rows(clean_db, job_id)
    lines = row["lines"]
    assert lines[0][3] == "nul\\x00byte \ufffd lone bytes b'\\x00\\xff\\xfe'"
    assert lines[1][3] == "x" * LINE_CHARS + f"… [{10_000_000 - LINE_CHARS} chars cut]"
    assert len(lines) + row["dropped"] == 2 + 1_000_000
    assert row["dropped"] > 990_000
    kept = scalar(clean_db, "SELECT octet_length(lines::text) FROM job_execution_logs")
    assert kept <= ATTEMPT_LOG_BYTES  # the cap holds for the stored text itself
    assert [line[3] for line in lines[2:5]] == ["line 0", "line 1", "line 2"]


def test_a_line_logged_after_the_attempt_ended_is_not_kept(reg, conn, clean_db):
    ended = threading.Event()
    logged_late = threading.Event()

    @job("leaves_a_thread", registry=reg)
    def leaves_a_thread(ctx, payload):
        app_log.warning("before the end")

        def later():
            app_log.warning("during, from a copied context")
            ended.wait(20)
            app_log.warning("after the end")
            logged_late.set()

        context = contextvars.copy_context()  # the attempt is current in its copy
        threading.Thread(target=context.run, args=(later,)).start()

    job_id = enqueue(conn, "leaves_a_thread", {})
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: settled(clean_db, job_id), message="the job to complete")
        ended.set()
        assert logged_late.wait(20)
    (row,) = log_rows(clean_db, job_id)
    texts = [line[3] for line in row["lines"]]
    assert "before the end" in texts and "after the end" not in texts
    assert row["dropped"] == 0


def test_a_handler_completing_in_its_transaction_keeps_its_lines(reg, conn, clean_db):
    @job("transactional", registry=reg)
    def transactional(ctx, payload):
        with ctx.transaction() as tx:
            tx.execute("SELECT 1")
        app_log.warning("wrote in my transaction")

    job_id = enqueue(conn, "transactional", {})
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: settled(clean_db, job_id), message="the job to complete")
    (row,) = log_rows(clean_db, job_id)
    assert [line[3] for line in row["lines"]] == ["wrote in my transaction"]


def _running_job(conn: psycopg.Connection) -> tuple[int, uuid.UUID]:
    """A job claimed by hand: running under a fresh execution id."""
    job_id = enqueue(conn, "anything", {})
    execution_id = uuid.uuid4()
    conn.execute("UPDATE background_jobs SET status = 'running', execution_id = %s, "
                 "attempts = 1, worker_id = 'by-hand', started_at = now(), "
                 "heartbeat_at = now(), "
                 "lease_expires_at = now() + interval '1 minute' WHERE id = %s",
                 [execution_id, job_id])
    conn.commit()
    return job_id, execution_id


def _completion(job_id: int, execution_id: uuid.UUID, lines: str | None) -> Completion:
    return Completion(job_id=job_id, execution_id=execution_id, type="anything", attempt=1,
                      lease=60.0, status=JobStatus.COMPLETED,
                      outcome=ExecutionOutcome.COMPLETED,
                      log_lines=lines, log_dropped=0 if lines is None else 3)


def test_the_lines_and_the_outcome_commit_together_or_not_at_all(conn, clean_db):
    job_id, execution_id = _running_job(conn)
    other_id, other_execution = _running_job(conn)
    # The lines' insert fails: the outcome written before it in the batch is undone too.
    conn.execute("""
        CREATE FUNCTION refuse_logs() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'no room' USING ERRCODE = 'disk_full'; END $$;
        CREATE TRIGGER refuse_logs BEFORE INSERT ON job_execution_logs
        FOR EACH ROW EXECUTE FUNCTION refuse_logs();""")
    conn.commit()
    line = json.dumps([[1.0, "INFO", "app", "hello"]])
    try:
        with psycopg.connect(clean_db, autocommit=True) as writer:
            with pytest.raises(psycopg.errors.DiskFull):
                write_batch(writer, [_completion(job_id, execution_id, line),
                                     _completion(other_id, other_execution, None)])
    finally:
        conn.execute("DROP TRIGGER refuse_logs ON job_execution_logs; "
                     "DROP FUNCTION refuse_logs()")
        conn.commit()
    assert job_row(clean_db, job_id)["status"] == "running"
    assert job_row(clean_db, other_id)["status"] == "running"
    assert [e for e in executions(clean_db, job_id) if e["finished_at"]] == []
    with psycopg.connect(clean_db, autocommit=True) as writer:
        owned = write_batch(writer, [_completion(job_id, execution_id, line),
                                     _completion(other_id, other_execution, None)])
    assert set(owned) == {execution_id, other_execution}
    (row,) = log_rows(clean_db, job_id)
    assert row["lines"] == [[1.0, "INFO", "app", "hello"]] and row["dropped"] == 3
    assert log_rows(clean_db, other_id) == []


def test_a_refused_outcome_stores_no_lines(conn, clean_db):
    job_id, execution_id = _running_job(conn)
    line = json.dumps([[1.0, "INFO", "app", "from a zombie"]])
    with psycopg.connect(clean_db, autocommit=True) as writer:
        owned = write_batch(writer, [_completion(job_id, uuid.uuid4(), line)])
    assert owned == {}
    assert scalar(clean_db, "SELECT count(*) FROM job_execution_logs") == 0


def test_retention_deletes_the_lines_of_executions_that_are_gone(reg, conn, clean_db):
    @job("kept", registry=reg)
    def kept(ctx, payload):
        app_log.warning("still here")

    job_id = enqueue(conn, "kept", {})
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: settled(clean_db, job_id), message="the job to complete")
    # Lines whose execution's week was dropped: an orphan row, old enough.
    conn.execute("INSERT INTO job_execution_logs (execution_id, job_id, finished_at, lines) "
                 "VALUES (%s, 999, now() - interval '100 days', '[]')", [uuid.uuid4()])
    conn.commit()
    with psycopg.connect(clean_db, autocommit=True) as pruner:
        partitions.drop_expired(pruner, older_than=0.0)
    assert scalar(clean_db, "SELECT array_agg(job_id) FROM job_execution_logs") == [job_id]
    # Its execution gone (as its week's drop takes it), its lines go at the next pass.
    conn.execute("DELETE FROM job_executions WHERE job_id = %s", [job_id])
    conn.commit()
    with psycopg.connect(clean_db, autocommit=True) as pruner:
        partitions.drop_expired(pruner, older_than=0.0)
    assert scalar(clean_db, "SELECT count(*) FROM job_execution_logs") == 0


def test_the_job_page_shows_each_attempts_lines_escaped_and_redacted_to_a_viewer(
        reg, conn, clean_db, viewer):
    @job("page_logger", registry=reg, max_attempts=2, backoff=0.05)
    def page_logger(ctx, payload):
        ctx.log.warning("attempt %d <script>alert(1)</script> password=swordfish42",
                        ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("again")

    job_id = enqueue(conn, "page_logger", {})
    conn.commit()
    with running_worker(reg, clean_db):
        wait_for(lambda: settled(clean_db, job_id), message="the job to settle")
    first, second = log_rows(clean_db, job_id)
    # A row as a writer that did not redact would leave it (display redacts again), with
    # lines dropped past the cap.
    conn.execute("UPDATE job_execution_logs SET dropped = 7, lines = lines || "
                 "'[[1765000000.5, \"ERROR\", \"raw\", \"Bearer abcdef0123456789xyz\"]]' "
                 "WHERE execution_id = %s", [second["execution_id"]])
    conn.commit()
    html = viewer.get(f"/jobs/{job_id}").get_data(as_text=True)
    assert 'data-testid="log-1"' in html and 'data-testid="log-2"' in html
    assert "<details class=\"attempt-log\"" in html
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "swordfish42" not in html and "abcdef0123456789xyz" not in html
    assert 'data-testid="log-kept-1">1<' in html and 'data-testid="log-kept-2">2<' in html
    assert 'data-testid="log-dropped-2">7<' in html and "log-dropped-1" not in html
    assert '<time datetime="2025-12-06T05:46:40.500000+00:00">05:46:40.500</time>' in html
    assert 'class="level-warning"' in html and 'class="level-error"' in html
