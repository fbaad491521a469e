"""Schedules edited in the console (admins): add, edit, remove, each audited with its
reason; a console edit wins over the code's declaration until removed and survives a
worker publishing it again; two admins racing; viewers and operators refused; hostile
values refused in one line with nothing changed (docs/security.md, "Schedules edited in
the console")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from jobwarden import Registry, job
from jobwarden.worker.duties.scheduler import publish, run_once
from jobwarden.worker.jobs.job_types import publish_job_types
from tests.console_support import login
from tests.figures.html_tree import parse
from tests.helpers import scalar, start_process, stop_processes, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))

PAGE = "/schedules"


def app_registry(*, declare: bool = True) -> Registry:
    """`nightly_report` declared in code (unless `declare` is False), `send_digest` not."""
    reg = Registry()
    schedule = {"schedule": "0 3 * * *", "schedule_tz": "Europe/Berlin",
                "schedule_payload": {"kind": "daily"}} if declare else {}
    job("nightly_report", registry=reg, **schedule)(lambda c, p: None)
    job("send_digest", registry=reg)(lambda c, p: None)
    return reg


def published(url: str, reg: Registry | None = None) -> None:
    """The app's job types and schedules, as a worker starting publishes them."""
    reg = reg or app_registry()
    with psycopg.connect(url) as conn:
        publish_job_types(conn, list(reg), published_by="w1")
        publish(conn, reg, "w1")
        conn.commit()


@pytest.fixture
def admin(client):
    assert login(client, "ada").status_code == 303
    return client


def form(**fields) -> dict:
    base = {"cron": "*/10 * * * *", "timezone": "UTC", "payload": "{}",
            "reason": "ops ticket 42", "request_id": uuid.uuid4().hex}
    return {**base, **fields}


def row(url: str, job_type: str = "nightly_report"):
    with psycopg.connect(url) as conn:
        return conn.execute("SELECT cron, timezone, catch_up, payload, edited_by, declared, "
                            "revision FROM job_schedules WHERE type = %s",
                            (job_type,)).fetchone()


def flashes(client) -> str:
    return " ".join(e.text() for e in parse(client.get(PAGE).get_data(as_text=True))
                    .all(lambda e: e.attrs.get("data-testid", "").startswith("flash-")))


def schedule_row(client, job_type: str):
    tree = parse(client.get(PAGE).get_data(as_text=True))
    return tree.one(lambda e: e.attrs.get("data-schedule") == job_type)


def test_an_admin_edit_wins_over_the_code_until_removed_and_a_republish_keeps_it(
        admin, post_form, clean_db):
    published(clean_db)
    assert schedule_row(admin, "nightly_report").one("schedule-source").text() \
        == "declared in code"
    response = post_form(admin, f"{PAGE}/nightly_report/edit",
                         form(cron="15 4 * * *", timezone="Asia/Tokyo", catch_up="y",
                              payload='{"kind": "weekly"}', revision="1"), token_from=PAGE)
    assert response.status_code == 303
    assert "Schedule 'nightly_report' saved" in flashes(admin)
    cron, tz, catch_up, payload, edited_by, declared, revision = row(clean_db)
    assert (cron, tz, catch_up, payload, edited_by, revision) == (
        "15 4 * * *", "Asia/Tokyo", True, {"kind": "weekly"}, "ada", 2)
    assert declared == {"cron": "0 3 * * *", "timezone": "Europe/Berlin", "catch_up": False,
                        "payload": {"kind": "daily"}}
    source = schedule_row(admin, "nightly_report").one("schedule-source")
    assert source.attrs["data-source"] == "override"
    assert "a console edit by ada overrides it until removed" in source.text()
    # A worker starting again publishes the code's declaration: beside the edit, not over it
    published(clean_db)
    assert row(clean_db)[:5] == ("15 4 * * *", "Asia/Tokyo", True, {"kind": "weekly"}, "ada")
    # Removing the edit puts the declaration back, from its next tick
    response = post_form(admin, f"{PAGE}/nightly_report/remove",
                         {"reason": "back to normal", "request_id": "rm-1", "revision": "2"},
                         token_from=PAGE)
    assert "is back to its declaration in code" in flashes(admin)
    assert row(clean_db)[:5] == ("0 3 * * *", "Europe/Berlin", False, {"kind": "daily"}, None)
    next_local = scalar(clean_db, "SELECT (next_run_at AT TIME ZONE 'Europe/Berlin')::time "
                                  "FROM job_schedules")
    assert str(next_local) == "03:00:00"
    assert scalar(clean_db, "SELECT array_agg(action || ':' || actor || ':' || reason "
                            "ORDER BY id) FROM job_audit") == [
        "edit_schedule:ada:ops ticket 42", "remove_schedule:ada:back to normal"]
    details = scalar(clean_db, "SELECT details FROM job_audit ORDER BY id LIMIT 1")
    assert details["was"] == {"cron": "0 3 * * *", "timezone": "Europe/Berlin",
                              "catch_up": False}
    assert details["changed"] == ["cron", "timezone", "catch_up", "payload"]
    assert details["overrides_code"] is True
    subjects = parse(admin.get("/audit").get_data(as_text=True)).all("audit-subject")
    assert [s.text() for s in subjects] == ["schedule nightly_report"] * 2


