"""Finding an old job: error text by whole words, a time range and a jump to a date or an
id on the jobs list and the search, each one request whatever the number of newer jobs;
hostile input is a one-line 400 that changes nothing."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import psycopg
import pytest

from jobwarden.console import create_app
from jobwarden.console.data import find, sample_data, suggest
from jobwarden.console.data.database import CQ, ConsoleDatabase
from jobwarden.console.data.queries import JobFilter, jobs_page
from tests.console_support import login, post_form


def found(response) -> list[int]:
    assert response.status_code == 200, response.get_data(as_text=True)[:800]
    return [int(i) for i in re.findall(r'<tr data-job-id="(\d+)"',
                                       response.get_data(as_text=True))]


@pytest.fixture
def viewer_of(clean_db, users):
    """A viewer's client of a console with the given settings."""
    apps = []

    def make(**settings):
        app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": clean_db,
                          **settings})
        apps.append(app)
        client = app.test_client()
        assert login(client, "vera").status_code == 303
        return client

    yield make
    for app in apps:
        app.extensions["jobwarden_db"].dispose()


def test_an_error_search_finds_whole_words_only(engine, viewer_of):
    """`error:job 57` finds job 57's errors, not 5707's nor 157's; the rows the database's
    cheap test lets through (more than a page of them, newer) are dropped, and the search
    goes on to the real match below them."""
    with engine.begin() as conn:
        def failed(error, code="BOOM"):
            return sample_data.insert_job(conn, "sync", "failed", error=error, error_code=code)

        hit = failed("job 57 failed: upstream said no")
        upper = failed("JOB  57.", code="X")
        decoys = [failed(f"job {n} failed") for n in (5707, 157, 570, 57_000)]
        decoys += [failed("myjob 57"), failed("job 57b"), failed("a job_57 here")]
        code_hit = failed("nothing", code="JOB_57")
        code_miss = failed("nothing", code="JOB_570")
    client = viewer_of(PAGE_SIZE=2)
    assert found(client.get("/search", query_string={"q": "error:job 57"})) == [upper, hit]
    assert found(client.get("/search", query_string={"q": "error:job_57"})) == [
        code_hit, decoys[-1]]
    assert found(client.get("/search", query_string={"q": "error:job_57*"})) == [
        code_miss, code_hit]
    assert found(client.get("/search", query_string={"q": "error:5707"})) == [decoys[0]]
    # a prefix: "57b" and "myjob 57" have a word starting with 57, "job_57" has none
    assert found(client.get("/search", query_string={"q": "error:57*"})) == [
        decoys[5], decoys[4]]


START = datetime(2021, 3, 1, 9, 0, tzinfo=UTC)
END = datetime(2021, 3, 1, 17, 0, tzinfo=UTC)
MICRO = timedelta(microseconds=1)


@pytest.fixture
def timeline(engine):
    """Jobs in id order, created on both sides of [START, END): at each bound, a
    microsecond before it, and one inserted late (its enqueuing transaction open a while:
    created before END, its id among jobs created after it), less than find.SLACK late.
    (One more than SLACK late may be missed, docs/guide/console.md: the range's ids end
    where the halving meets END + SLACK, and such a job may sit on either side.)"""
    made = {}
    with engine.begin() as conn:
        for name, created in [
                ("old", START - timedelta(hours=1)), ("before_start", START - MICRO),
                ("at_start", START), ("mid", START + timedelta(hours=1)),
                ("before_end", END - MICRO), ("at_end", END),
                ("after_end", END + find.SLACK - timedelta(minutes=1)),
                ("late_within_slack", END - timedelta(seconds=1)),
                ("after_slack", END + find.SLACK + timedelta(minutes=1)),
                ("newest", END + timedelta(days=1))]:
            made[name] = sample_data.insert_job(conn, "sync", "failed", created_at=created)
    return made


def listed(client, **args) -> list[int]:
    return found(client.get("/jobs", query_string=args))


