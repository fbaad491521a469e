"""The batch pages: a batch's progress, moments and callbacks, the list of batches, the
`batch=` filter of the jobs list and search, and the batch's two actions through the
reviewed, audited bulk machinery (docs/guide/flows.md#batches, "In the console").

The batches are written through the runtime (tests/batch_support.py); the figures tier
checks every number against the tables (tests/figures/test_batch_figures.py).
"""

from __future__ import annotations

import re
import threading

import psycopg
import pytest

from jobwarden import JobSpec, open_batch
from jobwarden.worker.core.states import ExecutionOutcome, JobStatus
from tests.batch_support import REG, finish, seed_batches
from tests.console_support import login
from tests.helpers import scalar, wait_for
from tests.integration.test_bulk_chunks import SELECTION, console_backends, post


@pytest.fixture
def seeded(clean_db):
    return seed_batches(clean_db)


def counts(html: str) -> dict[str, int]:
    table = re.search(r'data-testid="batch-counts">(.*?)</table>', html, re.S).group(1)
    return {s: int(n) for s, n in re.findall(r'data-state="(\w+)">(?:<a [^>]*>)?(\d+)', table)}


def statuses(url: str, ids: list[int]) -> list[str]:
    with psycopg.connect(url) as conn:
        found = dict(conn.execute("SELECT id, status FROM background_jobs WHERE id = ANY(%s)",
                                  [ids]).fetchall())
    return [found[i] for i in ids]


def signed_in(app, username: str):
    client = app.test_client()
    assert login(client, username).status_code == 303
    return client


def form_fields(html: str, action: str) -> dict[str, str]:
    """The hidden fields of the batch page's form `action` (what its button posts)."""
    form = re.search(rf'data-action="batch-{action}"(.*?)</form>', html, re.S).group(1)
    return {k: v for k, v in re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"',
                                        form) if k != "csrf_token"}


def select_from_page(client, batch_id: int, action: str) -> str:
    """Press the batch page's button `action`: the selection's id, from the review's URL."""
    fields = form_fields(client.get(f"/batches/{batch_id}").get_data(as_text=True), action)
    response = post(client, "/bulk/select", fields)
    assert response.status_code == 303, response.get_data(as_text=True)[:300]
    assert response.headers["Location"].startswith("/bulk/")
    return SELECTION.search(response.headers["Location"]).group(1)


# -- reading ----------------------------------------------------------------------------------

def test_a_batch_page_shows_progress_moments_and_callbacks(viewer, seeded):
    a = seeded.batch["a"]
    html = viewer.get(f"/batches/{a}").get_data(as_text=True)
    assert counts(html) == {"completed": 6, "failed": 2, "cancelled": 3, "skipped": 5,
                            "unknown": 1, "unfinished": 4, "members": 21}
    assert 'data-testid="batch-description">orders.csv<' in html
    assert 'href="/batches?owner=import:42"' in html
    # Each count leads to its members in the jobs list; the unfinished span statuses.
    assert f'href="/jobs?batch={a}&amp;status=failed"' in html
    assert f'href="/jobs?batch={a}"' in html
    # on_failure came due and became a job (linked, with its status); the others did not.
    rows = dict(re.findall(r'<tr data-event="(\w+)">(.*?)</tr>', html, re.S))
    assert list(rows) == ["complete", "success", "failure"]
    failure_job = scalar(seeded.url, "SELECT job_id FROM job_batch_callbacks "
                                     "WHERE batch_id = %s AND event = 'failure'", [a])
    assert f'href="/jobs/{failure_job}"' in rows["failure"] and "pending" in rows["failure"]
    assert "not yet" in rows["complete"] and "/jobs/" not in rows["complete"]
    assert "/jobs/" not in rows["success"]
    # Sealed only once every member ended; the bar is SVG from the server.
    assert "not yet" in html.split('data-testid="batch-sealed"')[1][:200]
    main = html.split("<main", 1)[1]
    assert 'data-testid="batch-bar"' in main and "<script" not in main


