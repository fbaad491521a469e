"""The job page's payload, checkpoint and result as a collapsible tree (console/web/jsontree.py):
drawn on the server as <details>, from the sanitized value only, bounded for hostile input.

Each hostile payload is written straight into the table (as a buggy or malicious producer
could), not through enqueue's validation."""

from __future__ import annotations

import json

from sqlalchemy import text

from jobwarden.console.web.jsontree import MAX_DEPTH, MAX_NODES
from tests.figures.html_tree import parse

SECRETS = ("hunter2-deep", "sk_live_nested000111", "tok-in-list-42")


def tree(page, name: str = "payload"):
    (found,) = [e for e in page.walk() if e.attrs.get("data-testid") == f"{name}-tree"]
    return found


def test_a_nested_payload_is_a_tree_of_details_with_every_secret_redacted(viewer, make_job):
    job_id = make_job("completed", payload={
        "order": {"id": 7, "customer": {"password": SECRETS[0], "name": "Ann"},
                  "lines": [{"sku": "A1", "qty": 2}, {"api_key": SECRETS[1]}]},
        "sessions": [{"token": SECRETS[2]}],
        "note": "Authorization: Bearer abcdefghijklmnop", "paid": True, "refund": None},
        result={"receipt": {"url": "https://u:pw-in-url@pay.example.com/r/1"}})
    html = viewer.get(f"/jobs/{job_id}").get_data(as_text=True)
    for secret in (*SECRETS, "abcdefghijklmnop", "pw-in-url"):
        assert secret not in html
    payload = tree(parse(html))
    details = [e for e in payload.walk() if e.tag == "details"]
    # the payload, order, customer, lines, each line, sessions and its item
    assert len(details) == 8
    # open as the page loads: the payload and its first level (sessions, order)
    assert sum("open" in d.attrs for d in details) == 3
    keys = [e.text() for e in payload.walk() if "json-key" in e.attrs.get("class", "")]
    assert {"order", "customer", "password", "name", "lines", "sku", "api_key", "token",
            "note", "paid", "refund"} <= set(keys)
    shown = payload.text()
    assert "[REDACTED]" in shown and '"Ann"' in shown and "true" in shown and "null" in shown
    assert "[REDACTED]" in tree(parse(html), "result").text()


def test_html_in_keys_and_values_is_text(viewer, make_job):
    job_id = make_job("pending", payload={
        "<img src=x onerror=alert(1)>": {"<b>k</b>": "<script>alert(2)</script>"}})
    html = viewer.get(f"/jobs/{job_id}").get_data(as_text=True)
    assert "<script>alert(2)" not in html and "<img src=x" not in html and "<b>k</b>" not in html
    shown = tree(parse(html)).text()
    assert "<img src=x onerror=alert(1)>" in shown and "<script>alert(2)</script>" in shown


def test_right_to_left_overrides_in_keys_and_values_show_as_escapes(viewer, make_job):
    bidi = "\u202e\u2066"
    job_id = make_job("pending", payload={f"name{bidi}": {"inner": f"exe.{bidi}txt"}})
    html = viewer.get(f"/jobs/{job_id}").get_data(as_text=True)
    assert not set(bidi) & set(html)
    assert tree(parse(html)).text().count("\\u202e\\u2066") == 2


def hostile(engine, payload_sql: str) -> int:
    with engine.begin() as conn:
        return conn.execute(text(
            "INSERT INTO background_jobs (type, queue, status, payload) "
            f"VALUES ('hostile', 'default', 'pending', {payload_sql}) RETURNING id")).scalar_one()


def test_a_payload_ten_thousand_levels_deep_shows_as_too_deep_not_an_error(viewer, engine):
    """PostgreSQL stores it; Python's JSON parser stops near a thousand levels."""
    job_id = hostile(engine, "'{\"a\": " + "[" * 10_000 + "]" * 10_000 + "}'::jsonb")
    response = viewer.get(f"/jobs/{job_id}")
    assert response.status_code == 200
    assert "nested deeper than the console reads" in tree(
        parse(response.get_data(as_text=True))).text()


def test_a_payload_with_an_integer_of_five_thousand_digits_shows_as_unread_not_an_error(
        viewer, engine):
    """PostgreSQL stores a number of up to 131,072 digits; Python reads integers of at
    most 4,300."""
    job_id = hostile(engine, "'{\"a\": " + "7" * 5000 + "}'::jsonb")
    response = viewer.get(f"/jobs/{job_id}")
    assert response.status_code == 200
    assert "holds an integer of more digits than the console reads" in tree(
        parse(response.get_data(as_text=True))).text()


def test_a_payload_five_hundred_levels_deep_draws_a_bounded_tree(viewer, engine):
    job_id = hostile(engine, "'{\"a\": " + "[" * 500 + "]" * 500 + "}'::jsonb")
    response = viewer.get(f"/jobs/{job_id}")
    assert response.status_code == 200
    details = [e for e in tree(parse(response.get_data(as_text=True))).walk()
               if e.tag == "details"]
    assert 10 < len(details) <= MAX_DEPTH


def test_a_payload_a_megabyte_wide_draws_at_most_max_nodes(viewer, engine):
    wide = {f"k{i:06d}": "v" * 8 for i in range(60_000)}
    assert len(json.dumps(wide)) > 1_000_000
    job_id = hostile(engine, f"'{json.dumps(wide)}'::jsonb")
    html = viewer.get(f"/jobs/{job_id}").get_data(as_text=True)
    page_tree = tree(parse(html))
    assert len([e for e in page_tree.walk() if e.tag == "li"]) == MAX_NODES
    (more,) = [e for e in page_tree.walk() if "json-more" in e.attrs.get("class", "")]
    assert more.text().startswith(f"… {60_000 - (MAX_NODES - 1)} more not drawn")
