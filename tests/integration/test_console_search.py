"""Search: each form finds exactly its jobs; payload and error searches scan one window of
ids and say which; unreadable input is a 400 that names the problem and changes nothing."""

from __future__ import annotations

import re

import psycopg
import pytest

from jobwarden.console import create_app
from jobwarden.console.data import sample_data
from tests.console_support import login

WINDOW = 10


@pytest.fixture
def searched(app, engine):
    """Jobs whose payloads, keys and errors the searches below look for, in id order."""
    made = {}
    with engine.begin() as conn:
        def add(name, status="completed", **fields):
            made[name] = sample_data.insert_job(conn, "sync_crm", status, **fields)

        add("old_flat", payload={"customer_id": 42})  # first: outside a window of 10
        for n in range(WINDOW):
            add(f"filler{n}", payload={"customer": {"id": 1000 + n}})
        add("flat", payload={"customer_id": 42}, idempotency_key="crm:42")
        add("nested", payload={"customer": {"id": 42, "name": "Ada"}})
        add("nested_text", payload={"customer": {"id": "42"}})
        add("other", payload={"customer": {"id": 43}, "items": [{"sku": "A-1"}]})
        add("failed", "failed", payload={"n": 1}, error_code="AUTH_FAILED",
            error="SMTP 535 authentication failed for 100% of tries")
        add("pending_key", "pending", payload={"flag": True}, idempotency_key="crm:42")
    return made


def search(client, q: str, **args):
    return client.get("/search", query_string={"q": q, **args})


def found(response) -> list[int]:
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    return [int(i) for i in re.findall(r'<tr data-job-id="(\d+)"',
                                       response.get_data(as_text=True))]


@pytest.fixture
def small_window(clean_db, users):
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": clean_db,
                      "SEARCH_WINDOW": WINDOW})
    client = app.test_client()
    assert login(client, "vera").status_code == 303  # a viewer may search
    yield client
    app.extensions["jobwarden_db"].dispose()


def test_each_form_finds_exactly_its_jobs(small_window, searched):
    j = searched
    assert found(search(small_window, str(j["nested"]))) == [j["nested"]]
    assert found(search(small_window, f"#{j['old_flat']}")) == [j["old_flat"]]
    # a key over every job, live or finished
    assert found(search(small_window, "key:crm:42")) == [j["pending_key"], j["flat"]]
    assert found(search(small_window, "crm:42")) == [j["pending_key"], j["flat"]]
    assert found(search(small_window, "customer_id=42")) == [j["flat"]]
    assert found(search(small_window, "customer.id=42")) == [j["nested_text"], j["nested"]]
    assert found(search(small_window, 'customer.id="42"')) == [j["nested_text"]]
    assert found(search(small_window, "items.0.sku=A-1")) == [j["other"]]
    assert found(search(small_window, "flag=true")) == [j["pending_key"]]
    assert found(search(small_window, "error:authentication FAILED")) == [j["failed"]]
    assert found(search(small_window, "error:auth_failed")) == [j["failed"]]  # the code
    assert found(search(small_window, "error:100%")) == [j["failed"]]
    assert found(search(small_window, "error:100_")) == []  # _ is no wildcard
    assert found(search(small_window, "customer.id=44")) == []


def test_a_payload_search_names_its_window_and_reaches_older_ones(small_window, searched):
    response = search(small_window, "customer_id=42")
    html = response.get_data(as_text=True)
    newest = searched["pending_key"]
    assert f'data-testid="searched-to">#{newest}<' in html
    assert f'data-testid="searched-from">#{newest - WINDOW + 1}<' in html
    assert "the 10 newest jobs" in html
    older = re.search(r'href="([^"]+)" data-testid="older-window"', html).group(1)
    older = small_window.get(older.replace("&amp;", "&"))
    assert found(older) == [searched["old_flat"]]
    assert f'data-testid="searched-to">#{newest - WINDOW}<' in older.get_data(as_text=True)
    # A forged position cannot widen the window: floor below it is raised to it.
    wide = search(small_window, "customer_id=42", before=newest + 1, floor=1)
    assert found(wide) == [searched["flat"]]


def test_more_matches_than_a_page_continue_in_the_same_window(engine, clean_db, users):
    with engine.begin() as conn:
        ids = [sample_data.insert_job(conn, "t", "completed", payload={"k": 1})
               for _ in range(7)]
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": clean_db,
                      "SEARCH_WINDOW": 5, "PAGE_SIZE": 2})
    client = app.test_client()
    login(client, "vera")
    seen, url = [], "/search?q=k%3D1"
    while url:
        response = client.get(url)
        seen += found(response)
        more = re.search(r'href="([^"]+)" rel="next" data-testid="more-matches"',
                         response.get_data(as_text=True))
        url = more.group(1).replace("&amp;", "&") if more else None
    assert seen == ids[::-1][:5]  # the window: the 5 newest, two a page
    app.extensions["jobwarden_db"].dispose()