def test_a_sealed_batch_and_an_empty_one_say_so(viewer, seeded):
    html = viewer.get(f"/batches/{seeded.batch['b']}").get_data(as_text=True)
    assert counts(html)["unfinished"] == 0
    sealed = html.split('data-testid="batch-sealed"')[1][:300]
    assert "<time" in sealed and "takes no more" in sealed
    html = viewer.get(f"/batches/{seeded.batch['c']}").get_data(as_text=True)
    assert counts(html) == dict.fromkeys(("completed", "failed", "cancelled", "skipped",
                                          "unknown", "unfinished", "members"), 0)
    assert "<time" in html.split('data-testid="batch-success-at"')[1][:200]
    html = viewer.get(f"/batches/{seeded.batch['d']}").get_data(as_text=True)
    assert "open: its opener may still add members" in html
    assert 'data-testid="batch-no-callbacks"' in html


def test_the_job_page_of_a_member_links_its_batch_page(viewer, seeded):
    member = seeded.members["a"]["bad"][0]
    html = viewer.get(f"/jobs/{member}").get_data(as_text=True)
    assert f'href="/batches/{seeded.batch["a"]}" data-testid="job-batch-link"' in html


def test_the_batches_list_is_newest_first_paged_and_filtered_by_owner(viewer, seeded):
    ids = seeded.batch
    html = viewer.get("/batches").get_data(as_text=True)
    shown = [int(i) for i in re.findall(r'data-batch-id="(\d+)"', html)]
    assert shown == [ids["d"], ids["c"], ids["b"], ids["a"]]
    assert html.count('data-testid="batch-row-bar"') == 4
    html = viewer.get("/batches?owner=import:42").get_data(as_text=True)
    assert [int(i) for i in re.findall(r'data-batch-id="(\d+)"', html)] == [ids["c"], ids["a"]]
    page1 = viewer.get("/batches?limit=2").get_data(as_text=True)
    assert [int(i) for i in re.findall(r'data-batch-id="(\d+)"', page1)] == [ids["d"], ids["c"]]
    older = re.search(r'href="([^"]+)" rel="next" data-testid="older"', page1).group(1)
    page2 = viewer.get(older.replace("&amp;", "&")).get_data(as_text=True)
    assert [int(i) for i in re.findall(r'data-batch-id="(\d+)"', page2)] == [ids["b"], ids["a"]]
    assert 'data-testid="older"' not in page2 and "« Newest" in page2
    assert 'data-testid="batches-empty"' in viewer.get("/batches?owner=nobody").get_data(
        as_text=True)


def test_the_navigation_reaches_the_batches_list(viewer):
    nav = viewer.get("/").get_data(as_text=True).split('<nav id="main-nav" aria-label="Main">')[1]
    assert 'href="/batches"' in nav.split("</nav>")[0]


def test_the_jobs_list_and_search_list_a_batchs_members_only(viewer, seeded):
    a = seeded.batch["a"]
    members = {i for ids in seeded.members["a"].values() for i in ids}
    html = viewer.get(f"/jobs?batch={a}&limit=200").get_data(as_text=True)
    assert {int(i) for i in re.findall(r'data-job-id="(\d+)"', html)} == members
    assert f'href="/batches/{a}"' in html.split('data-testid="batch-filter"')[1][:300]
    failed = viewer.get(f"/jobs?batch={a}&status=failed").get_data(as_text=True)
    assert {int(i) for i in re.findall(r'data-job-id="(\d+)"', failed)} == \
        set(seeded.members["a"]["bad"])
    found = viewer.get(f"/search?q=batch:{a}").get_data(as_text=True)
    shown = {int(i) for i in re.findall(r'data-job-id="(\d+)"', found)}
    assert shown == members and 'data-testid="search-batch-link"' in found
    # Its pages keep the filter.
    paged = viewer.get(f"/jobs?batch={a}&limit=5").get_data(as_text=True)
    older = re.search(r'href="([^"]+)" rel="next" data-testid="older"', paged).group(1)
    assert f"batch={a}" in older
    # An empty batch lists nothing (not every job).
    empty = viewer.get(f"/jobs?batch={seeded.batch['c']}").get_data(as_text=True)
    assert 'data-testid="job-rows-empty"' in empty


