"""Secrets never reach the screen or /metrics, whichever field carries them: idempotency
and concurrency keys, error codes, errors, payload keys, audit reasons, flash messages."""

from __future__ import annotations

import html

import psycopg
import pytest

from jobwarden.console.data.sample_data import insert_job
from tests.unit.test_sanitize import MUST_REDACT

STRIPE = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
GITHUB = "ghp_1234567890abcdefghijABCDEFGHIJ"
AWS_ID = "AKIAIOSFODNN7EXAMPLE"
BEARER = "q1w2e3r4"
PASSWORD = "hunter2!"
SECRETS = (STRIPE, GITHUB, AWS_ID, BEARER, PASSWORD)


@pytest.fixture
def secret_jobs(engine, clean_db):
    """A failed job carrying a secret in every text field, plus a live job holding its
    idempotency key, and an audit row whose reason carries a password."""
    with engine.begin() as conn:
        failed = insert_job(conn, "charge", "failed", error_code=f"DECLINED_{GITHUB}",
                            error=f"provider said: Bearer {BEARER}",
                            payload={AWS_ID: "value", "note": "ok"},
                            idempotency_key=f"charge:{STRIPE}",
                            concurrency_key=f"Bearer {BEARER}")
        live = insert_job(conn, "charge", "pending", idempotency_key=f"charge:{STRIPE}")
        insert_job(conn, STRIPE, "pending")  # a type name that looks like a key
    with psycopg.connect(clean_db) as c:
        c.execute("INSERT INTO job_audit (job_id, actor, role, action, reason) VALUES "
                  "(%s, 'otto', 'operator', 'retry', %s)", [failed, f"password {PASSWORD}"])
    return failed, live


def assert_clean(body: str, where: str) -> None:
    leaked = [s for s in SECRETS if s in body]
    assert not leaked, f"{where} shows {leaked}"


def test_no_page_shows_a_secret(operator, secret_jobs):
    failed, _ = secret_jobs
    for path in ("/", "/jobs", f"/jobs/{failed}", f"/jobs/{failed}/_live", "/failed",
                 "/review", "/audit", "/audit/actions", "/queues", "/types/charge"):
        response = operator.get(path)
        assert response.status_code == 200, path
        assert_clean(response.get_data(as_text=True), path)
    # A filter by a secret is refused (test_console_search_secrets.py), and says so cleanly.
    for path in (f"/failed/group?code=DECLINED_{GITHUB}", f"/jobs?q=charge:{STRIPE}"):
        response = operator.get(path)
        assert response.status_code == 400, path
        assert_clean(response.get_data(as_text=True), path)


def test_the_flash_naming_a_conflicting_key_is_redacted(operator, post_form, secret_jobs):
    failed, live = secret_jobs
    page = post_form(operator, f"/jobs/{failed}/retry",
                     {"reason": "provider fixed", "request_id": "r-redact",
                      "expected_status": "failed"}, follow_redirects=True)
    body = page.get_data(as_text=True)
    assert f"job #{live} is live" in body  # the refusal is explained…
    assert_clean(body, "the flash")  # …without the key


def test_metrics_labels_are_redacted(operator, secret_jobs):
    body = operator.get("/metrics").get_data(as_text=True)
    assert "jobwarden_jobs{" in body
    assert_clean(body, "/metrics")


@pytest.fixture
def shaped_jobs(engine):
    """One job awaiting review per secret shape of the redaction table, the shape in its
    error, its error code and its payload."""
    with engine.begin() as conn:
        return [(insert_job(conn, "charge", "unknown", error=f"provider said: {text}",
                            last_error_code=f"E_{text[:60]}", payload={"note": text}), secret)
                for text, secret in MUST_REDACT]


def test_the_job_and_review_pages_redact_every_shape_of_the_table(operator, shaped_jobs):
    review = operator.get(f"/review?limit={len(shaped_jobs)}").get_data(as_text=True)
    for job_id, secret in shaped_jobs:
        assert f"#{job_id}" in review  # each job is on the review page…
        page = operator.get(f"/jobs/{job_id}")
        assert page.status_code == 200
        body = page.get_data(as_text=True)
        assert "[REDACTED]" in body
        assert html.escape(secret, quote=False) not in body, (job_id, secret)  # …redacted
        assert html.escape(secret, quote=False) not in review, (job_id, secret)


BIDI = "\u202e\u2066\u200f"


def test_bidi_controls_in_stored_text_are_shown_escaped_on_every_page(viewer, make_job, engine):
    """An actor, a reason, an error code, a payload key and an error holding a right-to-left
    override would reorder what the operator reads: the page shows them as escapes."""
    from sqlalchemy import text

    job_id = make_job("failed", payload={f"key{BIDI}": f"value{BIDI}"},
                      error_code=f"CODE{BIDI}X", error=f"error {BIDI}gnp.exe")
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO job_audit (job_id, actor, role, action, reason) "
                          "VALUES (:job, :actor, 'operator', 'retry', :reason)"),
                     {"job": job_id, "actor": f"mallory{BIDI}", "reason": f"because{BIDI}"})
    for path in (f"/jobs/{job_id}", "/audit", "/failed", "/jobs?status=failed",
                 f"/failed/group?code=CODE{BIDI}X"):
        page = viewer.get(path).get_data(as_text=True)
        assert not set(BIDI) & set(page), path
        assert "\\u202e\\u2066\\u200f" in page, path
