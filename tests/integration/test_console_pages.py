"""Every console page renders for a signed-in user and shows what the database holds."""

from __future__ import annotations

import re

import pytest

from jobwarden.console.data import sample_data
from jobwarden.worker.core.states import JobStatus


@pytest.fixture
def scenario(engine):
    with engine.begin() as conn:
        return sample_data.seed_console_scenario(conn)


PAGES = ["/", "/_overview/counts", "/_overview/health", "/failed", "/failed/group?code=AUTH_FAILED",
         "/failed?type=send_email", "/failed/group?type=send_email",
         "/failed/group?code=AUTH_FAILED&type=send_email", "/jobs", "/queues", "/schedules", "/review", "/workers", "/sla", "/audit"]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_renders_for_a_viewer(viewer, scenario, path):
    response = viewer.get(path)
    assert response.status_code == 200, response.get_data(as_text=True)[:500]
    assert "Content-Security-Policy" in response.headers


def test_the_overview_counts_every_status(viewer, scenario):
    html = viewer.get("/").get_data(as_text=True)
    # seed: 40+12 completed, 6+3 failed, 1 unknown, 2 running, 27 pending, 1 cancelled, 1 skipped
    for status, count in [("completed", 52), ("failed", 9), ("unknown", 1), ("running", 2),
                          ("pending", 27), ("cancelled", 1), ("skipped", 1)]:
        assert f'data-testid="count-{status}"' in html
        assert f'data-count="{count}"' in html, status
    assert "w-app3-2" in html  # the stale running job's worker
    assert "hx-trigger=\"every" in html


@pytest.mark.parametrize("path", ["/", "/_overview/counts"])
def test_the_overview_has_a_tile_for_each_status_in_the_runtime_order(viewer, scenario, path):
    html = viewer.get(path).get_data(as_text=True)
    tiles = re.findall(r'data-testid="count-([a-z_]+)"', html)
    assert tiles == [s.value for s in JobStatus]  # a status added to JobStatus shows up


def test_failed_groups_show_one_row_per_error_code(viewer, scenario):
    html = viewer.get("/failed").get_data(as_text=True)
    assert 'data-error-code="AUTH_FAILED"' in html and 'data-error-code="PROVIDER_5XX"' in html
    assert "hunter2" not in html  # the sample message's URL credentials are redacted
    group = viewer.get("/failed/group?code=AUTH_FAILED").get_data(as_text=True)
    assert 'data-testid="preview-count">6<' in group
    for job_id in scenario["auth_failed"]:
        assert f'data-job-id="{job_id}"' in group


def test_a_failed_group_needs_a_code_or_a_type_and_a_type_alone_narrows_it(viewer, scenario):
    assert viewer.get("/failed/group").status_code == 404
    assert viewer.get("/failed/group?code=&type=").status_code == 404
    by_type = viewer.get("/failed/group?type=send_email").get_data(as_text=True)
    assert 'data-testid="group-by-code"' in by_type
    assert 'value="None"' not in by_type  # no code: the bulk form names none
    other = viewer.get("/failed/group?type=no_such_type").get_data(as_text=True)
    assert 'data-testid="preview-count">0<' in other
    listed = viewer.get("/failed?type=no_such_type").get_data(as_text=True)
    assert 'data-error-code="' not in listed and "No failed jobs of type no_such_type" in listed
    # The page polls itself with its filter.
    assert 'hx-get="/failed?type=no_such_type"' in listed


def test_the_jobs_list_polls_its_rows_with_its_filters_and_a_group_page_does_not(viewer,
                                                                                scenario):
    html = viewer.get("/jobs?status=pending&queue=reports").get_data(as_text=True)
    section = re.search(r'<section id="job-rows"([^>]*)>', html).group(1)
    assert 'data-poll-rows hx-get="/jobs?status=pending&amp;queue=reports"' in section
    assert re.search(r'hx-trigger="every \d+s"', section)
    fragment = viewer.get("/jobs?status=pending&queue=reports", headers={"HX-Request": "true"})
    body = fragment.get_data(as_text=True)
    assert body.lstrip().startswith('<section id="job-rows"')
    assert "<html" not in body and 'data-poll-rows' in body
    group = viewer.get("/failed/group?code=AUTH_FAILED").get_data(as_text=True)
    assert '<section id="job-rows">' in group and "data-poll-rows" not in group