def test_selecting_all_matching_a_batch_selects_its_members_only(operator, seeded):
    a = seeded.batch["a"]
    html = operator.get(f"/jobs?batch={a}").get_data(as_text=True)
    bar = html.split('data-testid="select-bar"', 1)[1].split("</form>", 1)[0]
    assert f'<input type="hidden" name="batch" value="{a}">' in bar
    response = post(operator, "/bulk/select", {"action": "skip", "all_matching": "1",
                                               "batch": str(a)})
    review = operator.get(response.headers["Location"]).get_data(as_text=True)
    members = sum(len(ids) for ids in seeded.members["a"].values())
    assert f'data-testid="selected-count">{members}<' in review
    assert f"batch={a}" in review


# -- bad input --------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["abc", "-1", "0", str(2**63), "9" * 40, "1e3", "١٢", "1.5"])
def test_a_batch_id_that_is_no_id_is_a_one_line_400(viewer, value):
    response = viewer.get(f"/batches/{value}")
    assert response.status_code == 400
    assert "A batch is named by its id" in response.get_data(as_text=True)
    assert viewer.get(f"/batches?before={value}").status_code == 400
    listed = viewer.get("/jobs", query_string={"batch": value})
    assert listed.status_code == 400 and "A batch is named by its id" in listed.get_data(
        as_text=True)
    searched = viewer.get("/search", query_string={"q": f"batch:{value}"})
    assert searched.status_code == 400 and "Give a batch id after batch:" in searched.get_data(
        as_text=True)


def test_a_batch_that_does_not_exist_is_a_404(viewer, seeded):
    assert viewer.get(f"/batches/{2**63 - 1}").status_code == 404
    assert viewer.get(f"/batches/{max(seeded.batch.values()) + 1}").status_code == 404


def test_selecting_all_matching_a_bad_batch_selects_nothing(operator, seeded, clean_db):
    response = post(operator, "/bulk/select", {"action": "retry", "all_matching": "1",
                                               "batch": "x1"})
    assert response.status_code == 400
    assert "A batch is named by its id" in response.get_data(as_text=True)
    assert scalar(clean_db, "SELECT count(*) FROM console_selections") == 0


def test_an_owner_filter_shown_as_redacted_is_refused(viewer, seeded):
    response = viewer.get("/batches", query_string={"owner": "password=hunter2"})
    assert response.status_code == 400 and "[REDACTED]" in response.get_data(as_text=True)


# -- the actions ------------------------------------------------------------------------------

def test_retry_the_failed_members_goes_through_the_review_and_counts_again(
        operator, seeded, clean_db):
    a = seeded.batch["a"]
    failed = seeded.members["a"]["bad"]
    sel = select_from_page(operator, a, "retry")
    review = operator.get(f"/bulk/{sel}").get_data(as_text=True)
    # Exactly the batch's failed members: not batch b's, not the failed job in no batch.
    assert 'data-testid="selected-count">2<' in review
    assert f"batch={a}" in review and 'data-testid="canary-size"' in review
    assert set(re.findall(r'href="/jobs/(\d+)"', review)) == {str(i) for i in failed}
    # A reason is required: without one nothing changes.
    post(operator, f"/bulk/{sel}", {"reason": "", "request_id": "r0", "mode": "all"})
    assert statuses(clean_db, failed) == ["failed", "failed"]
    response = post(operator, f"/bulk/{sel}", {"reason": "rows fixed", "request_id": "r1",
                                               "mode": "all"})
    assert response.status_code == 303 and f"bulk={sel}" in response.headers["Location"]
    assert statuses(clean_db, failed) == ["pending", "pending"]
    assert statuses(clean_db, seeded.members["b"]["bad"] + [seeded.plain["bad"]]) == \
        ["failed", "failed"]
    with psycopg.connect(clean_db) as conn:
        audited = conn.execute("SELECT job_id, actor, reason FROM job_audit "
                               "WHERE bulk_id = %s ORDER BY job_id", [sel]).fetchall()
    assert audited == [(i, "otto", "rows fixed") for i in sorted(failed)]
    # The runtime counted them unfinished again, in the action's transaction.
    after = counts(operator.get(f"/batches/{a}").get_data(as_text=True))
    assert (after["failed"], after["unfinished"], after["members"]) == (0, 6, 21)