def test_an_admin_adds_a_schedule_and_deleting_it_stops_it(admin, post_form, clean_db):
    published(clean_db)
    response = post_form(admin, f"{PAGE}/add", form(job_type="send_digest",
                                                    payload='{"to": "team"}'), token_from=PAGE)
    assert response.status_code == 303
    assert "Schedule 'send_digest' added" in flashes(admin)
    assert row(clean_db, "send_digest")[:5] == ("*/10 * * * *", "UTC", False, {"to": "team"},
                                                "ada")
    source = schedule_row(admin, "send_digest").one("schedule-source")
    assert source.attrs["data-source"] == "console"
    # the worker's code does not declare it: publishing again leaves it alone
    published(clean_db)
    assert row(clean_db, "send_digest") is not None
    # adding one again is refused: it has one
    post_form(admin, f"{PAGE}/add", form(job_type="send_digest", request_id="again"),
              token_from=PAGE)
    assert "has a schedule already" in flashes(admin)
    post_form(admin, f"{PAGE}/send_digest/remove",
              {"reason": "not needed", "request_id": "rm-2", "revision": "1"}, token_from=PAGE)
    assert "Schedule 'send_digest' removed." in flashes(admin)
    assert row(clean_db, "send_digest") is None
    assert scalar(clean_db, "SELECT array_agg(action ORDER BY id) FROM job_audit") == [
        "add_schedule", "remove_schedule"]


def test_a_schedule_declared_only_in_code_has_no_edit_to_remove(admin, post_form, clean_db):
    published(clean_db)
    page = schedule_row(admin, "nightly_report")
    assert page.all(lambda e: e.attrs.get("data-action") == "remove_schedule") == []
    post_form(admin, f"{PAGE}/nightly_report/remove",
              {"reason": "x", "request_id": "rm-3", "revision": "1"}, token_from=PAGE)
    assert "declared in code and has no console edit to remove" in flashes(admin)
    assert row(clean_db)[0] == "0 3 * * *"


def test_a_console_edit_outlives_its_declaration_leaving_the_code(admin, post_form, clean_db):
    published(clean_db)
    post_form(admin, f"{PAGE}/nightly_report/edit", form(revision="1"), token_from=PAGE)
    published(clean_db, app_registry(declare=False))  # a deploy drops the declaration
    assert row(clean_db)[0] == "*/10 * * * *" and row(clean_db)[5] is None
    assert schedule_row(admin, "nightly_report").one("schedule-source").attrs[
        "data-source"] == "console"


def test_two_admins_racing_the_second_is_refused_and_nothing_is_lost(app, post_form,
                                                                     clean_db):
    published(clean_db)
    first, second = app.test_client(), app.test_client()
    for client in (first, second):
        assert login(client, "ada").status_code == 303
    # both opened the page at revision 1
    for client in (first, second):
        revision = schedule_row(client, "nightly_report").one(
            lambda e: e.attrs.get("name") == "revision").attrs["value"]
        assert revision == "1"
    post_form(first, f"{PAGE}/nightly_report/edit", form(cron="0 5 * * *", revision="1"),
              token_from=PAGE)
    post_form(second, f"{PAGE}/nightly_report/edit", form(cron="0 6 * * *", revision="1",
                                                          request_id="second"),
              token_from=PAGE)
    assert "was changed since you opened it" in flashes(second)
    assert row(clean_db)[0] == "0 5 * * *"
    # a removal at the old revision is refused the same way
    post_form(second, f"{PAGE}/nightly_report/remove",
              {"reason": "x", "request_id": "rm-4", "revision": "1"}, token_from=PAGE)
    assert "was changed since you opened it" in flashes(second)
    assert row(clean_db)[0] == "0 5 * * *"
    assert scalar(clean_db, "SELECT count(*) FROM job_audit") == 1