def test_a_time_range_lists_exactly_the_jobs_created_in_it(timeline, viewer_of):
    j = timeline
    client = viewer_of()
    expected = [j["late_within_slack"], j["before_end"], j["mid"], j["at_start"]]
    assert listed(client, created_from=START.isoformat(), created_to=END.isoformat()) \
        == expected
    # the same in the form's notation (UTC, no offset), and each side alone
    assert listed(client, created_from="2021-03-01T09:00", created_to="2021-03-01 17:00") \
        == expected
    assert listed(client, created_from="2021-03-01T09:00")[-2:] == [j["mid"], j["at_start"]]
    assert j["newest"] in listed(client, created_from="2021-03-01T09:00")
    assert listed(client, created_to="2021-03-01T09:00") == [j["before_start"], j["old"]]
    # with an offset: 10:00+01:00 is START
    assert listed(client, created_from="2021-03-01T10:00+01:00", created_to=END.isoformat()) \
        == expected


def test_a_time_range_pages_by_id_and_its_links_keep_it(timeline, viewer_of):
    j = timeline
    client = viewer_of(PAGE_SIZE=2)
    first = client.get("/jobs", query_string={"created_from": START.isoformat(),
                                              "created_to": END.isoformat()})
    assert found(first) == [j["late_within_slack"], j["before_end"]]
    older = re.search(r'href="([^"]+)" rel="next" data-testid="older"',
                      first.get_data(as_text=True)).group(1).replace("&amp;", "&")
    assert found(client.get(older)) == [j["mid"], j["at_start"]]
    assert "created_from=" in older and "created_to=" in older


def test_a_jump_starts_the_list_at_a_job_or_a_time(timeline, viewer_of):
    j = timeline
    client = viewer_of(PAGE_SIZE=3)
    assert listed(client, at=str(j["mid"])) == [j["mid"], j["at_start"], j["before_start"]]
    assert listed(client, at=f"#{j['mid']}") == [j["mid"], j["at_start"], j["before_start"]]
    # a time: the jobs created just before it, newest first
    assert listed(client, at="2021-03-01 10:00") == [j["at_start"], j["before_start"],
                                                     j["old"]]
    page = client.get("/jobs", query_string={"at": "2021-03-01 10:00"})
    html = page.get_data(as_text=True)
    newer = re.search(r'href="([^"]+)" rel="prev" data-testid="newer"', html).group(1)
    assert found(client.get(newer.replace("&amp;", "&")))[-1] == j["mid"]
    # with a filter, kept: none of these is pending
    assert listed(client, at=str(j["newest"]), status="pending") == []
    # past every job: the newest; before every job: none
    assert listed(client, at="9999-12-31")[0] == j["newest"]
    assert listed(client, at="2000-01-01") == []


def test_a_selection_of_all_matching_jobs_keeps_the_time_range(timeline, engine, clean_db,
                                                                users):
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": clean_db})
    client = app.test_client()
    assert login(client, "otto").status_code == 303
    page = client.get("/jobs", query_string={"created_from": START.isoformat(),
                                             "created_to": END.isoformat()})
    html = page.get_data(as_text=True)
    form = html[html.index('id="select-form"'):html.index("</form>", html.index('id="select-form"'))]
    hidden = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form))
    assert hidden["created_from"] == START.isoformat()
    response = post_form(client, "/bulk/select", {
        **{k: v for k, v in hidden.items() if k != "csrf_token"},
        "all_matching": "1", "action": "retry"})
    assert response.status_code == 303
    with engine.begin() as conn:
        held = conn.exec_driver_sql(
            "SELECT array_agg(u ORDER BY u DESC) FROM console_selection_jobs p, "
            "unnest(p.job_ids) u").scalar_one()
    j = timeline
    assert held == [j["late_within_slack"], j["before_end"], j["mid"], j["at_start"]]
    # an unreadable time would select every job: refused
    response = post_form(client, "/bulk/select", {"all_matching": "1", "action": "retry",
                                                  "created_from": "yesterday"})
    assert response.status_code == 400
    app.extensions["jobwarden_db"].dispose()