def test_cancel_what_has_not_run_selects_pending_and_waiting_members_only(
        operator, seeded, clean_db):
    a = seeded.batch["a"]
    not_run = seeded.members["a"]["pend"] + seeded.members["a"]["wait"]
    sel = select_from_page(operator, a, "cancel")
    review = operator.get(f"/bulk/{sel}").get_data(as_text=True)
    assert 'data-testid="selected-count">3<' in review  # pending, scheduled, waiting
    assert re.findall(r'data-status-row="(\w+)"', review) == ["pending", "waiting"]
    assert '<span class="note">left alone</span>' not in review
    post(operator, f"/bulk/{sel}", {"reason": "import abandoned", "request_id": "c1",
                                    "mode": "all"})
    assert set(statuses(clean_db, not_run)) == {"cancelled"}
    assert statuses(clean_db, seeded.members["a"]["run"]) == ["running"]
    assert statuses(clean_db, [seeded.plain["pend"], *seeded.members["d"]["pend"]]) == \
        ["pending", "pending"]
    after = counts(operator.get(f"/batches/{a}").get_data(as_text=True))
    assert (after["cancelled"], after["unfinished"]) == (6, 1)  # the running one


def test_a_viewer_sees_no_action_and_a_viewers_post_is_refused(viewer, seeded, clean_db):
    a = seeded.batch["a"]
    html = viewer.get(f"/batches/{a}").get_data(as_text=True)
    assert 'data-action="batch-' not in html and 'data-testid="batch-read-only"' in html
    for fields in ({"action": "retry", "all_matching": "1", "status": "failed", "batch": a},
                   {"action": "cancel", "all_matching": "1", "eligible_only": "1",
                    "batch": a}):
        assert post(viewer, "/bulk/select", fields).status_code == 403
    assert scalar(clean_db, "SELECT count(*) FROM console_selections") == 0
    assert scalar(clean_db, "SELECT count(*) FROM job_audit WHERE actor <> 'ann'") == 0
    assert statuses(clean_db, seeded.members["a"]["bad"]) == ["failed", "failed"]


def test_two_operators_racing_the_same_batch_retry_retry_each_member_once(
        app, seeded, clean_db):
    """Otto and Ada review the same batch's failed members, and start at once while a
    member's row is held: each member is retried once, by one of them; the other's
    chunk finds it moved on and leaves it alone. The batch counts it once."""
    a = seeded.batch["a"]
    failed = seeded.members["a"]["bad"]
    otto, ada = signed_in(app, "otto"), signed_in(app, "ada")
    sels = {"otto": select_from_page(otto, a, "retry"), "ada": select_from_page(ada, a, "retry")}
    holder = psycopg.connect(clean_db)
    holder.execute("SELECT id FROM background_jobs WHERE id = %s FOR UPDATE", [failed[0]])
    starts = [threading.Thread(target=post, args=(client, f"/bulk/{sels[name]}", {
        "reason": f"{name} retries", "request_id": f"race-{name}", "mode": "all"}))
        for name, client in (("otto", otto), ("ada", ada))]
    for start in starts:
        start.start()
    wait_for(lambda: len(console_backends(clean_db, waiting=True)) == 2,
             message="both chunks to wait for the held member")
    holder.rollback()
    holder.close()
    for start in starts:
        start.join(timeout=30)
        assert not start.is_alive()
    assert statuses(clean_db, failed) == ["pending", "pending"]
    with psycopg.connect(clean_db) as conn:
        retries = conn.execute("SELECT job_id, count(*) FROM job_audit WHERE action = 'retry' "
                               "GROUP BY job_id ORDER BY job_id").fetchall()
        manual = conn.execute("SELECT manual_retry_count FROM background_jobs "
                              "WHERE id = ANY(%s)", [failed]).fetchall()
        done = conn.execute("SELECT sum(changed), sum(left_alone) FROM console_selections "
                            "WHERE id = ANY(%s::uuid[])", [list(sels.values())]).fetchone()
    assert retries == [(i, 1) for i in sorted(failed)]
    assert manual == [(1,), (1,)]
    assert done == (2, 2)
    after = counts(otto.get(f"/batches/{a}").get_data(as_text=True))
    assert (after["failed"], after["unfinished"]) == (0, 6)


