"""The console's read replica against a real one: a private primary and a streaming hot
standby of it (tests/pgcluster.py), started once for the module, on both test modes.

Lag is made by pausing the standby's replay (`pg_wal_replay_pause()`): what the primary
commits afterwards is on the primary only, so each figure can be checked against an
independent count on each server. The lag a page shows is checked against the times the
test itself read around its own commits, on the primary's clock.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime

import psycopg
import pytest
from sqlalchemy import create_engine, event
from sqlalchemy.exc import DBAPIError

from jobwarden.console import create_app
from jobwarden.console.cli.accounts import user_add
from jobwarden.console.cli.server import serve
from jobwarden.console.data import sample_data
from jobwarden.console.data.replica import ReplicaRefused
from jobwarden.console.web.reads import REPLICA
from jobwarden.worker.store import db as dbmod
from jobwarden.worker.store.db import DatabaseUrlError, sqlalchemy_url
from tests.conftest import TABLES
from tests.console_support import PASSWORD, USERS, login
from tests.figures.html_tree import Element, parse
from tests.integration.test_console_post_routes import FULL_FORM, post_endpoints, routes
from tests.integration.test_console_schedules import publish_report_schedule
from tests.pgcluster import PrivateCluster, _free_port

CODE = "SMTP_DOWN"
OTHER = "DNS_FAIL"
DEADLINE = 30.0


@dataclass
class Pair:
    primary: PrivateCluster
    standby: PrivateCluster


@pytest.fixture(scope="module")
def pair():
    """A migrated primary with the console's users, and a streaming standby of it.
    Autovacuum off: nothing but the test commits on the primary, so the standby's last
    replayed commit is the test's own."""
    primary = PrivateCluster(settings={"autovacuum": "off"})
    try:
        primary.start()
        dbmod.migrate(primary.url)
        for name, role in USERS.items():
            user_add(name, role, PASSWORD, database_url=primary.url)
        standby = primary.standby()
        try:
            yield Pair(primary, standby)
        finally:
            standby.destroy()
    finally:
        primary.destroy()


@pytest.fixture
def fresh(pair):
    """Empty job tables (users kept), the standby running, replaying and caught up."""
    if not pair.standby.running():
        pair.standby.start()
    with psycopg.connect(pair.standby.url, autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_resume()")
    with psycopg.connect(pair.primary.url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {', '.join(t for t in TABLES if t != 'console_users')} "
                     "RESTART IDENTITY CASCADE")
    caught_up(pair)
    return pair


@pytest.fixture
def make_app(pair):
    """`make_app(**settings)`: a standalone console on the primary reading the standby."""
    apps = []

    def make(**settings):
        app = create_app({"TESTING": True, "SECRET_KEY": "test", "WTF_CSRF_ENABLED": False,
                          "DATABASE_URL": pair.primary.url, "READ_URL": pair.standby.url,
                          "READ_RETRY_SECONDS": 0, **settings})
        apps.append(app)
        return app

    yield make
    for app in apps:
        app.extensions["jobwarden_db"].dispose()
        if REPLICA in app.extensions:
            app.extensions[REPLICA].dispose()


def signed_in(app, user: str = "ada"):
    client = app.test_client()
    assert login(client, user).status_code == 303
    return client


def one(url: str, sql: str, *args):
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql, args).fetchone()[0]