@pytest.mark.parametrize("args, problem", [
    ({"created_from": "yesterday"}, "Give the range's start as YYYY-MM-DD HH:MM"),
    ({"created_to": "2026-13-01"}, "Give the range's end as"),
    ({"created_from": "2021-03-02", "created_to": "2021-03-01"}, "start must come before"),
    ({"created_from": "2021-03-01", "created_to": "2021-03-01"}, "start must come before"),
    ({"created_from": "0001-01-01T00:00+01:00"}, "from 0001-01-01 to 9999-12-31"),
    ({"created_to": "9" * 500}, "not '" + "9" * 40 + "…'"),
    ({"at": "#99999999999999999999"}, "Jump to a job id from 1"),
    ({"at": "0"}, "Jump to a job id from 1"),
    ({"at": "next tuesday"}, "Give the time to jump to as"),
    ({"at": "%' OR 1=1 --"}, "Give the time to jump to as"),
])
def test_an_unreadable_time_is_a_400_in_one_line(timeline, viewer_of, args, problem):
    response = viewer_of().get("/jobs", query_string=args)
    assert response.status_code == 400
    line = re.search(r'data-testid="filter-problem">([^<]*)<',
                     response.get_data(as_text=True)).group(1)
    assert problem in line.replace("&#39;", "'") and "\n" not in line.strip(), line


def test_a_huge_range_is_every_job(timeline, viewer_of):
    client = viewer_of(PAGE_SIZE=50)
    assert len(listed(client, created_from="0001-01-01", created_to="9999-12-31T23:59:59")) \
        == len(timeline)


def test_ids_at_finds_each_moments_first_id_across_gaps(engine, clean_db):
    """Against a count over the table: where each moment splits the ids, with
    ids deleted (as retention does) at the ends, in runs and alone, for moments before,
    between, on and after every job."""
    base = datetime(2026, 1, 1, tzinfo=UTC)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO background_jobs (type, payload, created_at) "
            "SELECT 't', '{}', %s::timestamptz + g * interval '1 minute' "
            "FROM generate_series(0, 299) g", (base,))
        conn.exec_driver_sql(
            "DELETE FROM background_jobs WHERE id <= 5 OR id > 290 OR id BETWEEN 100 AND 180 "
            "OR mod(id, 7) = 0")
    moments = [base + timedelta(minutes=m, seconds=s)
               for m in range(-2, 303, 3) for s in (-1, 0, 1)]
    db = ConsoleDatabase(clean_db, pool_size=1)
    try:
        with db.reading() as reader:
            got = find.ids_at(reader, moments)
    finally:
        db.dispose()
    # Each splits the jobs where the moment does: those below it were created before it.
    with engine.begin() as conn:
        for moment, split in zip(moments, got, strict=True):
            below, before = conn.exec_driver_sql(
                "SELECT count(*) FILTER (WHERE id < %s), "
                "count(*) FILTER (WHERE created_at < %s) FROM background_jobs",
                (split, moment)).one()
            assert below == before, (moment, split)
    assert got == sorted(got) and got[0] == 6 and got[-1] == 291


def test_ids_at_in_an_empty_table(clean_db):
    db = ConsoleDatabase(clean_db, pool_size=1)
    try:
        with db.reading() as reader:
            assert find.ids_at(reader, [START, END]) == [1, 1]
            assert find.ids_at(reader, []) == []
    finally:
        db.dispose()


def test_a_search_in_a_time_range_starts_at_the_ranges_newest_window(timeline, engine,
                                                                      viewer_of):
    """Newer jobs with the same error fill many windows; the range's first window is its
    own newest, and its windows stop at its start."""
    with engine.begin() as conn:
        for _ in range(20):
            sample_data.insert_job(conn, "sync", "failed")
    j = timeline
    client = viewer_of(SEARCH_WINDOW=3)
    seen, requests = [], 0
    url = "/search?" + urlencode({"q": "error:timed out", "created_from": START.isoformat(),
                                  "created_to": END.isoformat()})
    while url:
        response = client.get(url)
        requests += 1
        html = response.get_data(as_text=True)
        if requests == 1:  # the range's newest window: ids below after_slack's
            assert f'data-testid="searched-to">#{j["after_slack"] - 1}<' in html
            assert "created from 2021-03-01 09:00:00 UTC and before 2021-03-01 17:00:00" in html
        seen += found(response)
        older = re.search(r'href="([^"]+)" data-testid="older-window"', html)
        url = older.group(1).replace("&amp;", "&") if older else None
    assert seen == [j["late_within_slack"], j["before_end"], j["mid"], j["at_start"]]
    assert requests == 3  # the range's 7 ids in windows of 3, none of the 20 newer jobs
    # the range filters the look-ups over every job too
    assert found(client.get("/search", query_string={
        "q": str(j["old"]), "created_from": START.isoformat()})) == []
    assert found(client.get("/search", query_string={
        "q": str(j["mid"]), "created_from": START.isoformat()})) == [j["mid"]]


