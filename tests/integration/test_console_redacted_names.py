"""A job type or queue name the console shows as [REDACTED] cannot be confirmed by
guessing it: every route that takes a type or a queue from the request (a filter, a path
segment, a fragment, a form) gives a right guess and a wrong one the same answer, as the
jobs list does (console/data/queries.py, `not_shown`)."""

from __future__ import annotations

import difflib
import re

import psycopg
import pytest

from jobwarden.console import create_app
from jobwarden.console.data import sample_data
from tests.console_support import csrf_token, login

SECRET_TYPE = "sync.sk_live_abcdefghijklmnopqrstuvwx"
SECRET_QUEUE = "tenant.ghp_abcdefghijklmnopqrstuvwxyz0123456789"
#: Wrong guesses, of the same shape (the pages show both as the same [REDACTED] text).
WRONG_TYPE = SECRET_TYPE[:-1] + "y"
WRONG_QUEUE = SECRET_QUEUE[:-1] + "8"


@pytest.fixture
def secret_names(engine, clean_db):
    """Failed and completed jobs of a type and a queue whose names hold a secret's shape,
    a day of the type's executions and a schedule of it."""
    with engine.begin() as conn:
        for _ in range(2):
            sample_data.insert_job(conn, SECRET_TYPE, "failed", queue=SECRET_QUEUE,
                                   error_code="BOOM")
        sample_data.insert_job(conn, SECRET_TYPE, "completed", queue=SECRET_QUEUE)
        sample_data.seed_duration_history(conn, SECRET_TYPE, queue=SECRET_QUEUE)
    with psycopg.connect(clean_db) as conn:
        conn.execute("INSERT INTO job_schedules (type, cron, timezone, next_run_at, "
                     "published_by) VALUES (%s, '0 3 * * *', 'UTC', now() + interval '1 day', "
                     "'w0')", (SECRET_TYPE,))


@pytest.fixture(params=["vera", "otto"])
def guesser(request, clean_db, users):
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": clean_db})
    client = app.test_client()
    assert login(client, request.param).status_code == 303
    yield client
    app.extensions["jobwarden_db"].dispose()


@pytest.fixture
def operator_guesser(clean_db, users):
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": clean_db})
    client = app.test_client()
    assert login(client, "otto").status_code == 303
    yield client
    app.extensions["jobwarden_db"].dispose()


def answer(response) -> tuple[int, str]:
    """What a page tells: its status and its body without what changes between two
    requests (CSRF tokens, request ids, times and ages)."""
    body = response.get_data(as_text=True)
    body = re.sub(r'name="(csrf_token|request_id)"([^>]*)value="[^"]*"', r'name="\1"\2', body)
    body = re.sub(r'value="[^"]*"([^>]*)name="(csrf_token|request_id)"', r'\1name="\2"', body)
    body = re.sub(r'"X-CSRFToken": "[^"]*"', '"X-CSRFToken": ""', body)
    body = re.sub(r"<time[^>]*>.*?</time>", "<time>", body, flags=re.S)
    body = re.sub(r"\b\d+(\.\d+)?\s*(ms|s|m|h|d)( \d+(ms|s|m|h))* ago\b", "ago", body)
    return response.status_code, body


def differences(one: tuple[int, str], other: tuple[int, str]) -> str:
    return "\n".join(difflib.unified_diff(one[1].splitlines(), other[1].splitlines(),
                                          lineterm=""))


#: (path, query) for the right guess; the wrong guess swaps the names.
GET_ROUTES = [
    ("/failed", {"type": SECRET_TYPE}),
    ("/failed/group", {"type": SECRET_TYPE}),
    ("/failed/group", {"type": SECRET_TYPE, "code": "BOOM"}),
    (f"/types/{SECRET_TYPE}", {}),
    (f"/types/{SECRET_TYPE}", {"range": "7d"}),
    ("/_overview/trends", {"type": SECRET_TYPE}),
    ("/_overview/trends", {"queue": SECRET_QUEUE}),
    ("/_overview/trends", {"queue": SECRET_QUEUE, "range": "24h"}),
    ("/", {"type": SECRET_TYPE}),
    ("/", {"queue": SECRET_QUEUE}),
    ("/jobs", {"type": SECRET_TYPE}),
    ("/jobs", {"queue": SECRET_QUEUE}),
]


