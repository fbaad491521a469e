"""GET /metrics: Prometheus exposition of queue health, for a scraper's token or a user."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from jobwarden import Registry, enqueue, job
from jobwarden.console import create_app
from jobwarden.console.data import sample_data
from jobwarden.worker.core.states import ExecutionOutcome, JobStatus
from jobwarden.worker.duties.recovery import recover_stale_running
from jobwarden.worker.engine.completer import Completer, Completion
from jobwarden.worker.engine.producer import claim
from jobwarden.worker.store.db import DedicatedConnection
from tests.helpers import wait_for

TOKEN = "scrape-me-0123456789"


@pytest.fixture
def scenario(engine):
    with engine.begin() as conn:
        return sample_data.seed_console_scenario(conn)


@pytest.fixture
def scraper(clean_db, users):
    app = create_app({"TESTING": True, "SECRET_KEY": "test-secret", "DATABASE_URL": clean_db,
                      "METRICS_TOKEN": TOKEN})
    yield app.test_client()
    app.extensions["jobwarden_db"].dispose()


def samples(text: str) -> dict[tuple, float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_a_scraper_with_the_token_gets_job_counts_by_status(scraper, scenario):
    response = scraper.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200
    assert response.mimetype == "text/plain"
    found = samples(response.get_data(as_text=True))
    failed = sum(v for (name, labels), v in found.items()
                 if name == "jobwarden_jobs" and ("status", "failed") in labels)
    completed = sum(v for (name, labels), v in found.items()
                    if name == "jobwarden_jobs" and ("status", "completed") in labels)
    assert (failed, completed) == (9, 52)  # the same numbers the overview shows
    assert found[("jobwarden_oldest_pending_age_seconds", ())] > 0
    assert ("jobwarden_workers", (("state", "running"),)) in found


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"},
                                     {"Authorization": f"Basic {TOKEN}"}])
def test_metrics_refuse_anyone_without_a_token_or_session(scraper, scenario, headers):
    response = scraper.get("/metrics", headers=headers)
    assert response.status_code == 401
    assert b"jobwarden_jobs" not in response.data


def test_a_signed_in_viewer_may_read_metrics(viewer, scenario):
    response = viewer.get("/metrics")
    assert response.status_code == 200 and b"jobwarden_jobs{" in response.data


@pytest.fixture
def alert_inputs(engine):
    """A few rows whose figures the alerting rules' families must report exactly."""
    with engine.begin() as conn:
        sample_data.insert_worker(conn, "w-email", queues=("email",))
        sample_data.insert_worker(conn, "w-all", queues=("*",), heartbeat_ago=3600)  # gone
        for duration_ms in (50.0, 400.0, 400.0, 7000.0):  # 50 ms sits on a bucket bound
            job = sample_data.insert_job(conn, "send_email", "completed", queue="email")
            sample_data.insert_execution(conn, job, started_ago=60, wait_s=3,
                                         duration_ms=duration_ms)
        for _ in range(2):
            job = sample_data.insert_job(conn, "send_email", "failed", queue="email",
                                         error_code="AUTH_FAILED")
            sample_data.insert_execution(conn, job, outcome="failed", error_code="AUTH_FAILED",
                                         started_ago=30)
        old = sample_data.insert_job(conn, "send_email", "completed", queue="email")
        sample_data.insert_execution(conn, old, started_ago=900)  # outside the 5-minute window
        for _ in range(3):
            sample_data.insert_job(conn, "export_report", "pending", queue="reports", ago=400)
        sample_data.insert_job(conn, "send_email", "pending", queue="email", ago=10)
        sample_data.insert_job(conn, "send_email", "running", queue="email",
                               heartbeat_at=func_now_minus(conn, 600))
        conn.exec_driver_sql("INSERT INTO job_types (type, queue, max_attempts, lease_seconds, "
                             "backoff, sla_seconds, version, repeat_safe, published_by) VALUES "
                             "('export_report', 'reports', 5, 60, '{}', 120, 1, true, 'w')")


def func_now_minus(conn, seconds: float):
    return conn.exec_driver_sql(f"SELECT now() - interval '{seconds} seconds'").scalar_one()