@pytest.mark.parametrize("args, problem", [
    ({"created_from": "tomorrow"}, "Give the range's start as"),
    ({"created_from": "2021-03-02", "created_to": "2021-03-01"}, "start must come before"),
])
def test_a_search_with_an_unreadable_time_is_a_400_in_one_line(viewer_of, args, problem):
    response = viewer_of().get("/search", query_string={"q": "error:x", **args})
    assert response.status_code == 400
    line = re.search(r'data-testid="search-problem">([^<]*)<',
                     response.get_data(as_text=True)).group(1)
    assert problem in line.replace("&#39;", "'") and "\n" not in line.strip()


def test_a_time_ranges_page_leaves_the_planner_as_it_was(timeline, clean_db):
    """The page walks its ids with sorts off (queries.jobs_page); the rest of the
    transaction plans as before."""
    db = ConsoleDatabase(clean_db, pool_size=1)
    try:
        with db.reading() as reader:
            flt = JobFilter.from_args({"created_from": START.isoformat()})
            assert [r["id"] for r in jobs_page(reader, flt).rows][-1] == timeline["at_start"]
            assert reader.row(CQ.console_sort_setting, value="on")["was"] == "on"
    finally:
        db.dispose()


STRIPE_KEY = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"


def datalist(html: str, list_id: str) -> list[str]:
    found_list = re.search(rf'<datalist id="{list_id}"[^>]*>(.*?)</datalist>', html, re.S)
    assert found_list, list_id
    return re.findall(r'<option value="([^"]*)">', found_list.group(1))


@pytest.fixture
def named(engine):
    """Jobs of types, queues and codes the lists offer, and names they must not: a secret's
    shape in a queue, a type and a code (a row from before a redactor knew it)."""
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO job_types (type, queue, max_attempts, lease_seconds, backoff, "
            "version, repeat_safe, published_by) VALUES "
            "('published_only', 'published_queue', 3, 30, '{}', 1, true, 'test')")
        add = sample_data.insert_job
        add(conn, "send_email", "completed", queue="mail")
        add(conn, "charge_card", "failed", queue="billing", error_code="CARD_DECLINED")
        add(conn, f"type_{STRIPE_KEY}", "completed", queue=f"q_{STRIPE_KEY}")
        add(conn, "sync", "failed", error_code=f"DECLINED_{STRIPE_KEY}")
        conn.exec_driver_sql(
            "INSERT INTO job_minute_counts (minute, queue, type, outcome, error_code, jobs) "
            "VALUES (date_trunc('minute', now()), 'mail', 'send_email', 'retried', "
            "'SMTP_BUSY', 1)")
        add(conn, "sync", "completed", payload={
            "customer": {"id": 7, "name": "Ada", "cvv": "123", "address": {"city": "X"}},
            "password": "hunter2", "note": "hi", STRIPE_KEY: 1, "items": [{"sku": "A"}],
            "a b": 1, "deep": {"er": {"than": {"three": 1}}}})


