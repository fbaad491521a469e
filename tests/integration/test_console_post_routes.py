"""Every POST route of the console, read from the app's url_map (a route added later is
walked too, or this test fails until it is listed): a viewer's POST is refused with 403,
a POST without the CSRF token with 400, and neither writes anything in any table."""

from __future__ import annotations

import psycopg
import pytest

from tests.console_support import PASSWORD, csrf_token, login
from tests.integration.test_console_schedules import publish_report_schedule

FULL_FORM = {"reason": "walking every route", "request_id": "walk-1", "when": "now",
             "username": "mallory", "password": "a long new password", "role": "admin",
             "access": "enabled", "action": "retry", "all_matching": "1"}
#: Sign-in and sign-out are for everyone, viewers too: only the CSRF walk covers them.
EVERY_USER = {"jobwarden.auth.login", "jobwarden.auth.logout"}


def routes(app, seeded: dict) -> dict[str, list[tuple[str, dict]]]:
    """Each POST endpoint with the URLs (and form fields) to try on it."""
    job, pending, unknown = seeded["failed"], seeded["pending"], seeded["unknown"]
    return {
        "jobwarden.auth.login": [("/login", {"username": "ada", "password": PASSWORD})],
        "jobwarden.auth.logout": [("/logout", {})],
        "jobwarden.queues.queue_action": [("/queues/default/pause", {}),
                                          ("/queues/paused_q/resume", {})],
        "jobwarden.schedules.schedule_action": [("/schedules/nightly_report/pause", {})],
        "jobwarden.schedules.add": [("/schedules/add", {
            "job_type": "nightly_report", "cron": "0 4 * * *", "timezone": "UTC"})],
        "jobwarden.schedules.edit": [("/schedules/nightly_report/edit", {
            "cron": "0 4 * * *", "timezone": "UTC", "payload": "{}", "revision": "1"})],
        "jobwarden.schedules.remove": [("/schedules/nightly_report/remove",
                                        {"revision": "2"})],
        "jobwarden.queues.limit_action": [
            ("/limits/set", {"scope": "queue", "name": "default", "rate": "5/s"}),
            ("/limits/clear", {"scope": "queue", "name": "paused_q"})],
        "jobwarden.actions.job_action": [
            (f"/jobs/{job}/retry", {"expected_status": "failed"}),
            (f"/jobs/{job}/skip", {"expected_status": "failed"}),
            (f"/jobs/{pending}/cancel", {"expected_status": "pending"}),
            (f"/jobs/{unknown}/mark_completed", {}), (f"/jobs/{unknown}/mark_failed", {})],
        "jobwarden.actions.schedule": [(f"/jobs/{pending}/schedule", {})],
        "jobwarden.review.run_reconcilers": [("/review/reconcile", {})],
        "jobwarden.review.decide_group": [("/review/group", {"of": str(unknown),
                                                             "action": "mark_completed"})],
        "jobwarden.users.add": [("/users", {})],
        "jobwarden.users.access": [(f"/users/{seeded['otto_id']}/access", {})],
        "jobwarden.bulk.select": [("/bulk/select", {"job_id": str(job)})],
        "jobwarden.bulk.apply": [(f"/bulk/{seeded['selection']}", {})],
        "jobwarden.bulk.narrow": [(f"/bulk/{seeded['selection']}/narrow", {"type": "x"})],
        "jobwarden.bulk.step": [(f"/bulk/{seeded['started']}/step", {})],
        "jobwarden.bulk.resume": [(f"/bulk/{seeded['started']}/continue", {})],
        "jobwarden.bulk.stop": [(f"/bulk/{seeded['started']}/stop", {})],
        "jobwarden.notifications.add": [("/notifications/targets", {
            "kind": "webhook", "name": "walk", "url": "https://hooks.example.com/x"})],
        "jobwarden.notifications.edit": [(f"/notifications/targets/{seeded['target']}", {
            "name": "walked", "format": "slack", "revision": "1"})],
        "jobwarden.notifications.delete": [
            (f"/notifications/targets/{seeded['target']}/delete", {"revision": "1"})],
        "jobwarden.notifications.test": [("/notifications/test",
                                          {"target": str(seeded["target"])})],
    }


def post_endpoints(app) -> set[str]:
    return {rule.endpoint for rule in app.url_map.iter_rules() if "POST" in rule.methods}


def table_contents(url: str) -> dict[str, str]:
    """Every table's rows, digested: an insert, an update or a delete anywhere shows."""
    with psycopg.connect(url) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1")]
        return {t: conn.execute(f'SELECT count(*) || md5(coalesce(string_agg(x::text, \',\' '
                                f'ORDER BY x::text), \'\')) FROM "{t}" x').fetchone()[0]
                for t in tables}


@pytest.fixture
def seeded(app, make_job, clean_db):
    publish_report_schedule(clean_db)
    with psycopg.connect(clean_db) as conn:
        conn.execute("INSERT INTO queue_controls (queue, paused, changed_by) "
                     "VALUES ('paused_q', true, 'ada')")
        otto_id = conn.execute("SELECT id FROM console_users WHERE username = 'otto'"
                               ).fetchone()[0]
        target = conn.execute("INSERT INTO job_notify_targets (name, kind, url, created_by, "
                              "updated_by) VALUES ('team hook', 'webhook', "
                              "'https://hooks.example.com/t', 'ada', 'ada') RETURNING id"
                              ).fetchone()[0]
    values = {status: make_job(status) for status in ("failed", "pending", "unknown")}
    values["canary"] = [make_job("failed") for _ in range(3)]
    admin = app.test_client()
    assert login(admin, "ada").status_code == 303

    def selection(ids: list[int]) -> str:
        made = admin.post("/bulk/select", data={
            "action": "retry", "job_id": [str(i) for i in ids],
            "csrf_token": csrf_token(admin, "/jobs")})
        return made.headers["Location"].split("/bulk/", 1)[1].split("?")[0]

    # A bulk action started with a canary of one, for the routes that steer one.
    started = selection(values["canary"])
    assert admin.post(f"/bulk/{started}", data={
        "reason": "canary", "request_id": "c", "mode": "canary", "canary": "1",
        "csrf_token": csrf_token(admin, "/jobs")}).status_code == 303
    return {**values, "otto_id": otto_id, "target": target,
            "selection": selection([values["failed"]]),
            "started": started, "admin": admin}


def test_the_walk_lists_every_post_route_of_the_console(app, seeded):
    assert post_endpoints(app) == set(routes(app, seeded))


def test_every_post_route_refuses_a_viewer_with_403_and_writes_nothing(app, seeded, clean_db):
    viewer = app.test_client()
    assert login(viewer, "vera").status_code == 303
    token = csrf_token(viewer, "/jobs")
    before = table_contents(clean_db)
    for endpoint, tries in routes(app, seeded).items():
        if endpoint in EVERY_USER:
            continue
        for url, fields in tries:
            response = viewer.post(url, data={**FULL_FORM, **fields, "csrf_token": token})
            assert response.status_code == 403, (url, response.status_code)
    assert table_contents(clean_db) == before


def test_every_post_route_without_the_csrf_token_gets_400_and_writes_nothing(app, seeded,
                                                                             clean_db):
    admin = seeded["admin"]  # every role, so only the missing token can stop the POST
    before = table_contents(clean_db)
    for tries in routes(app, seeded).values():
        for url, fields in tries:
            for headers in ({}, {"X-CSRFToken": "forged"}):
                response = admin.post(url, data={**FULL_FORM, **fields}, headers=headers)
                assert response.status_code == 400, (url, headers, response.status_code)
    assert table_contents(clean_db) == before
