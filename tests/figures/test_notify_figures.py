"""Every figure of the notifications page equals an independent count over the base
tables: per target, messages sent, the latest sent, waiting, given up, failed attempts
and the latest failure, counted here from the sending jobs (`background_jobs` by their
payload's target) and their executions, never from the deliveries the page reads; and
each latest message's delivery state from its job."""

from __future__ import annotations

from datetime import datetime

import psycopg
import pytest

from jobwarden.worker.core.notices import NOTIFY_TYPE, TEST, Notice
from jobwarden.worker.core.settings import NotifySettings
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.core.targets import Target
from jobwarden.worker.engine.completer import Completion, hand_back, write_batch
from jobwarden.worker.engine.producer import claim
from jobwarden.worker.jobs.notifications import all_targets, record
from jobwarden.worker.ops.notify_targets import add_target
from tests.console_support import login
from tests.figures.html_tree import parse
from tests.helpers import scalar

ENV_HOOK = "https://hooks.example.com/services/T/B/figures0123456789"


def _attempt(conn, outcomes: dict[int, tuple[S, O]]) -> None:
    """One attempt of each job in `outcomes` (its status and outcome), as a worker's:
    every sending job is claimed, the others handed back (no attempt spent)."""
    jobs = claim(conn, types=[NOTIFY_TYPE], leases=[30.0], queues=None, limit=1000,
                 worker_id="figures:1:a")
    conn.commit()
    done = [j for j in jobs if j.id in outcomes]
    assert {j.id for j in done} == set(outcomes)
    write_batch(conn, [Completion(
        job_id=j.id, execution_id=j.execution_id, type=j.type, attempt=j.attempt, lease=30.0,
        status=outcomes[j.id][0], outcome=outcomes[j.id][1],
        error_code=None if outcomes[j.id][1] is O.COMPLETED else "NOTIFY_UNREACHABLE",
        error=None if outcomes[j.id][1] is O.COMPLETED else f"attempt {j.attempt} refused",
        queue=j.queue) for j in done])
    hand_back(conn, [(j, None, None) for j in jobs if j.id not in outcomes])
    # what the handler's transaction writes with a completion: the delivery was made
    conn.execute("UPDATE job_notify_deliveries d SET sent_at = j.completed_at "
                 "FROM background_jobs j WHERE j.id = d.job_id AND j.status = 'completed' "
                 "AND d.sent_at IS NULL")
    conn.commit()


@pytest.fixture
def seeded(clean_db, monkeypatch):
    monkeypatch.setenv("JOBWARDEN_NOTIFY_WEBHOOK_URL", ENV_HOOK)
    settings = NotifySettings.current()
    with psycopg.connect(clean_db) as conn:
        add_target(conn, Target("", "ops mail", "email", True, smtp_host="smtp.example.com",
                                email_from="jobs@example.com", email_to=("ops@example.com",)),
                   actor="ada", role="admin", reason="figures", settings=settings)
        targets = all_targets(conn, settings)
        for _ in range(6):
            record(conn, Notice(TEST), targets, settings)
        conn.commit()
        jobs = {(n, t): j for n, t, j in conn.execute(
            "SELECT notification_id, target, job_id FROM job_notify_deliveries")}
        mail = targets[1].key
        hook = "env:webhook"
        ok, retry, fail = (S.COMPLETED, O.COMPLETED), (S.PENDING, O.RETRY), (S.FAILED, O.FAILED)
        # webhook: 1 and 2 sent at once; 3 sent on its second attempt; 4 failed twice
        # and waits; 5 given up after three; 6 never tried. Mail: 1 sent, 2 failed once.
        _attempt(conn, {jobs[1, hook]: ok, jobs[2, hook]: ok, jobs[3, hook]: retry,
                        jobs[4, hook]: retry, jobs[5, hook]: retry, jobs[1, mail]: ok,
                        jobs[2, mail]: retry})
        _attempt(conn, {jobs[3, hook]: ok, jobs[4, hook]: retry, jobs[5, hook]: retry})
        _attempt(conn, {jobs[5, hook]: fail})
    return targets


def _independent(url: str, key: str) -> dict[str, object]:
    jobs = ("FROM background_jobs j WHERE j.type = 'jobwarden.notify' "
            "AND j.payload->>'target' = %(key)s")
    failures = ("FROM job_executions e JOIN background_jobs j ON j.id = e.job_id "
                "WHERE j.type = 'jobwarden.notify' AND j.payload->>'target' = %(key)s "
                "AND e.outcome IN ('retry', 'failed', 'timeout')")
    p = {"key": key}
    return {
        "sent": scalar(url, f"SELECT count(*) {jobs} AND j.status = 'completed'", p),
        "last_sent": scalar(url, f"SELECT max(j.completed_at) {jobs}", p),
        "waiting": scalar(url, f"SELECT count(*) {jobs} AND j.status IN ('pending', 'running')",
                          p),
        "given_up": scalar(url, f"SELECT count(*) {jobs} AND j.status = 'failed'", p),
        "failures": scalar(url, f"SELECT count(*) {failures}", p),
        "last_failure": scalar(url, f"SELECT max(e.finished_at) {failures}", p),
    }


def _instant(element) -> datetime | None:
    moment = element.time()
    return None if moment is None else datetime.fromisoformat(moment)


def test_the_targets_figures_count_the_sending_jobs(client, clean_db, seeded):
    assert login(client, "ada").status_code == 303
    tree = parse(client.get("/notifications").get_data(as_text=True))
    rows = {r["data-target"]: r for r in tree.having("data-target")}
    assert set(rows) == {t.key for t in seeded}
    shown = {}
    for key, row in rows.items():
        expected = _independent(clean_db, key)
        shown[key] = {"sent": int(row.one("target-sent").text()),
                      "waiting": int(row.one("target-waiting").text()),
                      "given_up": int(row.one("target-given-up").text()),
                      "failures": int(row.one("target-failures").text())}
        assert shown[key] == {k: expected[k] for k in shown[key]}, key
        assert _instant(row.one("target-last-sent")) == expected["last_sent"]
        assert _instant(row.one("target-last-failure")) == expected["last_failure"]
    # the figures are not all alike (a page that showed one number everywhere would fail)
    assert shown["env:webhook"] == {"sent": 3, "waiting": 2, "given_up": 1, "failures": 6}
    assert shown[seeded[1].key] == {"sent": 1, "waiting": 5, "given_up": 0, "failures": 1}
    assert "refused" in rows["env:webhook"].one("target-last-failure").text()


def test_each_latest_messages_delivery_state_is_its_jobs(client, clean_db, seeded):
    assert login(client, "ada").status_code == 303
    tree = parse(client.get("/notifications").get_data(as_text=True))
    messages = tree.having("data-notification")
    assert len(messages) == scalar(clean_db, "SELECT count(*) FROM job_notifications") == 6
    state = {"completed": "sent", "pending": "waiting", "running": "waiting",
             "failed": "given up"}
    with psycopg.connect(clean_db) as conn:
        expected = {(str(n), t): state[s] for n, t, s in conn.execute(
            "SELECT payload->>'notification', payload->>'target', status "
            "FROM background_jobs WHERE type = 'jobwarden.notify'")}
    shown = {(m["data-notification"], d["data-delivery"]): d["data-state"]
             for m in messages for d in m.having("data-delivery")}
    assert shown == expected
