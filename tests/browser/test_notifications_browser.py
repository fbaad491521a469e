"""Notifications in Chromium: an admin adds a webhook from the page, sends it a test
message, and a worker posts it to a real receiver; the page then counts it sent. The
page fits the screen at every width, and shows the URL only as scheme and host."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from jobwarden.worker.duties.delivery import register_notify_job
from tests.helpers import running_worker
from tests.notify_support import SECRET, registry, wait_for, webhook_receiver

pytestmark = pytest.mark.browser


def test_an_admin_adds_a_webhook_tests_it_and_sees_it_sent(page, sign_in, clean_db,
                                                          monkeypatch):
    monkeypatch.setenv("JOBWARDEN_NOTIFY_ALLOW_PRIVATE", "1")  # the receiver is local
    sign_in("ada")
    with webhook_receiver() as (url, received):
        page.goto("/notifications")
        add = page.locator("form[data-action=add_notify_target][data-kind=webhook]")
        add.get_by_label("Name").fill("team hook")
        add.get_by_label("URL").fill(url)
        add.get_by_label("Signing secret").fill(SECRET)
        add.get_by_label("Reason").fill("page the team")
        add.get_by_role("button", name="Add webhook").click()
        expect(page.get_by_test_id("flash-ok")).to_have_text("Target 'team hook' added.")
        row = page.locator("tr[data-kind=webhook]")
        expect(row.get_by_test_id("target-where")).to_have_text(
            url.split("/hooks")[0] + "/[REDACTED]")
        assert "t0ken-path" not in page.content() and SECRET not in page.content()
        test = row.locator("form[data-action=test_notify_target]")
        test.get_by_label("Reason").fill("does it arrive?")
        test.get_by_role("button", name="Send a test message").click()
        expect(page.get_by_test_id("flash-ok")).to_contain_text("is queued")
        reg = registry("app.job")
        register_notify_job(reg)
        with running_worker(reg, clean_db):
            wait_for(lambda: received.all(), "the test message")
    [post] = received.all()
    assert post["verified"] and post["json"]["kind"] == "test"
    page.goto("/notifications")
    row = page.locator("tr[data-kind=webhook]")
    expect(row.get_by_test_id("target-sent")).to_have_text("1")
    expect(page.get_by_test_id("notify-messages")).to_contain_text("team hook: sent")


@pytest.mark.parametrize("width", (1440, 1280, 390))
def test_the_page_fits_the_screen(page, sign_in, clean_db, width, monkeypatch):
    monkeypatch.setenv("JOBWARDEN_NOTIFY_WEBHOOK_URL",
                       "https://hooks.slack.com/services/T000/B000/" + "x" * 40)
    monkeypatch.setenv("JOBWARDEN_NOTIFY_SMTP_HOST", "smtp.example.com")
    monkeypatch.setenv("JOBWARDEN_NOTIFY_EMAIL_FROM", "jobs@example.com")
    monkeypatch.setenv("JOBWARDEN_NOTIFY_EMAIL_TO", "ops@example.com,oncall@example.com")
    page.set_viewport_size({"width": width, "height": 900})
    sign_in("ada")
    page.goto("/notifications")
    expect(page.locator("tr[data-target]")).to_have_count(2)
    fit = page.evaluate("() => ({scroll: document.documentElement.scrollWidth, "
                        "client: document.documentElement.clientWidth})")
    assert fit["scroll"] <= fit["client"], (width, fit)
