"""The flow page and the flow filter: a job's connected jobs, drawn, counted and held.

Flows are seeded straight into the tables (jobwarden.console.data.sample_data), in the
states the page must show; the figures tier checks every number against the tables.
"""

from __future__ import annotations

import re

import psycopg
import pytest

from jobwarden.console.data import flows, sample_data


@pytest.fixture
def import_flow(engine):
    """An import: 4 rows after a split, row 2 failed, a mail after every row; and an
    unrelated job. Returns the ids by name."""
    with engine.begin() as conn:
        ids = {"split": sample_data.insert_job(conn, "import.split", "completed")}
        for n in range(4):
            status = "failed" if n == 2 else "completed"
            ids[f"row{n}"] = sample_data.insert_job(conn, "import.row", status)
            sample_data.insert_edge(conn, ids[f"row{n}"], ids["split"], released=True)
        ids["mail"] = sample_data.insert_job(conn, "import.mail", "waiting")
        for n in range(4):
            sample_data.insert_edge(conn, ids["mail"], ids[f"row{n}"], released=n != 2)
        ids["other"] = sample_data.insert_job(conn, "send_email", "pending")
    return ids


def cell(html: str, status: str) -> str:
    table = re.search(r'data-testid="flow-counts">(.*?)</table>', html, re.S).group(1)
    found = re.search(rf'data-status="{status}">(?:<a [^>]*>)?(\d+)', table)
    return found.group(1)


def test_a_flow_page_draws_counts_and_says_what_holds_it(viewer, import_flow):
    ids = import_flow
    for start in (ids["split"], ids["row1"], ids["mail"]):  # any job of the flow names it
        html = viewer.get(f"/flows/{start}").get_data(as_text=True)
        assert (cell(html, "completed"), cell(html, "failed"), cell(html, "waiting"),
                cell(html, "total")) == ("4", "1", "1", "6")
        held = re.findall(r'data-held="(\d+)" data-parent="(\d+)"', html)
        assert held == [(str(ids["mail"]), str(ids["row2"]))]
        assert f'href="/jobs/{ids["row2"]}"' in html
        main = html.split("<main", 1)[1]
        assert 'data-testid="flow-graph"' in main and "<script" not in main
        assert f'href="/jobs/{ids["other"]}"' not in html


def test_the_job_page_links_to_its_flow_only_when_it_has_one(viewer, import_flow):
    assert f'href="/flows/{import_flow["mail"]}"' in viewer.get(
        f"/jobs/{import_flow['mail']}").get_data(as_text=True)
    assert "/flows/" not in viewer.get(f"/jobs/{import_flow['other']}").get_data(as_text=True)


@pytest.mark.parametrize("value", ["abc", "-1", "0", str(2**63), "9" * 40, "1e3", "١٢"])
def test_a_flow_id_that_is_no_job_id_is_a_one_line_400(viewer, value):
    response = viewer.get(f"/flows/{value}")
    assert response.status_code == 400
    assert "A flow is named by the id of one of its jobs" in response.get_data(as_text=True)


def test_a_flow_of_a_job_that_does_not_exist_is_a_404(viewer, import_flow):
    assert viewer.get(f"/flows/{2**63 - 1}").status_code == 404
    assert viewer.get(f"/flows/{import_flow['other'] + 1000}").status_code == 404


def test_a_job_without_dependencies_is_a_flow_of_one(viewer, import_flow):
    html = viewer.get(f"/flows/{import_flow['other']}").get_data(as_text=True)
    assert cell(html, "total") == "1" and 'data-testid="flow-not-held"' in html


def test_the_walk_ends_on_a_cycle_written_by_hand(viewer, engine):
    """No enqueue can make a cycle; one written by hand must not loop the walk."""
    with engine.begin() as conn:
        a, b, c = (sample_data.insert_job(conn, "step", "waiting") for _ in range(3))
        for child, parent in ((b, a), (c, b), (a, c)):
            sample_data.insert_edge(conn, child, parent)
    html = viewer.get(f"/flows/{b}").get_data(as_text=True)
    assert cell(html, "waiting") == "3" and cell(html, "total") == "3"
    assert 'data-testid="flow-cut"' not in html  # each job walked once, not to the bound
    assert len(re.findall(r'class="flow-box', html)) == 3