def test_an_outage_still_retrying_is_on_failed_and_fires_the_storm_alert(viewer, engine):
    """jobwarden.console.data.sample_data's retry storm (the screenshots' and the bench's)."""
    with engine.begin() as conn:
        ids = sample_data.seed_retry_storm(conn, jobs=30)
    html = viewer.get("/failed").get_data(as_text=True)
    row = re.search(r'<tr data-retrying-code="CRM_UNAVAILABLE" data-type="sync_crm">(.*?)</tr>',
                    html, re.S).group(1)
    assert re.search(r'data-testid="retrying-jobs">30<', row)
    assert re.search(r'data-testid="retrying-retries">45 retries<', row)  # 1 or 2 each
    assert 'data-error-code="CRM_UNAVAILABLE"' not in html  # none failed for good yet
    alerts = viewer.get("/_overview/alerts").get_data(as_text=True)
    assert re.search(r'data-alert="JobwardenRetryStorm".*?alert-state">FIRING<', alerts, re.S)
    assert len(ids) == 30


def test_the_jobs_list_filters_and_pages_by_keyset(viewer, scenario):
    html = viewer.get("/jobs?status=pending&queue=reports&limit=10").get_data(as_text=True)
    assert html.count('data-job-id="') == 10
    assert "status=pending" in html and "queue=reports" in html  # the pager keeps filters
    older = html.split('data-testid="older"')[0].rsplit('href="', 1)[1].split('"')[0]
    second = viewer.get(older.replace("&amp;", "&")).get_data(as_text=True)
    first_ids = {int(x.split('"')[0]) for x in html.split('data-job-id="')[1:]}
    second_ids = {int(x.split('"')[0]) for x in second.split('data-job-id="')[1:]}
    assert len(second_ids) == 10 and not first_ids & second_ids
    assert max(second_ids) < min(first_ids)


def test_the_jobs_list_finds_a_job_by_idempotency_key_or_id(viewer, scenario):
    html = viewer.get("/jobs?q=charge:order:7100").get_data(as_text=True)
    assert f'data-job-id="{scenario["unknown"]}"' in html and html.count('data-job-id="') == 1
    html = viewer.get(f"/jobs?q={scenario['running']}").get_data(as_text=True)
    assert f'data-job-id="{scenario["running"]}"' in html


def test_page_sizes_are_clamped(viewer, scenario):
    html = viewer.get("/jobs?limit=100000").get_data(as_text=True)
    assert html.count('data-job-id="') <= 200
    assert viewer.get("/jobs?limit=-5&before=abc&status=bogus").status_code == 200


def test_job_detail_shows_the_sanitized_payload_and_attempts(viewer, scenario):
    job_id = scenario["auth_failed"][0]
    html = viewer.get(f"/jobs/{job_id}").get_data(as_text=True)
    assert "sk_live_abcdefgh12345" not in html and "[REDACTED]" in html
    assert 'data-testid="attempts-timeline"' in html and "AUTH_FAILED" in html
    assert 'data-live="no"' in html  # failed is terminal: no polling


def test_a_running_keyed_job_shows_the_slot_of_its_key_it_holds(viewer, make_job):
    running = make_job("running", concurrency_key="account:7", concurrency_slot=1)
    pending = make_job("pending", concurrency_key="account:7")
    html = viewer.get(f"/jobs/{running}").get_data(as_text=True)
    assert "account:7" in html and 'data-testid="concurrency-slot">slot 1<' in html
    assert 'data-testid="concurrency-slot"' not in viewer.get(f"/jobs/{pending}").get_data(
        as_text=True)  # a pending job holds no slot