def test_metrics_give_the_alerting_rules_their_inputs(scraper, alert_inputs):
    found = samples(scraper.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
                    .get_data(as_text=True))

    def value(name, **labels):
        return found[(name, tuple(sorted(labels.items())))]

    # executions in the last 5 minutes, failures by error code; the 15-minute-old one is out
    assert value("jobwarden_executions_last_5m", queue="email", type="send_email",
                 outcome="completed", error_code="") == 4
    assert value("jobwarden_executions_last_5m", queue="email", type="send_email",
                 outcome="failed", error_code="AUTH_FAILED") == 2
    # the duration histogram is cumulative with `le` inclusive: 50 ms counts under 0.05
    bucket = "jobwarden_execution_duration_seconds_bucket"
    assert value(bucket, type="send_email", le="0.05") == 1
    assert value(bucket, type="send_email", le="0.5") == 5  # + two 400 ms + two 250 ms failed
    assert value(bucket, type="send_email", le="5.0") == 5
    assert value(bucket, type="send_email", le="10.0") == 6
    assert value(bucket, type="send_email", le="+Inf") == 6
    assert value("jobwarden_execution_duration_seconds_gsum", type="send_email") == \
        pytest.approx(0.05 + 0.4 + 0.4 + 7.0 + 0.25 + 0.25)
    waits = "jobwarden_time_to_start_seconds_bucket"
    assert (value(waits, type="send_email", le="2.5"), value(waits, type="send_email", le="5.0")) \
        == (3, 7)  # the failed ones waited 1 s, the completed ones 3 s, the running one 0 s
    # runnable work, live workers per queue (the '*' worker is gone), stale heartbeats, SLA
    assert value("jobwarden_queue_runnable_jobs", queue="reports") == 3
    assert value("jobwarden_queue_live_workers", queue="reports") == 0
    assert value("jobwarden_queue_live_workers", queue="email") == 1
    assert value("jobwarden_oldest_pending_age_by_type_seconds", queue="reports",
                 type="export_report") >= 400
    assert value("jobwarden_job_type_sla_seconds", type="export_report") == 120
    assert value("jobwarden_stale_running_jobs", queue="email", type="send_email") == 1


def test_a_paused_queue_reports_no_runnable_jobs(scraper, alert_inputs, engine):
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO queue_controls (queue, paused) VALUES ('reports', true)")
    found = samples(scraper.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
                    .get_data(as_text=True))
    assert found[("jobwarden_queue_runnable_jobs", (("queue", "reports"),))] == 0


def test_every_metric_the_alerting_rules_read_is_exposed(scraper, alert_inputs):
    rules = (Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
             / "jobwarden.rules.yml").read_text()
    wanted = set(re.findall(r"\bjobwarden_[a-z0-9_]+", rules))
    found = {name for name, _labels in samples(
        scraper.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        .get_data(as_text=True))}
    assert wanted and wanted <= found, wanted - found


def test_recovered_and_zombie_executions_are_counters_by_type(scraper, clean_db):
    # A real zombie: execution A claims a job, its lease runs out and recovery moves the
    # job on; A's completion, flushed afterwards, matches no row and is refused.
    reg = Registry()

    @job("zombie.noop", lease=30, registry=reg)
    def noop(ctx, payload):
        raise AssertionError("the statements are driven by the test")

    with psycopg.connect(clean_db, autocommit=True) as db:
        job_id = enqueue(db, "zombie.noop", {}, registry=reg)
        (a,) = claim(db, types=["zombie.noop"], leases=[30.0], queues=None, limit=1,
                     worker_id="worker-a")
        db.execute("UPDATE background_jobs SET lease_expires_at = now() - interval '1 second' "
                   "WHERE id = %s", [job_id])
        assert recover_stale_running(db, reg) == {"pending": 1}
    completer = Completer(DedicatedConnection(clean_db), interval=3600)
    completer.submit(Completion(job_id=a.id, execution_id=a.execution_id, type=a.type,
                                attempt=a.attempt, lease=30.0, status=JobStatus.COMPLETED,
                                outcome=ExecutionOutcome.COMPLETED))
    completer.flush()
    assert completer.refused == 1

    text = scraper.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).get_data(
        as_text=True)
    assert "# TYPE jobwarden_zombie_rejected_total counter" in text
    found = samples(text)
    assert found[("jobwarden_recovered_total", (("type", "zombie.noop"),))] == 1
    zombie = {dict(labels)["learned_by"]: v for (name, labels), v in found.items()
              if name == "jobwarden_zombie_rejected_total"}
    assert zombie == {"outcome": 1, "lease": 0}  # the other way of learning: at zero


