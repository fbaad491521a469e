"""A search never answers about a value the console does not show: a guess at a secret
the job page shows as [REDACTED] (a payload field, an idempotency key, an error or its code)
gets the same answer whether it is right or wrong, from the search page, the jobs list's
`q=` and `error_code=` filters and a bulk selection of all matching jobs, for every role."""

from __future__ import annotations

import re

import pytest

from jobwarden.console import create_app
from jobwarden.console.data import sample_data
from tests.console_support import login, post_form

STRIPE_KEY = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
WEBHOOK_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

#: (right guess, wrong guess) at each secret the seeded jobs hold.
PAYLOAD_GUESSES = [
    ("customer.cvv=737", "customer.cvv=738"),
    ("password=hunter2", "password=hunter3"),
    ("api_key=abc123", "api_key=abc124"),
    ("card_number=4242424242424242", "card_number=4242424242424243"),
    ("auth.user=bob", "auth.user=eve"),  # under a secret's name: the whole object is hidden
    ("pin=4321", "pin=4322"),
    ("cvc=737", "cvc=738"),  # a number under a secret's name
    (f"note={STRIPE_KEY}", f"note={STRIPE_KEY[:-1]}x"),  # a secret's shape, any name
    (f'note="{STRIPE_KEY}"', f'note="{STRIPE_KEY[:-1]}x"'),
]
KEY_GUESSES = [
    ("key:reset:token=abc123", "key:reset:token=abc124"),
    (f"key:charge:{STRIPE_KEY}", f"key:charge:{STRIPE_KEY[:-1]}x"),
    (f"charge:{STRIPE_KEY}", f"charge:{STRIPE_KEY[:-1]}x"),  # a key without key:
]
ERROR_GUESSES = [
    ("error:4321", "error:4322"),  # a part of a secret the row was written with, unredacted
    ("error:pin=4321", "error:pin=4322"),
    ("error:whsec_MfKQ9r8", "error:whsec_MfKQ9r9"),  # a prefix too short to look secret
    ("error:" + WEBHOOK_SECRET, "error:" + WEBHOOK_SECRET[:-1] + "x"),
]
#: The jobs list's filters: (right, wrong) values of each.
LIST_GUESSES = [
    ("q", "reset:token=abc123", "reset:token=abc124"),
    ("q", f"charge:{STRIPE_KEY}", f"charge:{STRIPE_KEY[:-1]}x"),
    ("error_code", f"DECLINED_{WEBHOOK_SECRET}", f"DECLINED_{WEBHOOK_SECRET[:-1]}x"),
]


@pytest.fixture
def secrets_seeded(engine):
    """Jobs holding secrets, and look-alikes the console does show. The errors are written
    as a row from before a redactor knew their shape would be: unredacted."""
    made = {}
    with engine.begin() as conn:
        def add(name, status="completed", **fields):
            made[name] = sample_data.insert_job(conn, "charge", status, **fields)

        add("cvv", payload={"customer": {"cvv": "737", "name": "Ada"}})
        add("password", payload={"password": "hunter2", "user": "bob"})
        add("api_key", payload={"api_key": "abc123"})
        add("card", payload={"card_number": "4242424242424242"})
        add("auth", payload={"auth": {"user": "bob"}})
        add("pin", payload={"pin": "4321"})
        add("cvc", payload={"cvc": 737})
        add("note", payload={"note": STRIPE_KEY})
        add("reset", idempotency_key="reset:token=abc123")
        add("charge", idempotency_key=f"charge:{STRIPE_KEY}")
        add("declined", "failed", error_code=f"DECLINED_{WEBHOOK_SECRET}",
            error=f"card pin=4321 rejected, signed with {WEBHOOK_SECRET}")
        add("visible", payload={"customer": {"id": 42}}, idempotency_key="crm:42")
    return made


@pytest.fixture(params=["vera", "otto", "ada"])
def searcher(request, clean_db, users):
    """A client signed in as a viewer, an operator and an admin in turn: each sees secrets
    as [REDACTED], so none may learn them by searching."""
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": clean_db})
    client = app.test_client()
    assert login(client, request.param).status_code == 303
    yield client
    app.extensions["jobwarden_db"].dispose()


def answer(response) -> tuple[int, list[int]]:
    """What a page tells about a search: its status and the jobs it lists."""
    return response.status_code, [int(i) for i in re.findall(
        r'<tr data-job-id="(\d+)"', response.get_data(as_text=True))]


def search(client, q: str):
    return answer(client.get("/search", query_string={"q": q}))


def test_what_the_console_shows_is_still_found(searcher, secrets_seeded):
    """The control: the searches below answer at all."""
    j = secrets_seeded
    assert search(searcher, "customer.id=42") == (200, [j["visible"]])
    assert search(searcher, "customer.name=Ada") == (200, [j["cvv"]])
    assert search(searcher, "user=bob") == (200, [j["password"]])
    assert search(searcher, "key:crm:42") == (200, [j["visible"]])
    assert search(searcher, "error:rejected, signed") == (200, [j["declined"]])
    assert search(searcher, "error:declined_") == (200, [j["declined"]])
    assert answer(searcher.get("/jobs", query_string={"q": "crm:42"})) == (200, [j["visible"]])


@pytest.mark.parametrize("right, wrong", PAYLOAD_GUESSES + KEY_GUESSES + ERROR_GUESSES)
def test_a_search_gives_no_sign_whether_a_guessed_secret_is_right(searcher, secrets_seeded,
                                                                   right, wrong):
    said = search(searcher, right)
    assert said == search(searcher, wrong) and said[1] == []


def test_a_refused_search_says_why_in_one_line(searcher, secrets_seeded):
    html = searcher.get("/search", query_string={"q": "customer.cvv=737"}).get_data(
        as_text=True)
    problem = re.search(r'data-testid="search-problem">([^<]*)<', html).group(1)
    assert "[REDACTED]" in problem and "\n" not in problem.strip()


@pytest.mark.parametrize("name, right, wrong", LIST_GUESSES)
def test_the_jobs_list_gives_no_sign_whether_a_guessed_secret_is_right(
        searcher, secrets_seeded, name, right, wrong):
    def listed(value):
        return answer(searcher.get("/jobs", query_string={name: value}))

    said = listed(right)
    assert said == listed(wrong) and said[1] == []


def test_a_failed_group_gives_no_sign_whether_a_guessed_code_is_right(searcher,
                                                                      secrets_seeded):
    def grouped(code):
        response = searcher.get("/failed/group", query_string={"code": code})
        # The group's jobs, and its table of types (the seeded job's type is "charge").
        return *answer(response), "charge" in response.get_data(as_text=True)

    said = grouped(f"DECLINED_{WEBHOOK_SECRET}")
    assert said == grouped(f"DECLINED_{WEBHOOK_SECRET[:-1]}x") and said[1:] == ([], False)


@pytest.mark.parametrize("name, right, wrong", LIST_GUESSES)
def test_a_bulk_selection_gives_no_sign_whether_a_guessed_secret_is_right(
        clean_db, users, secrets_seeded, name, right, wrong):
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": clean_db})
    operator = app.test_client()
    assert login(operator, "otto").status_code == 303

    def selected(value):
        response = post_form(operator, "/bulk/select", {"action": "cancel" if name == "q"
                                                        else "skip", "all_matching": "1",
                                                        name: value})
        page = operator.get(response.headers["Location"]).get_data(as_text=True)
        return response.status_code, "No jobs selected" in page

    said = selected(right)
    assert said == selected(wrong) and said[1]
    app.extensions["jobwarden_db"].dispose()
