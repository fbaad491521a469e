"""What is sent for a named query: its name first, no comment lines, and for the hot
path's statements a text short enough for psycopg to cache its placeholder parse."""

from __future__ import annotations

import pytest
from psycopg import _queries

from jobwarden.worker.store.queries import Q, compact

HOT = ["claim_jobs", "finish_executions", "heartbeat_executions", "enqueue_jobs",
       "enqueue_jobs_keyless", "save_progress"]


def test_every_query_is_sent_under_its_name_without_comment_lines():
    for name, sql in Q.items():
        first, *rest = sql.splitlines()
        expected = "enqueue_jobs" if name == "enqueue_jobs_keyless" else name
        assert first == f"-- jobwarden: {expected}"
        assert rest and not [line for line in rest if line.lstrip().startswith("--")], name


@pytest.mark.parametrize("name", HOT)
def test_the_hot_statements_fit_psycopgs_parse_cache(name):
    # Longer texts are parsed for their placeholders again on every call.
    assert len(Q[name].encode()) <= _queries.MAX_CACHED_STATEMENT_LENGTH


def test_compacting_keeps_code_and_trailing_comments_and_drops_comment_lines():
    body = "-- what it does\nSELECT a,  -- why a\n    b\n\n  -- why b\nFROM t"
    assert compact("q", body) == "-- jobwarden: q\nSELECT a,  -- why a\nb\nFROM t"