def scrape(scraper) -> dict[tuple, float]:
    return samples(scraper.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
                   .get_data(as_text=True))


def held_for(probe, pid: int) -> float:
    """How long session `pid`'s transaction has been open, read by the test itself."""
    return probe.execute("SELECT extract(epoch FROM now() - xact_start)::float8 "
                         "FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0]


def hold_snapshot(url: str) -> psycopg.Connection:
    """A session holding a repeatable-read snapshot open, as a forgotten transaction does."""
    holder = psycopg.connect(url)
    holder.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    holder.execute("SELECT 1")  # the snapshot is taken by the first statement
    return holder


SESSION = (("holder", "session"),)


def test_a_snapshot_held_open_shows_as_the_xmin_horizon_age_until_it_closes(scraper, clean_db):
    with psycopg.connect(clean_db, autocommit=True) as probe:
        holder = hold_snapshot(clean_db)
        try:
            for _ in range(3):  # three transactions the held snapshot falls behind
                probe.execute("INSERT INTO job_event_totals (event, type, total) "
                              "VALUES ('recovered', gen_random_uuid()::text, 1)")
            held_s = held_for(probe, holder.info.backend_pid)
            found = scrape(scraper)
            assert found[("jobwarden_xmin_horizon_age_seconds", SESSION)] >= held_s > 0
            assert found[("jobwarden_xmin_horizon_age_transactions", SESSION)] >= 3
            assert found[("jobwarden_xmin_horizon_hidden_sessions", ())] == 0
        finally:
            holder.close()
        found = scrape(scraper)
        assert found[("jobwarden_xmin_horizon_age_seconds", SESSION)] == 0
        assert found[("jobwarden_xmin_horizon_age_transactions", SESSION)] == 0
        # the other kinds are exposed too, at 0 when nothing of theirs holds the horizon
        assert ("jobwarden_xmin_horizon_age_seconds",
                (("holder", "prepared_transaction"),)) in found
        assert ("jobwarden_xmin_horizon_age_transactions", (("holder", "replication"),)) in found


def test_an_idle_in_transaction_session_that_wrote_holds_the_horizon_by_its_own_id(
        scraper, clean_db):
    # Read committed drops its snapshot after each statement; its transaction id is what
    # holds the horizon once it has written something.
    with psycopg.connect(clean_db, autocommit=True) as probe, psycopg.connect(clean_db) as writer:
        writer.execute("INSERT INTO queue_controls (queue, paused) VALUES ('q', false)")
        idle = probe.execute("SELECT backend_xmin IS NULL AND backend_xid IS NOT NULL "
                             "FROM pg_stat_activity WHERE pid = %s",
                             [writer.info.backend_pid]).fetchone()[0]
        assert idle
        held_s = held_for(probe, writer.info.backend_pid)
        assert scrape(scraper)[("jobwarden_xmin_horizon_age_seconds", SESSION)] >= held_s
        writer.rollback()
        assert scrape(scraper)[("jobwarden_xmin_horizon_age_seconds", SESSION)] == 0


@pytest.fixture
def console_role(clean_db):
    """A login role that may read the tables and nothing more (no superuser, no
    pg_monitor), dropped afterwards: the server is shared, so its name is unique."""
    name = f"jobwarden_console_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(clean_db, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{name}" LOGIN')
        admin.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{name}"')
    parts = urlsplit(clean_db)
    # Only the user changes: the host stays as the URL has it, a TCP host:port or nothing
    # (the embedded server's socket directory is in the query).
    where = parts.netloc.rpartition("@")[2]
    yield name, urlunsplit(parts._replace(netloc=f"{name}@{where}"))
    with psycopg.connect(clean_db, autocommit=True) as admin:
        admin.execute(f'DROP OWNED BY "{name}"')
        admin.execute(f'DROP ROLE "{name}"')


def test_without_pg_monitor_another_roles_session_counts_as_hidden_until_granted(
        clean_db, console_role):
    # Every role sees other roles' backend_xmin, but their xact_start only with pg_monitor.
    name, url = console_role
    app = create_app({"TESTING": True, "SECRET_KEY": "test-secret", "DATABASE_URL": url,
                      "METRICS_TOKEN": TOKEN})
    scraper = app.test_client()
    holder = hold_snapshot(clean_db)  # the superuser's session, not the console role's
    try:
        with psycopg.connect(clean_db, autocommit=True) as admin:
            admin.execute("INSERT INTO queue_controls (queue, paused) VALUES ('q', false)")
            found = scrape(scraper)
            assert found[("jobwarden_xmin_horizon_hidden_sessions", ())] == 1
            assert found[("jobwarden_xmin_horizon_age_seconds", SESSION)] == 0
            assert found[("jobwarden_xmin_horizon_age_transactions", SESSION)] >= 1

            admin.execute(f'GRANT pg_monitor TO "{name}"')
            held_s = held_for(admin, holder.info.backend_pid)
            found = scrape(scraper)
            assert found[("jobwarden_xmin_horizon_hidden_sessions", ())] == 0
            assert found[("jobwarden_xmin_horizon_age_seconds", SESSION)] >= held_s
    finally:
        holder.close()
        app.extensions["jobwarden_db"].dispose()


def table_stats(probe, table: str) -> dict:
    # Each autocommit statement is its own transaction, so each read takes a fresh
    # statistics snapshot (stats_fetch_consistency caches one per transaction).
    return probe.execute(
        "SELECT n_live_tup, n_dead_tup, n_tup_upd, n_tup_del, "
        "extract(epoch FROM now() - last_vacuum)::float8 AS vacuum_age_s "
        "FROM pg_stat_user_tables WHERE relid = %s::regclass", [table]).fetchone()


def wait_for_stats(probe, table: str, done) -> tuple:
    """Statistics reach the shared counters asynchronously: wait until `done(row)`."""
    return wait_for(lambda: row if done(row := table_stats(probe, table)) else None,
                    timeout=60, interval=0.1, message=f"{table}'s statistics")


def scrape_with_stats(scraper, probe, table: str) -> tuple[dict, tuple]:
    """A scrape, and the table's statistics as they stood all through it.

    Other sessions' counts reach the shared statistics when they flush them, at the
    latest as they exit: an earlier test's connections may still be adding theirs. Read
    before and after the scrape, again until nothing changed in between.
    """
    def attempt():
        before = table_stats(probe, table)
        found = scrape(scraper)
        after = table_stats(probe, table)
        # all but the vacuum's age, which grows by itself: the scrape's is at least before's
        return (found, before) if before[:4] == after[:4] else None

    return wait_for(attempt, timeout=60, interval=0,
                    message=f"{table}'s statistics to hold still through a scrape")


def test_dead_tuples_stay_while_a_snapshot_is_held_and_vacuum_removes_them_after(
        scraper, clean_db):
    def tuples(found, kind):
        return found[(f"jobwarden_table_{kind}_tuples", (("table", "background_jobs"),))]

    with psycopg.connect(clean_db, autocommit=True) as probe:
        _, dead0, upd0, del0, _ = table_stats(probe, "background_jobs")
        ids = [r[0] for r in probe.execute(
            "INSERT INTO background_jobs (type, payload) "
            "SELECT 'tuples.test', '{}' FROM generate_series(1, 10) RETURNING id")]
        holder = hold_snapshot(clean_db)  # taken after the inserts: it sees all 10 rows
        try:
            probe.execute("UPDATE background_jobs SET priority = 1 WHERE id = ANY(%s)", [ids[:7]])
            probe.execute("DELETE FROM background_jobs WHERE id = ANY(%s)", [ids[7:]])
            probe.execute("SELECT pg_stat_force_next_flush()")
            wait_for_stats(
                probe, "background_jobs", lambda r: r[2] - upd0 >= 7 and r[3] - del0 >= 3)
            found, (live, dead, _, _, _) = scrape_with_stats(scraper, probe, "background_jobs")
            assert (tuples(found, "live"), tuples(found, "dead")) == (live, dead)
            assert dead - dead0 >= 10  # one old version per update and per delete

            # the held snapshot may still see those versions: VACUUM must keep them all
            probe.execute("VACUUM background_jobs")
            found, (_, kept, _, _, vacuum_age_s) = scrape_with_stats(
                scraper, probe, "background_jobs")
            assert tuples(found, "dead") == kept >= 10
            assert found[("jobwarden_table_last_vacuum_age_seconds",
                          (("table", "background_jobs"),))] >= vacuum_age_s
        finally:
            # Ended before the VACUUM below runs: a closed connection's backend exits (and
            # lets go of its snapshot) after close() returns, a rollback before.
            holder.rollback()
            holder.close()
        probe.execute("VACUUM background_jobs")
        found, stats = scrape_with_stats(scraper, probe, "background_jobs")
        assert tuples(found, "dead") == stats[1] == 0


def partition_tuples(probe) -> tuple[int, int, int]:
    """Live and dead tuples summed over job_executions' partitions, and its deletes."""
    return probe.execute(
        "SELECT sum(n_live_tup)::int, sum(n_dead_tup)::int, sum(n_tup_del)::int "
        "FROM pg_stat_user_tables WHERE relid IN "
        "(SELECT relid FROM pg_partition_tree('job_executions') WHERE isleaf)").fetchone()


def test_the_history_reports_the_dead_tuples_of_its_partitions(scraper, clean_db):
    """job_executions is partitioned (migration 0066): its parent holds no tuple, so its
    figures are its partitions' sums, or JobwardenDeadTuplesPiling could never fire."""
    def tuples(found, kind):
        return found[(f"jobwarden_table_{kind}_tuples", (("table", "job_executions"),))]

    with psycopg.connect(clean_db, autocommit=True) as probe:
        _, _, del0 = partition_tuples(probe)
        # Finished now: the rows land in this week's partition, not the parent.
        probe.execute("""
            INSERT INTO job_executions (job_id, execution_id, attempt, queue, type,
                                        worker_id, scheduled_at, started_at, finished_at,
                                        outcome, duration_ms)
            SELECT g, gen_random_uuid(), 1, 'default', 'tuples.test', 'w', now(), now(),
                   now(), 'completed', 1
            FROM generate_series(1, 40) AS g""")
        probe.execute("DELETE FROM job_executions WHERE type = 'tuples.test' AND job_id <= 30")
        probe.execute("SELECT pg_stat_force_next_flush()")
        wait_for(lambda: partition_tuples(probe)[2] - del0 >= 30, timeout=60, interval=0.1,
                 message="the partitions' statistics")

        def still():
            before = partition_tuples(probe)
            found = scrape(scraper)
            return (found, before) if partition_tuples(probe) == before else None

        found, (live, dead, _) = wait_for(still, timeout=60, interval=0,
                                          message="statistics to hold still")
        assert (tuples(found, "live"), tuples(found, "dead")) == (live, dead)
        assert dead >= 30  # autovacuum is off here: the deleted versions are all still there
        probe.execute("VACUUM job_executions")  # a VACUUM of the parent does every week
        found, (_, dead, _) = wait_for(still, timeout=60, interval=0,
                                       message="statistics to hold still")
        assert tuples(found, "dead") == dead == 0


def console_info(client, base_url: str = "http://localhost") -> dict[str, str]:
    text = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"},
                      base_url=base_url).get_data(as_text=True)
    (labels,) = [dict(labels) for (name, labels), value in samples(text).items()
                 if name == "jobwarden_console_info" and value == 1]
    return labels


