"""Malformed input anywhere — a NUL in a filter or form field, an id beyond bigint — is a
400 or 404, never a 500, and changes nothing."""

from __future__ import annotations

import pytest

from tests.helpers import scalar
from tests.integration.test_console_security import every_get_path

NUL = "\x00"
BIG = "9223372036854775808"  # one past the largest bigint
FILTERS = ("queue", "type", "status", "error_code", "q", "before", "after", "limit", "code",
           "actor", "action", "job", "next")


def test_a_nul_in_any_filter_of_any_page_is_not_a_500(app, operator):
    for path in every_get_path(app):
        for name in FILTERS:
            response = operator.get(path, query_string={name: f"a{NUL}b"})
            assert response.status_code < 500, (path, name, response.status_code)


@pytest.mark.parametrize("digits", ["0" * 5000 + "1", "1" * 5000])
def test_an_id_of_thousands_of_digits_in_any_filter_of_any_page_is_not_a_500(
        app, operator, digits):
    """Past 4,300 digits Python's int() raises: such an id names nothing, like one past
    bigint."""
    for path in every_get_path(app):
        for name in (*FILTERS, "flow", "batch", "of"):
            response = operator.get(path, query_string={name: digits})
            assert response.status_code < 500, (path, name, response.status_code)


@pytest.mark.parametrize("path", [f"/jobs/{BIG}", f"/jobs/{BIG}/_live", "/jobs/99999999999999999999999",
                                  f"/jobs?before={BIG}", f"/audit?job={BIG}",
                                  f"/review?before={BIG}", f"/users/{BIG}/access"])
def test_ids_beyond_bigint_are_not_a_500(app, client, login, path):
    login(client, "ada")
    response = client.get(path)
    assert response.status_code in (200, 404, 405), (path, response.status_code)


@pytest.mark.parametrize("value", ["\u0661", "\uff11", "\u0967", "1_0"])
def test_ids_in_anything_but_ascii_digits_name_nothing(app, client, login, make_job, value):
    """Python's int() (and the router's \\d) read Arabic-Indic, fullwidth and Devanagari
    digits and underscores: none of them names job 1 (or 10) in a route or a filter."""
    for _ in range(10):
        make_job("failed")
    login(client, "ada")
    for path in (f"/jobs/{value}", f"/jobs/{value}/_live"):
        assert client.get(path).status_code == 404, path
    # a keyset position that is no id is no position: the list starts at the newest job
    rows = client.get("/jobs", query_string={"before": value}).get_data(as_text=True)
    assert rows.count("<tr data-job-id=") == 10


def test_a_nul_in_the_login_form_is_a_refusal(client, post_form):
    response = post_form(client, "/login", {"username": f"otto{NUL}", "password": "x"},
                         token_from="/login")
    assert response.status_code in (400, 401)
    response = post_form(client, "/login", {"username": "otto", "password": f"pw{NUL}"},
                         token_from="/login")
    assert response.status_code in (400, 401)


@pytest.mark.parametrize("data", [
    {"reason": f"why{NUL}", "request_id": "r1", "expected_status": "failed"},
    {"reason": "why", "request_id": f"r{NUL}1", "expected_status": "failed"},
    {"reason": "why", "request_id": "r1", "expected_status": f"failed{NUL}"},
])
def test_a_nul_in_an_action_form_is_a_400_or_stored_cleanly(operator, post_form, engine,
                                                             clean_db, data):
    from jobwarden.console.data.sample_data import insert_job

    with engine.begin() as conn:
        job_id = insert_job(conn, status="failed")
    response = post_form(operator, f"/jobs/{job_id}/retry", data)
    assert response.status_code in (303, 400)
    for path in (f"/bulk/select?code=NETWORK_TIMEOUT{NUL}", f"/queues/default{NUL}/pause"):
        assert post_form(operator, path, data).status_code in (303, 400, 404), path
    reasons = scalar(clean_db, "SELECT string_agg(reason, '|') FROM job_audit")
    assert reasons is None or NUL not in reasons


def test_a_nul_in_a_new_user_is_refused(client, login, post_form, clean_db):
    login(client, "ada")
    for data in ({"username": f"eve{NUL}", "password": "long enough pw", "role": "viewer"},
                 {"username": "eve", "password": f"long enough{NUL}", "role": "viewer"},
                 {"username": "eve", "password": "long enough pw", "role": f"viewer{NUL}"}):
        response = post_form(client, "/users", data, token_from="/users")
        assert response.status_code in (303, 400)
    assert scalar(clean_db, "SELECT count(*) FROM console_users WHERE username LIKE 'eve%%'") == 0
