"""The notifier (worker/duties/notifier.py): what it detects from the rollups, the
message of each group, and its throttle: one message per group, then at most one
summary per period, never a storm; each message recorded with its sending jobs in the
transaction that changes the group."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from jobwarden import Dep, JobSpec, enqueue, enqueue_many
from jobwarden.console.data.database import ConsoleDatabase
from jobwarden.console.data.queries import failed_groups
from jobwarden.worker.core.notices import NOTIFY_TYPE, SAMPLE_CHARS
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.duties import notifier
from jobwarden.worker.jobs.job_types import publish_job_types
from jobwarden.worker.jobs.registry import JobType
from tests.notify_support import age_groups, finish, messages, registry, settings

PERIOD = 900.0


def run(conn, **values):
    found = notifier.run_once(conn, settings=settings(notify_period=PERIOD, **values))
    conn.commit()
    return found


def one(conn, sql: str):
    value = conn.execute(sql).fetchone()[0]
    conn.commit()
    return value


def sending_jobs(conn) -> list[tuple[int, str]]:
    rows = conn.execute("SELECT (payload->>'notification')::bigint, payload->>'target' "
                        "FROM background_jobs WHERE type = %s ORDER BY id",
                        [NOTIFY_TYPE]).fetchall()
    conn.commit()
    return rows


def test_ten_thousand_failures_of_one_code_are_one_message_and_one_summary(conn):
    """The issue's test. 10,000 failures through the claim and the completer's write
    take ~3 s here: the number is the point."""
    finish(conn, "mail.send", 1, code="SMTP_DOWN")
    assert len(run(conn)) == 1
    for more in (4_999, 5_000):  # the storm goes on within the period: nothing is sent
        finish(conn, "mail.send", more, code="SMTP_DOWN", chunk=5_000)
        assert run(conn) == []
    age_groups(conn, PERIOD)  # the period is over: one summary of what followed
    assert len(run(conn)) == 1
    assert run(conn) == [] and run(conn) == []  # nothing new since: nothing more
    first, summary = messages(conn)
    assert (first["summary"], first["count"], first["new"]) == (False, 1, 1)
    assert (summary["summary"], summary["count"], summary["new"]) == (True, 10_000, 9_999)
    assert summary["title"] == "Still failing: SMTP_DOWN on mail.send"
    assert one(conn, "SELECT count(*) FROM background_jobs "
                                 "WHERE type = 'mail.send' AND status = 'failed'") == 10_000
    # each message is sent by a job of its own, to the one target
    assert sending_jobs(conn) == [(first["id"], "env:webhook"), (summary["id"], "env:webhook")]
    # an hour without a failure closes the group; its next failure is a new group
    age_groups(conn, 2 * 3600, rollup=True)
    assert run(conn) == []
    assert one(conn, "SELECT count(*) FROM job_notify_groups") == 0
    finish(conn, "mail.send", 1, code="SMTP_DOWN")
    assert len(run(conn)) == 1
    assert messages(conn)[-1]["title"] == "New failed group: SMTP_DOWN on mail.send"


def test_a_code_failing_on_and_off_within_the_hour_stays_one_group(conn):
    finish(conn, "mail.send", 1, code="FLAKY")
    assert len(run(conn)) == 1
    # quiet for 40 minutes (more than the period, less than the hour), then again
    age_groups(conn, 40 * 60, rollup=True)
    assert run(conn) == []
    finish(conn, "mail.send", 2, code="FLAKY")
    assert len(run(conn)) == 1
    assert [(m["title"], m["count"], m["new"]) for m in messages(conn)] == [
        ("New failed group: FLAKY on mail.send", 1, 1),
        ("Still failing: FLAKY on mail.send", 3, 2)]
    # quiet for over an hour: over; the next failure is a new group
    age_groups(conn, 61 * 60, rollup=True)
    assert run(conn) == []
    finish(conn, "mail.send", 1, code="FLAKY")
    assert len(run(conn)) == 1
    assert messages(conn)[-1]["title"] == "New failed group: FLAKY on mail.send"


def test_a_new_failed_group_says_where_how_many_what_and_since(conn, clean_db):
    # The code retried 40 minutes ago (the streak's start), before its first failure now;
    # the failure's error holds a secret and is 100 kB long.
    conn.execute("""INSERT INTO job_minute_counts (minute, queue, type, outcome, error_code, jobs)
                    VALUES (date_trunc('minute', now()) - interval '40 minutes', 'default',
                            'bill.charge', 'retried', 'DECLINED', 3)""")
    conn.commit()
    finish(conn, "bill.charge", 4, code="DECLINED",
           error="card declined: api_key=sk_live_abcdefgh12345678 " + "x" * 100_000)
    finish(conn, "bill.other", 2, code="DECLINED")  # another type: its own group
    run(conn, console_url="https://ops.example.com/jobs")
    by_type = {m["job_type"]: m for m in messages(conn)}
    m = by_type["bill.charge"]
    assert m["url"] == "https://ops.example.com/jobs/failed/group?code=DECLINED&type=bill.charge"
    assert (m["count"], m["error_code"], m["kind"]) == (4, "DECLINED", "failed_group")
    assert "sk_live_" not in m["sample"] and "[REDACTED]" in m["sample"]
    assert len(m["sample"]) <= SAMPLE_CHARS
    # started: the console's "first seen" of the group, the streak's start
    db = ConsoleDatabase(clean_db, pool_size=1)
    try:
        with db.reading() as reader:
            group = next(g for g in failed_groups(reader, job_type="bill.charge")
                         if g["error_code"] == "DECLINED")
    finally:
        db.dispose()
    assert datetime.fromisoformat(m["started_at"]) == group["first_seen"]
    assert timedelta(minutes=39) <= datetime.now(UTC) - group["first_seen"] <= timedelta(
        minutes=42)
    assert by_type["bill.other"]["count"] == 2


def test_a_retry_storm_needs_half_the_executions_and_twenty_retries(conn):
    # over half retried, 21 of them: a storm
    finish(conn, "api.call", 21, code="HTTP_503", status=S.PENDING)
    finish(conn, "api.call", 20, code="", status=S.COMPLETED)
    # half exactly (20 of 40): not one
    finish(conn, "api.half", 20, code="HTTP_503", status=S.PENDING)
    finish(conn, "api.half", 20, code="", status=S.COMPLETED)
    # all retried but 19 of them: not one
    finish(conn, "api.few", 19, code="HTTP_503", status=S.PENDING,
           error="upstream said 503, token=abc123secret")
    run(conn)
    found = messages(conn)
    assert [(m["kind"], m["job_type"], m["error_code"], m["count"]) for m in found] == [
        ("retry_storm", "api.call", "HTTP_503", 21)]
    assert found[0]["url"] == "/failed/group?code=HTTP_503&type=api.call"
    finish(conn, "api.few", 1, code="HTTP_503", status=S.PENDING,
           error="upstream said 503, token=abc123secret")
    run(conn)
    storm = messages(conn)[-1]
    assert (storm["job_type"], storm["count"]) == ("api.few", 20)
    assert "abc123secret" not in storm["sample"]


def test_an_sla_breach_is_a_type_whose_oldest_runnable_job_waited_past_its_target(conn):
    reg = registry("report.build", "mail.send", "quick.one")
    publish_job_types(conn, [JobType("report.build", lambda c, p: None, sla=60.0)], "test")
    past = datetime.now(UTC) - timedelta(seconds=300)
    enqueue_many(conn, [JobSpec("report.build", {}, run_at=past) for _ in range(3)]
                 + [JobSpec("mail.send", {}, run_at=past)]
                 + [JobSpec("quick.one", {}, run_at=datetime.now(UTC) - timedelta(seconds=5))],
                 registry=reg)
    conn.commit()
    # report.build: declared 60 s; mail.send: configured 10 m (not breached);
    # quick.one: the default 30 s (waited 5 s: not breached)
    run(conn, sla="mail.send=10m", sla_default=30)
    found = messages(conn)
    assert [(m["kind"], m["job_type"], m["count"]) for m in found] == [
        ("sla_breach", "report.build", 3)]
    assert found[0]["url"] == "/sla#sla-report.build"
    assert "target 60s" in found[0]["text"]
    started = datetime.fromisoformat(found[0]["started_at"])
    assert abs((started - (past + timedelta(seconds=60))).total_seconds()) < 5


def test_a_flow_held_by_a_failed_parent_is_told_with_its_flow(conn):
    reg = registry("import.row", "import.mail")
    parent = enqueue(conn, "import.row", {}, registry=reg)
    waiting = enqueue(conn, "import.mail", {}, after=[parent], registry=reg)
    # one held by a pending parent, one by a run_anyway edge: neither is held by a failure
    other = enqueue(conn, "import.row", {}, registry=reg, delay=3600)
    enqueue(conn, "import.mail", {}, after=[other], registry=reg)
    enqueue(conn, "import.mail", {}, after=[Dep(other, run_anyway=True)], registry=reg)
    conn.commit()
    conn.execute("UPDATE background_jobs SET status = 'failed', failed_at = now(), "
                 "last_error_code = 'ROW_INVALID', last_error = 'row 2, password: hunter22' "
                 "WHERE id = %s", [parent])
    conn.commit()
    run(conn)
    held = [m for m in messages(conn) if m["kind"] == "flow_held"]
    assert [(m["job_type"], m["count"], m["url"]) for m in held] == [
        ("import.mail", 1, f"/flows/{waiting}")]
    assert "ROW_INVALID on import.row" in held[0]["text"]
    assert "hunter22" not in held[0]["sample"]


def test_the_sending_jobs_own_failures_are_never_a_group(conn):
    finish(conn, NOTIFY_TYPE, 30, code="NOTIFY_UNREACHABLE")
    finish(conn, NOTIFY_TYPE, 30, code="NOTIFY_UNREACHABLE", status=S.PENDING)
    assert run(conn) == []
    assert one(conn, "SELECT count(*) FROM job_notify_groups") == 0


def test_without_a_target_nothing_is_read_or_kept(conn):
    finish(conn, "mail.send", 3, code="SMTP_DOWN")
    found = notifier.run_once(conn, settings=settings(notify_webhook_url=None))
    conn.commit()
    assert found == []
    assert one(conn, "SELECT count(*) FROM job_notify_groups") == 0


def test_a_thousand_new_codes_at_once_are_ten_messages_and_a_digest(conn):
    for n in range(25):
        finish(conn, "mail.send", 1, code=f"CODE_{n:02d}")
    ids = run(conn)
    found = messages(conn)
    assert len(ids) == notifier.BUDGET + 1 == len(found)
    digest = found[-1]
    assert (digest["kind"], digest["count"]) == ("digest", 15)
    assert digest["title"] == "15 more groups need attention"
    # every group is told (on its own or in the digest) and none again
    assert one(conn, "SELECT count(*) FROM job_notify_groups "
                                 "WHERE sent_figure = figure") == 25
    assert run(conn) == []


def test_one_pass_at_a_time(conn, clean_db):
    finish(conn, "mail.send", 1, code="SMTP_DOWN")
    with psycopg.connect(clean_db) as other:
        other.execute("SELECT pg_advisory_xact_lock(hashtext('jobwarden.notify'))")
        assert notifier.run_once(conn, settings=settings()) is None
    assert len(run(conn)) == 1


def test_a_message_and_its_group_are_written_together_or_not_at_all(conn, monkeypatch):
    finish(conn, "mail.send", 1, code="SMTP_DOWN")

    def broken(*args, **kwargs):
        raise RuntimeError("the enqueue failed")

    monkeypatch.setattr(notifier, "record", broken)
    with pytest.raises(RuntimeError):
        run(conn)
    conn.rollback()
    assert one(conn, "SELECT count(*) FROM job_notify_groups") == 0
    monkeypatch.undo()
    assert len(run(conn)) == 1  # the next pass tells it