def test_the_console_tells_the_alerts_where_it_and_the_runbooks_are(clean_db, users):
    """jobwarden_console_info carries the setting; unset, the console's path alone (the
    rules' console_url is then a relative link: the request's Host is not trusted) and
    the runbooks' path in the repository."""
    plain = create_app({"TESTING": True, "SECRET_KEY": "s", "DATABASE_URL": clean_db,
                        "METRICS_TOKEN": TOKEN})
    told = create_app({"TESTING": True, "SECRET_KEY": "s", "DATABASE_URL": clean_db,
                       "METRICS_TOKEN": TOKEN, "EXTERNAL_URL": "https://ops.example.com/jobs/",
                       "RUNBOOK_URL": "https://wiki.example.com/operating"})
    try:
        assert console_info(plain.test_client(), "http://console.internal:8000") == {
            "console_url": "", "runbook_url": "docs/guide/operating.md"}
        assert console_info(told.test_client(), "http://console.internal:8000") == {
            "console_url": "https://ops.example.com/jobs",
            "runbook_url": "https://wiki.example.com/operating"}
    finally:
        plain.extensions["jobwarden_db"].dispose()
        told.extensions["jobwarden_db"].dispose()


@pytest.mark.parametrize("trust_proxy", [False, True])
def test_a_forged_host_never_reaches_the_alerts_links(clean_db, users, trust_proxy):
    """Without JOBWARDEN_CONSOLE_URL, a scrape sent with another Host (or, behind a trusted
    proxy, X-Forwarded-Host) leaves the links the alerts carry as paths of this console:
    Prometheus would otherwise hand the forged address to everyone an alert reaches."""
    app = create_app({"TESTING": True, "SECRET_KEY": "s", "DATABASE_URL": clean_db,
                      "METRICS_TOKEN": TOKEN, "TRUST_PROXY": trust_proxy})
    try:
        client = app.test_client()
        for headers in ({"Host": "evil.example"},
                        {"Host": "evil.example:8443", "X-Forwarded-Host": "evil.example",
                         "X-Forwarded-Proto": "https"}):
            text = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}",
                                                   **headers}).get_data(as_text=True)
            assert "evil" not in text
            (labels,) = [dict(labels) for (name, labels), value in samples(text).items()
                         if name == "jobwarden_console_info" and value == 1]
            assert labels["console_url"] == ""
    finally:
        app.extensions["jobwarden_db"].dispose()