@pytest.mark.parametrize("who", ["vera", "otto"])
def test_the_filters_offer_names_from_the_catalogue_and_rollups(named, clean_db, users, who):
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": clean_db})
    client = app.test_client()
    assert login(client, who).status_code == 303
    html = client.get("/jobs").get_data(as_text=True)
    assert datalist(html, "suggest-types") == ["charge_card", "published_only", "send_email",
                                               "sync"]
    assert datalist(html, "suggest-queues") == ["billing", "default", "mail",
                                                "published_queue"]
    # failed now, and seen by the per-minute rollup (a retry); none a secret's shape
    assert datalist(html, "suggest-codes") == ["CARD_DECLINED", "SMTP_BUSY"]
    search = client.get("/search").get_data(as_text=True)
    offered = datalist(search, "suggest-search")
    assert {"customer.id=", "customer.name=", "customer.address.city=", "note="} <= set(
        offered)
    # a secret's name or shape, a name the search cannot take, arrays, past 3 names deep
    assert not [o for o in offered if any(w in o for w in (
        "cvv", "password", STRIPE_KEY, "a b", "items", "deep"))], offered
    assert "error:CARD_DECLINED" in offered and not [o for o in offered if "DECLINED_" in o]
    app.extensions["jobwarden_db"].dispose()


def test_the_lists_are_bounded(named, engine, viewer_of, monkeypatch):
    """At most LIMIT values each; payload paths from the newest PAYLOAD_SAMPLE jobs only."""
    monkeypatch.setattr(suggest, "LIMIT", 2)
    monkeypatch.setattr(suggest, "PAYLOAD_SAMPLE", 3)
    with engine.begin() as conn:
        for n in range(3):
            sample_data.insert_job(conn, "recent", "completed", payload={"recent": n})
    client = viewer_of()
    html = client.get("/jobs").get_data(as_text=True)
    assert datalist(html, "suggest-types") == ["charge_card", "published_only"]
    # the first 2 codes, less the one shown as [REDACTED]
    assert datalist(html, "suggest-codes") == ["CARD_DECLINED"]
    offered = datalist(client.get("/search").get_data(as_text=True), "suggest-search")
    assert offered[0] == "recent=" and "customer.id=" not in offered


def test_a_page_is_not_held_up_by_its_suggestions(named, clean_db, viewer_of):
    """A table locked by someone else (a migration): past suggest.SECONDS the page comes
    without suggestions rather than waiting."""
    client = viewer_of(SLA_BADGE_SECONDS=3600)
    client.get("/jobs")  # the navigation's badges, read before the lock
    with psycopg.connect(clean_db) as locker:
        locker.execute("SET idle_in_transaction_session_timeout = '30s'")
        locker.execute("LOCK TABLE job_minute_counts IN ACCESS EXCLUSIVE MODE")
        html = client.get("/search").get_data(as_text=True)
        assert datalist(html, "suggest-search") == []


#: (typed after error:, whether it finds the seeded error "rate (a+)+ at 100%_x [0-9]"; a
#: sign at an end of what is typed needs no word boundary there: `100%`, `%`)
HOSTILE = [("(a+)+", True), ("(a+)+$", False), (".*", False), ("[0-9]", True),
           ("[0-9]+", False), ("100%_x", True), ("100%", True), ("%", True), ("_", False),
           ("\\d", False), ("a|b", False), ("rate (a+)+ at", True), ("RATE", True),
           ("x [0-9]", False), ("_x [0-9]*", True), ("*", None), ("%' OR 1=1 --", False)]


@pytest.mark.parametrize("needle, finds", HOSTILE)
def test_hostile_error_words_are_literal_text(engine, viewer_of, clean_db, needle, finds):
    """Regular-expression signs, LIKE wildcards and SQL in an error search are text to
    find: a literal match or none, never a pattern, an error or a change."""
    with engine.begin() as conn:
        job_id = sample_data.insert_job(conn, "t", "failed", error="rate (a+)+ at 100%_x [0-9]",
                                        error_code="LIMIT")
        sample_data.insert_job(conn, "t", "failed", error="ratelimit aaa at 1000 b 5 d")
    response = viewer_of().get("/search", query_string={"q": f"error:{needle}"})
    if finds is None:
        assert response.status_code == 400
        return
    assert found(response) == ([job_id] if finds else [])
    with psycopg.connect(clean_db) as conn:
        assert conn.execute("SELECT count(*) FROM background_jobs").fetchone()[0] == 2