def wrong(text: str) -> str:
    return text.replace(SECRET_TYPE, WRONG_TYPE).replace(SECRET_QUEUE, WRONG_QUEUE)


@pytest.mark.parametrize("htmx", [False, True], ids=["page", "htmx"])
@pytest.mark.parametrize("path, query", GET_ROUTES,
                         ids=[f"{p.split('.')[0]}?{'&'.join(q)}" for p, q in GET_ROUTES])
def test_a_right_and_a_wrong_guess_at_a_redacted_name_get_the_same_page(
        guesser, secret_names, path, query, htmx):
    headers = {"HX-Request": "true"} if htmx else {}
    right = answer(guesser.get(path, query_string=query, headers=headers))
    wrong_guess = answer(guesser.get(wrong(path), query_string={k: wrong(v) for k, v
                                                                 in query.items()},
                                     headers=headers))
    assert right == wrong_guess, differences(right, wrong_guess)
    assert right[0] in (400, 404), right[0]


def test_what_the_pages_show_as_it_is_is_still_answered(guesser, engine, clean_db):
    """The control: a type and a queue shown as they are still filter and have a page."""
    with engine.begin() as conn:
        sample_data.insert_job(conn, "sync.plain", "failed", queue="tenant.plain",
                               error_code="BOOM")
    assert "BOOM" in guesser.get("/failed", query_string={"type": "sync.plain"}).get_data(
        as_text=True)
    assert guesser.get("/types/sync.plain").status_code == 200
    trends = guesser.get("/_overview/trends", query_string={"queue": "tenant.plain"})
    assert trends.status_code == 200
    assert 'value="tenant.plain" selected' in trends.get_data(as_text=True)


def posted(client, path: str, data: dict) -> tuple[int, str]:
    """A POST's status and the messages of the page it leads to."""
    response = client.post(path, data={**data, "csrf_token": csrf_token(client, "/queues")})
    if response.status_code != 303:
        return answer(response)
    page = client.get(response.headers["Location"]).get_data(as_text=True)
    return 303, " ".join(re.findall(r'class="flash[^"]*"[^>]*>(.*?)<', page, flags=re.S))


POST_ROUTES = [
    (f"/queues/{SECRET_QUEUE}/pause", {}),
    (f"/queues/{SECRET_QUEUE}/resume", {}),
    ("/limits/set", {"scope": "queue", "name": SECRET_QUEUE, "max_concurrency": "2"}),
    ("/limits/clear", {"scope": "type", "name": SECRET_TYPE}),
    (f"/schedules/{SECRET_TYPE}/pause", {}),
    (f"/schedules/{SECRET_TYPE}/run", {}),
]


@pytest.mark.parametrize("path, data", POST_ROUTES, ids=[p for p, _ in POST_ROUTES])
def test_an_operators_action_on_a_guessed_redacted_name_answers_the_same_and_does_nothing(
        operator_guesser, secret_names, clean_db, path, data):
    def audited() -> int:
        with psycopg.connect(clean_db) as conn:
            return conn.execute("SELECT count(*) FROM job_audit").fetchone()[0]

    base = {"reason": "guessing", "request_id": "g-1"}
    right = posted(operator_guesser, path, {**base, **data})
    wrong_guess = posted(operator_guesser, wrong(path),
                         {**base, "request_id": "g-2", **{k: wrong(v) for k, v in data.items()}})
    assert right == wrong_guess, differences(right, wrong_guess)
    assert audited() == 0


def test_narrowing_a_selection_to_a_guessed_redacted_type_answers_the_same(
        operator_guesser, secret_names):
    client = operator_guesser
    token = csrf_token(client, "/jobs")
    selected = client.post("/bulk/select", data={"csrf_token": token, "action": "retry",
                                                 "all_matching": "1", "status": "failed"})
    review = selected.headers["Location"].split("?")[0]

    def narrowed(job_type: str):
        response = client.post(f"{review}/narrow", data={"csrf_token": token,
                                                         "type": job_type})
        if response.status_code != 303:
            return answer(response)
        # Back to this review (nothing narrowed), or on to a new selection's.
        return 303, response.headers["Location"].split("?")[0] == review

    assert narrowed(SECRET_TYPE) == narrowed(WRONG_TYPE)
    assert narrowed("sync.none") == (303, True)  # the control: a type none of them is