def fingerprint(url: str) -> tuple:
    with psycopg.connect(url) as conn:
        return conn.execute("""
            SELECT (SELECT count(*) FROM background_jobs),
                   (SELECT md5(string_agg(j::text, '' ORDER BY id)) FROM background_jobs j),
                   (SELECT count(*) FROM job_audit), (SELECT count(*) FROM console_selections)
        """).fetchone()


@pytest.mark.parametrize("args, problem", [
    ({"q": "x" * 201}, "at most 200 characters"),
    ({"q": "a..b=1"}, "Write a payload path"),
    ({"q": "a=[1]"}, "not a list or an object"),
    ({"q": "line\nbreak"}, "control characters"),
    ({"q": "123456789012345678901234567890"}, "No job has the id"),
    ({"q": "customer_id=42", "before": "abc"}, "is not a job id"),
    ({"q": "customer_id=42", "floor": "-3"}, "is not a job id"),
    ({"q": "customer_id=42", "before": "99999999999999999999"}, "is not a job id"),
    # JSON escapes of what a jsonb value cannot hold: a NUL, a lone surrogate.
    ({"q": 'a="\\u0000"'}, "cannot hold"),
    ({"q": 'a="x\\u0000y"'}, "cannot hold"),
    ({"q": 'a="\\ud800"'}, "cannot hold"),
    ({"q": 'a="\\uDC00x"'}, "cannot hold"),
    ({"q": 'a="\\ude00\\ud83d"'}, "cannot hold"),  # a pair the wrong way round
])
def test_unreadable_input_is_a_400_that_says_why_and_changes_nothing(
        small_window, searched, clean_db, args, problem):
    before = fingerprint(clean_db)
    response = small_window.get("/search", query_string=args)
    assert response.status_code == 400
    html = response.get_data(as_text=True)
    assert problem in html and 'data-testid="search-problem"' in html
    assert fingerprint(clean_db) == before


@pytest.mark.parametrize("q", [
    "customer_id=1'; DROP TABLE background_jobs; --",
    "key:' OR '1'='1",
    "error:%' OR 1=1 --",
    "a.b=\\x00",
    "'); DELETE FROM job_audit; --",
])
def test_sql_in_the_search_is_text_to_find_and_changes_nothing(
        small_window, searched, clean_db, q):
    before = fingerprint(clean_db)
    assert found(search(small_window, q)) == []
    assert fingerprint(clean_db) == before


def test_a_json_escaped_pair_of_surrogates_is_one_character_to_find(small_window, searched):
    """The control for the lone surrogates refused above: a pair is an emoji."""
    assert search(small_window, 'a="\\ud83d\\ude00"').status_code == 200


def test_a_nul_character_is_refused_before_any_search(small_window, searched, clean_db):
    before = fingerprint(clean_db)
    assert search(small_window, "key:a\x00b").status_code == 400
    assert fingerprint(clean_db) == before


def test_search_is_in_the_navigation_and_needs_a_sign_in(client, viewer):
    assert 'href="/search"' in viewer.get("/").get_data(as_text=True)
    anonymous = client.application.test_client()
    assert anonymous.get("/search?q=1").status_code in (302, 303)


def test_a_search_that_outlasts_its_time_limit_is_stopped_with_one_line(
        searched, clean_db, users):
    """Held up by a lock (so it outlasts any limit, whatever the machine's load), a search
    stops at SEARCH_SECONDS and says so in one line; released, the same search answers on
    the same pooled connections (the limit is the search's own, not theirs)."""
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": clean_db,
                      "SEARCH_WINDOW": WINDOW, "SEARCH_SECONDS": 1.0,
                      # The navigation's SLA badge reads jobs: read it once, before the lock.
                      "SLA_BADGE_SECONDS": 3600})
    client = app.test_client()
    assert login(client, "vera").status_code == 303
    assert found(search(client, "customer_id=42")) == [searched["flat"]]
    with psycopg.connect(clean_db) as locker:
        # A search that never stopped would hang the test: the lock lets go in any case.
        locker.execute("SET idle_in_transaction_session_timeout = '30s'")
        locker.execute("LOCK TABLE background_jobs IN ACCESS EXCLUSIVE MODE")
        for q in ("customer_id=42", "key:crm:42"):
            response = search(client, q)
            assert response.status_code == 503, q
            problem = re.search(r'data-testid="search-problem">([^<]*)<',
                                response.get_data(as_text=True)).group(1)
            assert "took longer than 1 s" in problem and "\n" not in problem.strip(), problem
    assert found(search(client, "customer_id=42")) == [searched["flat"]]
    assert found(search(client, "key:crm:42")) == [searched["pending_key"], searched["flat"]]
    app.extensions["jobwarden_db"].dispose()
