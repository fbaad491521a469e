"""The job page's payload tree in Chromium with script turned off: <details> open and
close by themselves, and a nested secret is nowhere in the page, open or closed."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from jobwarden.console.data import sample_data
from tests.browser.conftest import checked_page
from tests.console_support import PASSWORD

pytestmark = pytest.mark.browser


def test_the_payload_tree_opens_and_closes_without_script(browser, live_console, users,
                                                          engine):
    with engine.begin() as conn:
        job_id = sample_data.insert_job(conn, "send_email", "failed", payload={
            "order": {"customer": {"address": {"city": "Lyon",
                                               "password": "hunter2-deep"}}}})
    with checked_page(browser, live_console, java_script_enabled=False) as page:
        page.goto("/login")
        page.get_by_label("User name").fill("vera")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.goto(f"/jobs/{job_id}")
        tree = page.get_by_test_id("payload-tree")
        city = tree.get_by_text('"Lyon"')
        customer = tree.locator("summary", has_text="customer")
        address = tree.locator("summary", has_text="address")
        expect(customer).to_be_visible()  # the payload and order open: customer's line shows
        expect(address).to_be_hidden()  # customer itself closed
        customer.click()
        expect(address).to_be_visible()
        expect(city).to_be_hidden()
        address.click()
        expect(city).to_be_visible()
        customer.click()  # closes again, with all inside it
        expect(city).to_be_hidden()
        assert "hunter2-deep" not in page.content()
        expect(tree.locator(".json-key", has_text="password").locator("xpath=..")
               ).to_contain_text("[REDACTED]")