def test_a_flow_of_10000_jobs_is_cut_at_the_bound_and_drawn_in_few_boxes(viewer, engine):
    """A fan-out of 9,999 rows and a fan-in: the page walks MAX_NODES jobs, says it cut
    the flow, and draws at most MAX_LAYERS x MAX_ROW boxes."""
    with engine.begin() as conn:
        conn.exec_driver_sql("""
            WITH root AS (
                INSERT INTO background_jobs (type, status, payload, dependents)
                VALUES ('import.split', 'completed', '{}', 9998) RETURNING id
            ), rows AS (
                INSERT INTO background_jobs (type, status, payload)
                SELECT 'import.row', CASE WHEN n %% 100 = 0 THEN 'failed' ELSE 'completed' END,
                       jsonb_build_object('n', n)
                FROM generate_series(1, 9998) n RETURNING id
            ), edges AS (
                INSERT INTO job_dependencies (job_id, parent_id, released_at)
                SELECT rows.id, root.id, now() FROM rows, root
            )
            SELECT 1""")
    with engine.connect() as conn:  # the root: the smallest id
        first = conn.exec_driver_sql("SELECT min(id) FROM background_jobs").scalar_one()
    response = viewer.get(f"/flows/{first}")
    html = response.get_data(as_text=True)
    assert response.status_code == 200 and 'data-testid="flow-cut"' in html
    assert cell(html, "total") == str(flows.MAX_NODES)
    boxes = len(re.findall(r'class="flow-box', html))
    assert 1 < boxes <= flows.MAX_LAYERS * flows.MAX_ROW
    # Grouped by depth, type and status: the root, and its rows completed and failed.
    counts = [int(n) for n in re.findall(r'>(\d+) × (?:completed|failed)', html)]
    assert boxes == 3 and sum(counts) == flows.MAX_NODES - 1


# -- the flow filter: jobs list, search, select all matching ----------------------------

def listed(html: str) -> set[int]:
    return {int(i) for i in re.findall(r'<tr data-job-id="(\d+)"', html)}


def test_the_jobs_list_filters_by_flow_and_keeps_the_other_filters(viewer, import_flow):
    ids = import_flow
    flow = {ids[n] for n in ("split", "row0", "row1", "row2", "row3", "mail")}
    html = viewer.get(f"/jobs?flow={ids['row3']}").get_data(as_text=True)
    assert listed(html) == flow and 'data-testid="flow-filter"' in html
    assert listed(viewer.get(f"/jobs?flow={ids['mail']}&status=failed").get_data(
        as_text=True)) == {ids["row2"]}
    assert listed(viewer.get(f"/jobs?flow={ids['other']}").get_data(as_text=True)) == \
        {ids["other"]}
    # A job that does not exist is a flow of none.
    assert listed(viewer.get(f"/jobs?flow={2**63 - 1}").get_data(as_text=True)) == set()
    # Paging keeps the filter.
    page = viewer.get(f"/jobs?flow={ids['mail']}&limit=2").get_data(as_text=True)
    older = re.search(r'<a href="([^"]+)" rel="next" data-testid="older">', page).group(1)
    assert f"flow={ids['mail']}" in older


@pytest.mark.parametrize("value", ["abc", "-3", "0", str(2**63), "1.5", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"])
def test_a_flow_filter_that_is_no_job_id_is_a_one_line_400(viewer, import_flow, value):
    response = viewer.get("/jobs", query_string={"flow": value})
    html = response.get_data(as_text=True)
    assert response.status_code == 400
    assert re.search(r'data-testid="filter-problem">A flow is named by the id of one of its '
                     r'jobs [^<\n]*Nothing was searched.</p>', html)
    assert listed(html) == set()


def test_search_finds_a_flow_and_refuses_what_is_no_job_id(viewer, import_flow):
    ids = import_flow
    html = viewer.get("/search", query_string={"q": f"flow:{ids['split']}"}).get_data(
        as_text=True)
    found = {int(i) for i in re.findall(r'href="/jobs/(\d+)"', html.split("<main", 1)[1])}
    assert found == {ids[n] for n in ("split", "row0", "row1", "row2", "row3", "mail")}
    assert "the flow of job #" in html
    for bad in ("flow:", "flow:abc", "flow:-1", f"flow:{2**63}",
                "flow:sk_live_4eC39HqLyjWDarjtT1zdp7dc", "flow:password=hunter2"):
        response = viewer.get("/search", query_string={"q": bad})
        text = response.get_data(as_text=True)
        assert response.status_code == 400, bad
        assert "Give a job id after flow:" in text, bad
        assert "hunter2" not in text.split('data-testid="search-problem"', 1)[1], bad


def test_selecting_all_matching_a_flow_selects_that_flow_only(operator, post_form, make_job,
                                                               import_flow, clean_db):
    ids = import_flow
    make_job("failed")  # failed too, but of no flow
    response = post_form(operator, "/bulk/select", {
        "action": "skip", "all_matching": "1", "flow": str(ids["mail"]), "status": "failed"})
    assert response.status_code == 303
    review = operator.get(response.headers["Location"]).get_data(as_text=True)
    assert 'data-testid="selected-count">1<' in review and f"flow of job={ids['mail']}" in review
    # A flow value that is no job id must not widen "all matching" to every job.
    refused = post_form(operator, "/bulk/select", {
        "action": "skip", "all_matching": "1", "flow": "12abc"})
    assert refused.status_code == 400
    assert "Nothing was selected." in refused.get_data(as_text=True)
    with psycopg.connect(clean_db) as conn:
        assert conn.execute("SELECT count(*) FROM console_selections").fetchone()[0] == 1