def test_a_deploy_changing_the_declaration_refuses_a_form_opened_before(admin, post_form,
                                                                        clean_db):
    published(clean_db)
    reg = Registry()
    job("nightly_report", registry=reg, schedule="0 2 * * *")(lambda c, p: None)
    job("send_digest", registry=reg)(lambda c, p: None)
    published(clean_db, reg)
    post_form(admin, f"{PAGE}/nightly_report/edit", form(revision="1"), token_from=PAGE)
    assert "was changed since you opened it" in flashes(admin)
    assert row(clean_db)[0] == "0 2 * * *"


@pytest.mark.parametrize("user", ["vera", "otto"])
def test_viewers_and_operators_see_no_edit_forms_and_their_posts_get_403(
        app, post_form, clean_db, user):
    published(clean_db)
    client = app.test_client()
    assert login(client, user).status_code == 303
    tree = parse(client.get(PAGE).get_data(as_text=True))
    assert tree.all(lambda e: e.attrs.get("data-action") in
                    ("edit_schedule", "remove_schedule", "add_schedule")) == []
    assert tree.one("schedule-source").text() == "declared in code"  # read-only, shown
    before = row(clean_db)
    for url, fields in ((f"{PAGE}/add", form(job_type="send_digest")),
                        (f"{PAGE}/nightly_report/edit", form(revision="1")),
                        (f"{PAGE}/nightly_report/remove", form(revision="1"))):
        assert post_form(client, url, fields, token_from=PAGE).status_code == 403, url
    assert row(clean_db) == before
    assert scalar(clean_db, "SELECT count(*) FROM job_schedules") == 1
    assert scalar(clean_db, "SELECT count(*) FROM job_audit") == 0


def test_an_admin_sees_the_forms(admin, clean_db):
    published(clean_db)
    tree = parse(admin.get(PAGE).get_data(as_text=True))
    assert tree.all(lambda e: e.attrs.get("data-action") == "edit_schedule")
    assert tree.one("schedule-add").all(lambda e: e.tag == "option")[0].text() == "send_digest"


#: Hostile values: each refused in one line naming what, nothing changed.
REFUSED = [
    ({"cron": "* * * * * *"}, "fires more than once a minute"),
    ({"cron": "*/5 * * * * *"}, "fires more than once a minute"),
    ({"cron": "61 * * * *"}, "invalid schedule '61 * * * *'"),
    ({"cron": "0 0 30 2 *"}, "invalid schedule '0 0 30 2 *'"),
    ({"cron": ""}, "a cron expression is 1 to 200 characters"),
    ({"timezone": "../../etc"}, "unknown schedule_tz '../../etc'"),
    ({"timezone": "/etc/passwd"}, "unknown schedule_tz '/etc/passwd'"),
    ({"timezone": "Mars/Olympus"}, "unknown schedule_tz 'Mars/Olympus'"),
    ({"payload": "[1, 2]"}, "payload must be a JSON object"),
    ({"payload": "{nope"}, "payload: not JSON"),
    ({"payload": '{"n": NaN}'}, "JSON has no NaN or infinity"),
    ({"payload": "[" * 100_00 + "]" * 100_00}, "not JSON"),
]


@pytest.mark.parametrize(("fields", "message"), REFUSED,
                         ids=[m[:30] for _, m in REFUSED])
def test_a_value_the_worker_would_refuse_is_refused_in_one_line(admin, post_form, clean_db,
                                                                fields, message):
    published(clean_db)
    before = row(clean_db)
    response = post_form(admin, f"{PAGE}/nightly_report/edit",
                         form(revision="1", **fields), token_from=PAGE)
    assert response.status_code == 303
    said = flashes(admin)
    assert said.startswith("Nothing was changed: ") and message in said, said
    assert "\n" not in said
    assert row(clean_db) == before
    assert scalar(clean_db, "SELECT count(*) FROM job_audit") == 0


def test_a_payload_over_the_enqueue_bound_is_refused(admin, post_form, clean_db, monkeypatch):
    monkeypatch.setenv("JOBWARDEN_MAX_PAYLOAD_BYTES", "1000")
    published(clean_db)
    post_form(admin, f"{PAGE}/nightly_report/edit",
              form(revision="1", payload=json.dumps({"blob": "x" * 2000})), token_from=PAGE)
    assert "over the 1000-byte limit" in flashes(admin)
    assert row(clean_db)[0] == "0 3 * * *"


