"""The audit log one line per action (`/audit/actions`): who may read what, hostile and
huge filters, and two statements of one bulk action racing for its line. The figures:
tests/figures/test_audit_line_figures.py."""

from __future__ import annotations

import threading
import uuid

import psycopg

from tests.figures.html_tree import parse

INSERT = ("INSERT INTO job_audit (job_id, bulk_id, actor, role, action, reason) "
          "VALUES (%s, %s, %s, 'operator', %s, %s)")


def audit(url: str, *rows: tuple) -> None:
    with psycopg.connect(url) as conn:
        for row in rows:
            conn.execute(INSERT, row)


def body(client, path: str, status: int = 200) -> str:
    response = client.get(path)
    assert response.status_code == status, (path, response.status_code)
    return response.get_data(as_text=True)


def test_a_viewer_reads_every_line_and_its_reason_but_no_bulk_actions_progress(
        app, login, clean_db):
    """Decided: reasons are for everyone who may sign in. They say why jobs changed,
    which a viewer on call needs as much as an operator; a secret typed into one is
    redacted on every page like any other field (test_console_redaction.py). The bulk
    action's progress page stays its owner's: only they can act on it."""
    bulk = str(uuid.uuid4())
    audit(clean_db, (None, None, "otto", "pause_queue", "maintenance window"),
          (None, bulk, "otto", "retry", "provider back up"),
          (None, bulk, "otto", "retry", "provider back up"))
    for user, progress in (("vera", False), ("ada", False), ("otto", True)):
        client = app.test_client()
        assert login(client, user).status_code == 303
        html = body(client, "/audit/actions")
        assert "maintenance window" in html and "provider back up" in html, user
        assert (f"/bulk/{bulk}" in html) is progress, user
        assert f"/audit?bulk={bulk}" in html, user
        # the full log shows the same reasons to the same people: no view leaks more
        assert "maintenance window" in body(client, "/audit"), user


def test_huge_odd_and_backwards_day_ranges_are_answered_not_500(viewer, clean_db):
    audit(clean_db, (None, None, "otto", "pause_queue", "zebra-reason"))
    for query, shown in (("from=0001-01-01&to=9999-12-31", True), ("to=9999-12-31", True),
                         ("from=0001-01-01", True), ("from=9999-12-31", False),
                         ("to=0001-01-01", False), ("from=2999-01-01&to=2000-01-01", False),
                         ("from=" + "9" * 10_000, True), ("before=9223372036854775808", True),
                         ("limit=99999999999999999999", True), ("action=drop_table", True),
                         ("action=start_bulk", True), ("actor=" + "x" * 5000, False)):
        html = body(viewer, f"/audit/actions?{query}")
        assert ("zebra-reason" in html) is shown, query
    for bad in ("from=2026-13-45", "to=yesterday", "from=2026-02-30"):
        tree = parse(body(viewer, f"/audit/actions?{bad}"))
        assert "Not a day" in tree.one("bad-day").text(), bad
        assert "zebra-reason" in tree.one("audit-lines").text(), bad  # shown without that bound
    assert viewer.get("/audit/actions?from=2026-01-01%00").status_code == 400


def test_the_full_log_links_to_the_lines_and_back(viewer, clean_db):
    tree = parse(body(viewer, "/audit"))
    assert tree.one("lines-link")["href"].endswith("/audit/actions")
    assert "Every row" in body(viewer, "/audit/actions")


def test_two_statements_of_one_bulk_action_racing_count_every_job_once(clean_db):
    """Chunks of one action take turns under the selection's lock; a writer that does not
    (a script with its own bulk id) still waits on the line's row, and adds to it."""
    bulk = str(uuid.uuid4())
    first = psycopg.connect(clean_db)
    try:
        first.execute("INSERT INTO job_audit (bulk_id, actor, role, action, reason) "
                      "SELECT %s, 'otto', 'operator', 'retry', 'race' "
                      "FROM generate_series(1, 5)", [bulk])
        done = threading.Event()

        def second() -> None:
            with psycopg.connect(clean_db) as conn:
                conn.execute("INSERT INTO job_audit (bulk_id, actor, role, action, reason) "
                             "SELECT %s, 'otto', 'operator', 'retry', 'race' "
                             "FROM generate_series(1, 7)", [bulk])
            done.set()

        thread = threading.Thread(target=second)
        thread.start()
        assert not done.wait(0.5)  # waits for the first statement's line
        first.commit()
        thread.join(timeout=10)
        assert done.is_set()
    finally:
        first.close()
    with psycopg.connect(clean_db) as conn:
        assert conn.execute("SELECT count(*), sum(jobs) FROM job_audit_lines").fetchone() == (1, 12)
