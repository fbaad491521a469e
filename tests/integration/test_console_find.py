"""Finding an old job: error text by whole words, a time range and a jump to a date or an
id on the jobs list and the search, each one request whatever the number of newer jobs;
hostile input is a one-line 400 that changes nothing."""

from __future__ import annotations

import re

import pytest

from jobwarden.console import create_app
from jobwarden.console.data import sample_data
from tests.console_support import login


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