def test_a_payload_of_10_mb_is_refused_before_it_is_read(admin, post_form, clean_db):
    published(clean_db)
    response = post_form(admin, f"{PAGE}/nightly_report/edit",
                         form(revision="1", payload=json.dumps({"blob": "x" * 10_000_000})),
                         token_from=PAGE)
    assert response.status_code == 413
    assert "nothing was read or changed" in response.get_data(as_text=True)
    assert row(clean_db)[0] == "0 3 * * *"


def test_html_in_names_is_refused_and_html_in_a_payload_is_shown_as_text(admin, post_form,
                                                                         clean_db):
    published(clean_db)
    post_form(admin, f"{PAGE}/add", form(job_type="<script>alert(1)</script>"),
              token_from=PAGE)
    assert "invalid job type name" in flashes(admin)
    assert scalar(clean_db, "SELECT count(*) FROM job_schedules") == 1
    post_form(admin, f"{PAGE}/nightly_report/edit",
              form(revision="1", payload='{"x": "<img src=x onerror=alert(1)>"}'),
              token_from=PAGE)
    page = admin.get(PAGE).get_data(as_text=True)
    # in the edit form's payload, as JSON whose < is escaped (and reads back the same)
    assert "<img src=x" not in page and "\\u003cimg src=x" in page


def test_an_unknown_job_type_cannot_get_a_schedule(admin, post_form, clean_db):
    published(clean_db)
    post_form(admin, f"{PAGE}/add", form(job_type="nobody_runs_this"), token_from=PAGE)
    assert "no worker has published job type 'nobody_runs_this'" in flashes(admin)
    assert scalar(clean_db, "SELECT count(*) FROM job_schedules") == 1


def test_turning_catch_up_on_after_ten_years_down_enqueues_no_backlog(admin, post_form,
                                                                       clean_db, conn):
    published(clean_db)
    with psycopg.connect(clean_db) as c:
        c.execute("UPDATE job_schedules SET next_run_at = now() - interval '10 years'")
    post_form(admin, f"{PAGE}/nightly_report/edit",
              form(cron="* * * * *", catch_up="y", revision="1"), token_from=PAGE)
    assert row(clean_db)[2] is True
    ran = run_once(conn, app_registry())
    assert sum(len(ids) for ids in ran.values()) <= 1  # the save starts from its next tick
    assert scalar(clean_db, "SELECT next_run_at > now() - interval '2 minutes' "
                            "FROM job_schedules")


def test_the_page_previews_five_runs_in_the_zone_with_dst_days_marked(admin, post_form,
                                                                      clean_db):
    published(clean_db)
    # the last Sunday of March and of October: every tick is on a DST day in Berlin
    post_form(admin, f"{PAGE}/nightly_report/edit",
              form(cron="30 2 * 3,10 0L", timezone="Europe/Berlin", revision="1"),
              token_from=PAGE)
    ticks = schedule_row(admin, "nightly_report").all("preview-tick")
    assert len(ticks) == 5
    for tick in ticks:
        assert tick.one("preview-dst").text() in ("DST day: UTC+01:00 → UTC+02:00",
                                                  "DST day: UTC+02:00 → UTC+01:00")
        assert tick.text().startswith("Sun ")


def test_the_preview_fragment_shows_runs_or_the_workers_refusal(admin):
    tree = parse(admin.get(f"{PAGE}/preview?cron=0+12+*+*+*&timezone=Asia/Tokyo")
                 .get_data(as_text=True))
    ticks = tree.all("preview-tick")
    assert len(ticks) == 5 and all(" 12:00:00 JST" in t.text() for t in ticks)
    assert tree.all("preview-dst") == []
    for query, said in (("cron=*+*+*+*+*+*&timezone=UTC", "fires more than once a minute"),
                        ("cron=0+3+*+*+*&timezone=../../etc", "unknown schedule_tz"),
                        ("cron=" + "1" * 300 + "&timezone=UTC", "too long")):
        error = parse(admin.get(f"{PAGE}/preview?{query}").get_data(as_text=True)).one(
            "schedule-preview-error")
        assert said in error.text(), query


def test_an_edit_starts_the_schedule_from_its_next_tick_on_the_database_clock(
        admin, post_form, clean_db):
    published(clean_db)
    post_form(admin, f"{PAGE}/nightly_report/edit", form(cron="0 0 1 1 *", revision="1"),
              token_from=PAGE)
    following = scalar(clean_db, "SELECT next_run_at FROM job_schedules")
    now = datetime.now(UTC)
    assert following == datetime(now.year + 1, 1, 1, tzinfo=UTC) or (
        now < datetime(now.year, 1, 1, tzinfo=UTC) + timedelta(minutes=1))