def test_a_script_in_a_payload_is_rendered_inert(viewer, scenario):
    html = viewer.get(f"/jobs/{scenario['pending']}").get_data(as_text=True)
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(" in html
    assert "hunter2" not in html  # by key: "password"


def test_a_running_job_polls_and_shows_its_progress(viewer, scenario):
    html = viewer.get(f"/jobs/{scenario['running']}").get_data(as_text=True)
    assert 'data-live="yes"' in html and "hx-trigger=\"every" in html
    assert '<progress max="100" value="42.0"' in html
    live = viewer.get(f"/jobs/{scenario['running']}/_live", headers={"HX-Request": "true"})
    assert live.status_code == 200 and "<html" not in live.get_data(as_text=True)


def test_an_unknown_job_is_listed_for_review_with_reconcile_actions(operator, scenario):
    html = operator.get("/review").get_data(as_text=True)
    assert f'data-job-id="{scenario["unknown"]}"' in html
    for action in ("mark_completed", "mark_failed", "retry", "skip"):
        assert f'action="/jobs/{scenario["unknown"]}/{action}"' in html


def test_workers_show_state_heartbeat_and_running_jobs(viewer, scenario):
    html = viewer.get("/workers").get_data(as_text=True)
    assert "w-app1-1" in html and "draining" in html
    assert 'class="wstate wstate-gone">gone<' in html  # w-app3-2 has not beaten for 15 minutes
    assert f'/jobs/{scenario["running"]}' in html


def test_sla_panels_show_a_breach_in_text(clean_db, users, engine, login):
    from jobwarden.console import create_app

    with engine.begin() as conn:
        sample_data.seed_console_scenario(conn)
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": clean_db,
                      "SLA_TARGETS": {"export_report": 30.0, "send_email": 60.0}})
    client = app.test_client()
    login(client, "vera")
    html = client.get("/sla").get_data(as_text=True)
    app.extensions["jobwarden_db"].dispose()
    export = html.split('data-type="export_report"')[1].split("</article>")[0]
    assert "SLA BREACHED" in export  # reports waited up to 65s against 30s, and 7 min pending
    email = html.split('data-type="send_email"')[1].split("</article>")[0]
    assert "within SLA" in email and "<svg" in email


def test_the_audit_log_filters_by_actor_action_and_job(operator, scenario, post_form):
    job_id = scenario["auth_failed"][0]
    post_form(operator, f"/jobs/{job_id}/retry", {"reason": "smtp creds rotated",
                                                  "request_id": "r-1"})
    html = operator.get("/audit?actor=otto&action=retry").get_data(as_text=True)
    assert "smtp creds rotated" in html
    assert "smtp creds rotated" not in operator.get("/audit?actor=ada").get_data(as_text=True)
    assert "smtp creds rotated" in operator.get(f"/audit?job={job_id}").get_data(as_text=True)


def _link(html: str, testid: str) -> str | None:
    if f'data-testid="{testid}"' not in html:
        return None
    return html.split(f'data-testid="{testid}"')[0].rsplit('href="', 1)[1].split('"')[0].replace(
        "&amp;", "&")


def _ids(html: str) -> list[int]:
    return [int(x.split('"')[0]) for x in html.split('data-job-id="')[1:]]


def test_the_jobs_list_pages_back_to_newer_rows_keeping_filters(viewer, scenario):
    first = viewer.get("/jobs?status=pending&limit=5").get_data(as_text=True)
    assert _link(first, "newer") is None  # nothing is newer than the newest page
    second = viewer.get(_link(first, "older")).get_data(as_text=True)
    third = viewer.get(_link(second, "older")).get_data(as_text=True)
    back = viewer.get(_link(third, "newer")).get_data(as_text=True)
    assert "status=pending" in _link(third, "newer")
    assert _ids(back) == _ids(second)
    again = viewer.get(_link(back, "newer")).get_data(as_text=True)
    assert _ids(again) == _ids(first)
    assert _link(again, "newer") is None and _link(again, "older")


def test_sla_targets_come_from_the_handlers_published_policy(clean_db, users, engine, login):
    """The console imports no application module: a worker's publication is enough."""
    from jobwarden import Registry, job
    from jobwarden.console import create_app
    from jobwarden.worker.jobs.job_types import publish_job_types

    reg = Registry()
    job("export_report", sla="40s", registry=reg)(lambda ctx, payload: None)
    with engine.begin() as conn:
        sample_data.seed_console_scenario(conn)
        publish_job_types(conn, reg, published_by="w-test")
    app = create_app({"TESTING": True, "SECRET_KEY": "t", "DATABASE_URL": clean_db})
    client = app.test_client()
    login(client, "vera")
    html = client.get("/sla").get_data(as_text=True)
    app.extensions["jobwarden_db"].dispose()
    export = html.split('data-type="export_report"')[1].split("</article>")[0]
    assert "40s" in export and "handler" in export and "SLA BREACHED" in export