def caught_up(pair: Pair) -> None:
    """Until the standby has replayed everything the primary had written when asked."""
    target = one(pair.primary.url, "SELECT pg_current_wal_lsn()")
    deadline = time.monotonic() + DEADLINE
    while not one(pair.standby.url, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", target):
        assert time.monotonic() < deadline, "the standby did not catch up"
        time.sleep(0.01)


def pause(pair: Pair) -> None:
    one(pair.standby.url, "SELECT pg_wal_replay_pause()")
    deadline = time.monotonic() + DEADLINE
    while one(pair.standby.url, "SELECT pg_get_wal_replay_pause_state()") != "paused":
        assert time.monotonic() < deadline, "the standby's replay did not pause"
        time.sleep(0.01)


def failed_jobs(url: str, n: int, code: str = CODE) -> tuple[datetime, datetime]:
    """`n` failed jobs with `code`, committed at once: the primary's clock just before the
    commit and just after it, which bound the commit's timestamp."""
    engine = create_engine(sqlalchemy_url(url))
    try:
        with engine.connect() as conn:
            for _ in range(n):
                sample_data.insert_job(conn, status="failed", error_code=code)
            before = conn.exec_driver_sql("SELECT clock_timestamp()").scalar_one()
            conn.commit()
            after = conn.exec_driver_sql("SELECT clock_timestamp()").scalar_one()
    finally:
        engine.dispose()
    return before, after


def count_failed(url: str, code: str = CODE) -> int:
    return one(url, "SELECT count(*) FROM background_jobs WHERE status = 'failed' "
                    "AND last_error_code = %s", code)


def now(pair: Pair) -> datetime:
    return one(pair.primary.url, "SELECT clock_timestamp()")


def notice(page: Element) -> Element:
    found = [e for e in page.walk() if e.attrs.get("data-testid") == "read-source"]
    assert len(found) == 1, f"{len(found)} read-source notices"
    return found[0]


def no_notice(page: Element) -> None:
    assert not [e for e in page.walk() if e.attrs.get("data-testid") == "read-source"]


def group_count(page: Element, code: str = CODE) -> int:
    rows = [e for e in page.walk() if e.attrs.get("data-error-code") == code]
    if not rows:
        return 0
    (row,) = rows
    (cell,) = [e for e in row.walk() if e.attrs.get("data-testid") == "group-count"]
    return int(cell.text())


def by_testid(page: Element, testid: str) -> Element:
    (found,) = [e for e in page.walk() if e.attrs.get("data-testid") == testid]
    return found


def get(client, url: str, **kwargs) -> Element:
    response = client.get(url, **kwargs)
    assert response.status_code == 200, (url, response.status_code)
    return parse(response.get_data(as_text=True))


def lagging(pair: Pair) -> tuple[datetime, datetime]:
    """3 failed jobs with CODE and 1 with OTHER on both servers, then 2 more with CODE and
    1 with OTHER on the primary alone (the standby's replay paused): the bounds of the
    last commit the standby replayed. A client signs in first, so its sign-in is not the
    write its pages wait for."""
    failed_jobs(pair.primary.url, 1, OTHER)
    replayed = failed_jobs(pair.primary.url, 3)
    caught_up(pair)
    pause(pair)
    failed_jobs(pair.primary.url, 2)
    failed_jobs(pair.primary.url, 1, OTHER)
    assert (count_failed(pair.standby.url), count_failed(pair.primary.url)) == (3, 5)
    return replayed


def test_a_page_of_figures_reads_the_replica_and_shows_its_lag_as_read_independently(
        fresh, make_app):
    client = signed_in(make_app())
    committed_from, committed_by = lagging(fresh)
    before = now(fresh)
    page = get(client, "/failed")
    after = now(fresh)
    shown = notice(page)
    assert shown["data-source"] == "replica"
    # The figures are the standby's, not the primary's.
    assert group_count(page) == count_failed(fresh.standby.url) == 3
    assert group_count(page, OTHER) == count_failed(fresh.standby.url, OTHER) == 1
    # Its lag: from the last commit it replayed (the test's, stamped between
    # committed_from and committed_by) to the primary's clock during the request.
    lag = float(shown["data-lag-seconds"])
    assert (before - committed_by).total_seconds() - 0.001 <= lag
    assert lag <= (after - committed_from).total_seconds() + 0.001
    assert int(shown["data-behind-bytes"]) > 0
    assert "behind the primary" in shown.text()

    # A polled fragment carries the notice out of band, measured again.
    fragment = get(client, "/failed", headers={"HX-Request": "true"})
    (oob,) = [e for e in fragment.walk() if e.attrs.get("id") == "read-source"]
    assert oob["hx-swap-oob"] == "true"
    assert float(notice(fragment)["data-lag-seconds"]) >= lag

    # Caught up, the lag is 0 and the figures are the primary's.
    one(fresh.standby.url, "SELECT pg_wal_replay_resume()")
    caught_up(fresh)
    page = get(client, "/failed")
    assert notice(page)["data-source"] == "replica"
    assert float(notice(page)["data-lag-seconds"]) == 0
    assert group_count(page) == count_failed(fresh.primary.url) == 5


def test_a_bulk_preview_reads_the_primary_and_the_action_touches_what_it_counted(
        fresh, make_app):
    client = signed_in(make_app(), "otto")
    lagging(fresh)
    assert group_count(get(client, "/failed")) == 3  # the lagging standby's figure

    # The group's page decides an action: its preview, and the whole page, read the primary.
    group = get(client, f"/failed/group?code={CODE}")
    no_notice(group)
    assert int(by_testid(group, "preview-count").text()) == count_failed(fresh.primary.url)
    assert count_failed(fresh.primary.url) == 5

    made = client.post("/bulk/select", data={"action": "retry", "all_matching": "1",
                                             "status": "failed", "error_code": CODE})
    assert made.status_code == 303, made.status_code
    selection = made.headers["Location"].split("/bulk/", 1)[1].split("?")[0]
    review = get(client, f"/bulk/{selection}")
    no_notice(review)
    assert int(by_testid(review, "selected-count").text()) == 5
    done = client.post(f"/bulk/{selection}", data={"reason": "provider back",
                                                   "request_id": "r1", "mode": "all"})
    assert done.status_code == 303
    # Exactly the 5 the preview counted were retried (the standby never saw 2 of them),
    # and the other code's failures were left alone.
    assert one(fresh.primary.url, "SELECT count(*) FROM job_audit WHERE action = 'retry' "
                                  "AND bulk_id = %s", selection) == 5
    assert count_failed(fresh.primary.url) == 0
    assert count_failed(fresh.primary.url, OTHER) == 2

    # After the action the standby (still paused) has not replayed it: this user's pages
    # read the primary, say why, and show the action.
    page = get(client, "/failed")
    assert notice(page)["data-source"] == "primary"
    assert notice(page)["data-why"] == "before_your_action"
    assert group_count(page) == 0
    assert group_count(page, OTHER) == count_failed(fresh.primary.url, OTHER) == 2
    one(fresh.standby.url, "SELECT pg_wal_replay_resume()")
    caught_up(fresh)
    page = get(client, "/failed")
    assert notice(page)["data-source"] == "replica"
    assert group_count(page) == count_failed(fresh.standby.url) == 0


def test_past_the_allowed_lag_pages_read_the_primary_and_say_how_far_behind(
        fresh, make_app):
    client = signed_in(make_app(READ_MAX_LAG_SECONDS=0.001))
    committed_from, _ = lagging(fresh)
    before = now(fresh)
    page = get(client, "/failed")
    shown = notice(page)
    assert (shown["data-source"], shown["data-why"]) == ("primary", "too_far_behind")
    assert float(shown["data-lag-seconds"]) >= (before - committed_from).total_seconds() - 0.001
    assert "more than the" in shown.text()
    assert group_count(page) == count_failed(fresh.primary.url) == 5


def test_an_unreachable_replica_sends_pages_to_the_primary_with_a_notice_until_it_is_back(
        fresh, make_app):
    client = signed_in(make_app())
    failed_jobs(fresh.primary.url, 2)
    caught_up(fresh)
    fresh.standby.stop()
    failed_jobs(fresh.primary.url, 1)
    page = get(client, "/failed")
    assert (notice(page)["data-source"], notice(page)["data-why"]) == ("primary", "unreachable")
    assert "cannot be reached" in notice(page).text()
    assert group_count(page) == count_failed(fresh.primary.url) == 3
    # The job page reads the primary anyway: no notice at all.
    no_notice(get(client, "/jobs/1"))

    fresh.standby.start()
    deadline = time.monotonic() + DEADLINE
    while notice(page := get(client, "/failed"))["data-source"] != "replica":
        assert time.monotonic() < deadline, "the pages never read the standby again"
        time.sleep(0.05)
    assert group_count(page) == count_failed(fresh.standby.url) == 3


@pytest.fixture
def seeded(fresh, make_app):
    """The POST walk's targets (test_console_post_routes.py), on the primary."""
    app = make_app()
    publish_report_schedule(fresh.primary.url)
    engine = create_engine(sqlalchemy_url(fresh.primary.url))
    with engine.begin() as conn:
        values = {status: sample_data.insert_job(conn, status=status)
                  for status in ("failed", "pending", "unknown")}
        values["canary"] = [sample_data.insert_job(conn, status="failed") for _ in range(3)]
        conn.exec_driver_sql("INSERT INTO queue_controls (queue, paused, changed_by) "
                             "VALUES ('paused_q', true, 'ada')")
    engine.dispose()
    otto_id = one(fresh.primary.url, "SELECT id FROM console_users WHERE username = 'otto'")
    target = one(fresh.primary.url, "INSERT INTO job_notify_targets (name, kind, url, "
                 "created_by, updated_by) VALUES ('team hook', 'webhook', "
                 "'https://hooks.example.com/t', 'ada', 'ada') RETURNING id")
    admin = signed_in(app)

    def selection(ids: list[int]) -> str:
        made = admin.post("/bulk/select", data={"action": "retry",
                                                "job_id": [str(i) for i in ids]})
        return made.headers["Location"].split("/bulk/", 1)[1].split("?")[0]

    started = selection(values["canary"])
    assert admin.post(f"/bulk/{started}", data={
        "reason": "canary", "request_id": "c", "mode": "canary", "canary": "1"}
    ).status_code == 303
    return app, admin, {**values, "otto_id": otto_id, "target": target,
                        "selection": selection([values["failed"]]), "started": started}


def checkouts(engine) -> list[int]:
    """A counter of the connections `engine`'s pool hands out."""
    counted = [0]
    event.listen(engine, "checkout", lambda *args: counted.__setitem__(0, counted[0] + 1))
    return counted


#: GET pages that decide an action, or manage accounts: the primary, for all they show
#: (a schedule's preview, for the edit forms, reads no figures at all: only the session).
PRIMARY_PAGES = ("/jobs/{failed}", "/jobs/{failed}/_live", f"/failed/group?code={OTHER}",
                 "/bulk/{selection}", "/bulk/{started}/_progress", "/users",
                 "/schedules/preview?cron=0+3+*+*+*&timezone=Europe/Berlin")
#: Pages of figures: the standby.
REPLICA_PAGES = ("/", "/_overview/counts", "/_overview/trends", "/_overview/health",
                 "/failed", "/jobs", "/batches", "/search?q=timed", "/queues",
                 "/types/send_email", "/schedules", "/review", "/workers", "/sla", "/audit",
                 "/flows/{failed}")


def test_no_post_route_touches_the_replica_and_pages_read_the_server_their_kind_says(
        seeded, fresh):
    app, admin, targets = seeded
    primary = checkouts(app.extensions["jobwarden_db"].engine)
    replica = checkouts(app.extensions[REPLICA].engine)
    walk = routes(app, targets)
    assert post_endpoints(app) == set(walk)  # a POST route added later is walked too
    # Besides each route's own tries, POSTs refused with a page that has the navigation
    # (its badges are read during an action's request too).
    walk = {**walk, "refused with a page": [("/bulk/select", {"failed_from": "soon"})]}
    for endpoint, tries in walk.items():
        for url, fields in tries:
            primary[0] = replica[0] = 0
            response = admin.post(url, data={**FULL_FORM, **fields})
            assert response.status_code < 500, (endpoint, url, response.status_code)
            assert replica[0] == 0, f"POST {url} read the replica"
            assert primary[0] >= 1, f"POST {url} did not use the primary"
            if endpoint == "jobwarden.auth.logout":
                assert login(admin, "ada").status_code == 303

    caught_up(fresh)  # the walk's actions, replayed: the pages may read the standby
    for pattern in REPLICA_PAGES + PRIMARY_PAGES:
        url = pattern.format(**targets)
        primary[0] = replica[0] = 0
        htmx = {"HX-Request": "true"} if "/_" in url else {}
        response = admin.get(url, headers=htmx)
        assert response.status_code == 200, (url, response.status_code)
        if pattern in REPLICA_PAGES:
            assert replica[0] >= 1, f"GET {url} did not read the replica"
            assert notice(parse(response.get_data(as_text=True)))["data-source"] == "replica"
        else:
            assert replica[0] == 0, f"GET {url} read the replica"


def test_the_replica_connections_are_read_only(fresh, make_app):
    engine = make_app().extensions[REPLICA].engine
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW default_transaction_read_only").scalar_one() == "on"
        with pytest.raises(DBAPIError, match="read-only"):
            conn.exec_driver_sql("CREATE TABLE replica_write (id int)")


@pytest.mark.parametrize("case", ["primary itself", "other database", "other cluster"])
def test_a_replica_of_another_database_is_refused_at_start_in_one_line(
        case, pair, server_url, request):
    url = {"primary itself": pair.primary.url,
           "other database": pair.standby.url.rsplit("/", 1)[0] + "/template1",
           "other cluster": server_url}[case]
    with pytest.raises(ReplicaRefused) as refused:
        create_app({"TESTING": True, "SECRET_KEY": "test", "DATABASE_URL": pair.primary.url,
                    "READ_URL": url})
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("JOBWARDEN_CONSOLE_READ_URL (")
    assert {"primary itself": "not a standby", "other database": "'template1'",
            "other cluster": "another PostgreSQL cluster"}[case] in message


def test_a_malformed_read_url_is_one_line_naming_its_variable(pair):
    with pytest.raises(DatabaseUrlError) as refused:
        create_app({"TESTING": True, "SECRET_KEY": "test", "DATABASE_URL": pair.primary.url,
                    "READ_URL": "mysql://reader:s3cret@replica/jobs"})
    assert str(refused.value) == ("JOBWARDEN_CONSOLE_READ_URL has scheme 'mysql': use "
                                  "postgresql:// (postgres:// and postgresql+psycopg:// are "
                                  "read alike)")


def test_the_console_command_refuses_a_replica_of_another_database_in_one_line(
        pair, monkeypatch, capsys):
    monkeypatch.setenv("DATABASE_URL", pair.primary.url)
    monkeypatch.setenv("JOBWARDEN_CONSOLE_READ_URL", pair.primary.url)
    monkeypatch.setenv("JOBWARDEN_SECRET_KEY", "test-" + uuid.uuid4().hex)
    assert serve("127.0.0.1", 0) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("jobwarden console: JOBWARDEN_CONSOLE_READ_URL") and "not a standby" in err


def test_a_replica_down_at_start_is_not_refused_and_its_pages_read_the_primary(
        fresh, make_app):
    closed_url = f"postgresql://postgres@127.0.0.1:{_free_port()}/postgres"  # no server
    client = signed_in(make_app(READ_URL=closed_url))
    failed_jobs(fresh.primary.url, 2)
    page = get(client, "/failed")
    assert (notice(page)["data-source"], notice(page)["data-why"]) == ("primary", "unreachable")
    assert "127.0.0.1" not in notice(page).text()  # the log names the host, not the page
    assert group_count(page) == 2