def test_mounted_under_a_prefix_the_alerts_links_keep_the_mount_path(clean_db, users):
    """The path comes from where the console is mounted (the WSGI SCRIPT_NAME the server
    sets), never from a request header: the links stay relative to the host they are
    opened from."""
    app = create_app({"TESTING": True, "SECRET_KEY": "s", "DATABASE_URL": clean_db,
                      "METRICS_TOKEN": TOKEN})
    try:
        text = app.test_client().get(
            "/metrics", headers={"Authorization": f"Bearer {TOKEN}", "Host": "evil.example"},
            environ_overrides={"SCRIPT_NAME": "/ops/jobs"}).get_data(as_text=True)
        (labels,) = [dict(labels) for (name, labels), value in samples(text).items()
                     if name == "jobwarden_console_info" and value == 1]
        assert labels["console_url"] == "/ops/jobs"
    finally:
        app.extensions["jobwarden_db"].dispose()


def test_the_external_url_comes_from_the_environment_and_must_be_absolute(monkeypatch):
    from jobwarden.console.core.config import load_settings

    monkeypatch.setenv("JOBWARDEN_CONSOLE_URL", "https://ops.example.com/jobs/")
    monkeypatch.setenv("JOBWARDEN_RUNBOOK_URL", "https://wiki.example.com/operating")
    found = load_settings()
    assert (found["EXTERNAL_URL"], found["RUNBOOK_URL"]) == (
        "https://ops.example.com/jobs", "https://wiki.example.com/operating")
    for wrong in ("ops.example.com/jobs", "/jobs", "ftp://ops.example.com", "https:// x"):
        monkeypatch.setenv("JOBWARDEN_CONSOLE_URL", wrong)
        with pytest.raises(ValueError, match="absolute http"):
            load_settings()