def ticks(url: str, job_type: str) -> list[datetime]:
    """The ticks a type's schedule enqueued jobs for (its jobs' available_at)."""
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute(
            "SELECT available_at FROM background_jobs WHERE type = %s "
            "AND idempotency_key LIKE 'schedule:%%' ORDER BY available_at", (job_type,))]


def test_a_running_worker_follows_console_edits_without_a_restart(admin, post_form,
                                                                  clean_db):
    """A real worker process: a console edit of a code schedule's cron makes it enqueue on
    the new one; removing the edit and deleting a console schedule make them stop. Stopped
    is shown by a witness schedule of the same cron: once it has a tick after the removal,
    the others would have had it too."""
    env = {**os.environ, "DATABASE_URL": clean_db, "JOBWARDEN_DUTY_INTERVAL": "0.2"}
    proc = start_process(
        [sys.executable, "-m", "jobwarden.worker.cli", "--log-level", "WARNING", "worker",
         "--app", "tests.apps.schedule_edit_app", "--poll-interval", "0.2"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM job_types WHERE type IN "
                                          "('edited', 'witness', 'added')") == 3
                 and scalar(clean_db, "SELECT count(*) FROM job_schedules") == 1,
                 timeout=60, message="the app's types and schedule to be published")
        post_form(admin, f"{PAGE}/edited/edit", form(cron="* * * * *", revision="1"),
                  token_from=PAGE)
        for job_type in ("witness", "added"):
            post_form(admin, f"{PAGE}/add", form(job_type=job_type, cron="* * * * *"),
                      token_from=PAGE)
        assert scalar(clean_db, "SELECT count(*) FROM job_schedules WHERE edited_by = 'ada'") \
            == 3, flashes(admin)
        # Every minute now. Their first tick is made due at once (not up to a minute
        # away): the worker, reading the rows each pass, enqueues it and moves each to the
        # edited cron's next minute, not the code's next year.
        with psycopg.connect(clean_db, autocommit=True) as db:
            db.execute("UPDATE job_schedules SET next_run_at = date_trunc('minute', now()) "
                       "WHERE type IN ('edited', 'added')")
        wait_for(lambda: ticks(clean_db, "edited") and ticks(clean_db, "added"),
                 timeout=60, message="the edited cron's first tick")
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM job_schedules WHERE type IN "
                                          "('edited', 'added') AND next_run_at > now() "
                                          "AND next_run_at <= now() + interval '1 minute'")
                 == 2, timeout=30, message="each to be moved to its edited cron's next tick")
        post_form(admin, f"{PAGE}/edited/remove", form(revision="2"), token_from=PAGE)
        post_form(admin, f"{PAGE}/added/remove", form(revision="1"), token_from=PAGE)
        removed = scalar(clean_db, "SELECT now()")
        assert row(clean_db, "edited")[0] == "0 0 1 1 *" and row(clean_db, "added") is None
        wait_for(lambda: [t for t in ticks(clean_db, "witness") if t > removed],
                 timeout=120, message="a witness tick after the removal")
        assert [t for t in ticks(clean_db, "edited") if t > removed] == []
        assert [t for t in ticks(clean_db, "added") if t > removed] == []
    finally:
        ((_, err),) = stop_processes([proc], signal.SIGTERM)
    assert proc.returncode == 0, err.decode()[-2000:]


@pytest.mark.parametrize("revision", ["99999999999999999999", "\u0661", "\uff11"])
def test_a_revision_past_bigint_or_in_other_digits_is_refused_and_changes_nothing(
        admin, post_form, clean_db, revision):
    """Not a 500 (past bigint) nor revision 1 (Arabic-Indic and fullwidth digits, which
    isdigit() and int() read): the form is incomplete and nothing changes."""
    published(clean_db)
    before = row(clean_db)
    for path, fields in ((f"{PAGE}/nightly_report/edit", form(revision=revision)),
                         (f"{PAGE}/nightly_report/remove",
                          {"reason": "x", "request_id": uuid.uuid4().hex,
                           "revision": revision})):
        response = post_form(admin, path, fields, token_from=PAGE)
        assert response.status_code == 303, path
        said = flashes(admin)
        assert "The form was incomplete" in said or "check revision" in said, (path, said)
    assert row(clean_db) == before