def test_a_batch_of_10000_members_renders_no_member(viewer, clean_db):
    """The page reads the batch's row, not its members: its size is a small batch's, and
    the one failed member of 10,000 still shows in the bar."""
    with psycopg.connect(clean_db) as conn:
        sizes = {}
        for n in (10, 10_000):
            with open_batch(conn, description=f"{n} rows", registry=REG) as batch:
                batch.enqueue_many([JobSpec("imp.pend", {"row": i}) for i in range(n - 1)]
                                   + [JobSpec("imp.bad", {})])
            conn.commit()
            finish(conn, "imp.bad", JobStatus.FAILED, ExecutionOutcome.FAILED, "ROW_INVALID")
            sizes[n] = batch.id
    pages = {n: viewer.get(f"/batches/{i}").get_data(as_text=True) for n, i in sizes.items()}
    big = pages[10_000]
    assert counts(big) == {"completed": 0, "failed": 1, "cancelled": 0, "skipped": 0,
                           "unknown": 0, "unfinished": 9_999, "members": 10_000}
    assert "data-job-id" not in big and not re.search(r'href="/jobs/\d', big)
    assert abs(len(big) - len(pages[10])) < 100  # the digits of its counts differ
    failed = re.search(r'class="batch-seg batch-failed" x="[\d.]+" y="0" width="([\d.]+)"',
                       big)
    assert float(failed.group(1)) >= 3.0


STRIPE = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
CARD = "4242424242424242"


def test_a_viewer_probing_a_batch_sees_no_secret_and_learns_nothing(viewer, clean_db):
    """A description, owner key, callback payload, member payload and result carrying
    secrets: no page shows them, and an owner filter guessing the key gets the answer a
    wrong guess gets."""
    owner = f"import:{STRIPE}"
    with psycopg.connect(clean_db) as conn:
        with open_batch(conn, description=f"charge with {STRIPE}", owner=owner,
                        on_failure=JobSpec("imp.report", {"note": f"card_number={CARD}"}),
                        registry=REG) as batch:
            member = batch.enqueue("imp.bad", {"card_number": CARD})
        conn.commit()
        finish(conn, "imp.bad", JobStatus.FAILED, ExecutionOutcome.FAILED, "DECLINED")
        conn.execute("UPDATE background_jobs SET result = %s WHERE id = %s",
                     [f'{{"card_number": "{CARD}"}}', member])
        conn.commit()
        callback = conn.execute("SELECT job_id FROM job_batch_callbacks").fetchone()[0]
    for path in ("/batches", f"/batches/{batch.id}", f"/jobs?batch={batch.id}",
                 f"/search?q=batch:{batch.id}", f"/jobs/{member}", f"/jobs/{callback}"):
        body = viewer.get(path).get_data(as_text=True)
        assert STRIPE not in body and CARD not in body, path
        assert "[REDACTED]" in body or path.startswith(("/jobs?", "/search")), path

    def answer(guess: str) -> tuple[int, str]:
        response = viewer.get("/batches", query_string={"owner": guess})
        return response.status_code, response.get_data(as_text=True).split("<main", 1)[1]

    assert answer(owner) == answer("import:sk_live_0000000000000000000000aa")
    assert answer(owner)[0] == 400
