"""The shipped Prometheus alerting rules, checked and unit-tested by the real promtool.

deploy/prometheus/jobwarden.rules.test.yml holds, for each alert, series for which it must
fire and series for which it must not (jobwarden.rules.history.test.yml those of the
alerts that compare with a week ago); promtool evaluates the rules over them.
`make test` installs Debian's `prometheus` package (which carries promtool) when missing.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

from jobwarden.console.data import sample_data

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def promtool(*args: str) -> subprocess.CompletedProcess:
    tool = shutil.which("promtool")
    assert tool, "promtool is missing: `make promtool` installs Debian's prometheus package"
    return subprocess.run([tool, *args], cwd=RULES_DIR, capture_output=True, text=True,
                          timeout=300)


def test_the_alerting_rules_are_valid_prometheus_rules():
    result = promtool("check", "rules", "jobwarden.rules.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 16 rules found" in result.stdout


def test_each_alert_fires_on_its_series_and_stays_quiet_on_the_others():
    for name in RULE_TEST_FILES:
        # The alerts read the recording rules: evaluated in a random order of groups,
        # a case passes or fails by chance.
        assert "group_eval_order:\n  - jobwarden.recording\n  - jobwarden.alerts\n" in (
            RULES_DIR / name).read_text(), name
    result = promtool("test", "rules", *RULE_TEST_FILES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(RULE_TEST_FILES), result.stdout


RULES = (RULES_DIR / "jobwarden.rules.yml").read_text()
RULE_TEST_FILES = ("jobwarden.rules.test.yml", "jobwarden.rules.history.test.yml")
RULE_TESTS = "\n".join((RULES_DIR / name).read_text() for name in RULE_TEST_FILES)
OPERATING = (RULES_DIR.parents[1] / "docs" / "guide" / "operating.md").read_text()
#: The console's address in the rules' tests (their jobwarden_console_info series).
TEST_CONSOLE = "https://ops.example.com/jobs"


def alerts() -> dict[str, str]:
    """Each alert of the rules file and its text, up to the next rule."""
    return dict(re.findall(r"- alert: (\w+)\n(.*?)(?=\n      - (?:alert|record):|\Z)", RULES,
                           re.S))


def test_every_alert_links_to_its_console_view_and_to_its_runbook():
    found = alerts()
    assert len(found) == 12
    for name, body in found.items():
        console = re.search(r"^\s+console_url: '(.+)'$", body, re.M)
        runbook = re.search(r"^\s+runbook_url: '(.+)'$", body, re.M)
        assert console and runbook, name
        assert console.group(1).startswith(
            '{{ with query "max by (console_url) (jobwarden_console_info)" }}'), name
        assert runbook.group(1).endswith(f"#{name.lower()}"), name
        # The runbook section the anchor names exists (GitHub's anchor of a heading).
        assert f"\n### {name}\n" in OPERATING, name
        # promtool checks each firing alert's annotations whole: every alert has a case.
        assert f"alertname: {name}\n" in RULE_TESTS, name


def test_the_failed_rate_and_retry_storm_alerts_keep_the_error_code():
    for name in ("JobwardenFailedRateHigh", "JobwardenRetryStorm", "JobwardenFailureStorm"):
        body = alerts()[name]
        assert "sum by (type, error_code)" in body
        assert "code={{ $labels.error_code | urlquery }}&type={{ $labels.type | urlquery }}" in body


def test_every_name_an_alerts_link_carries_is_quoted():
    """A label put into a console_url goes through urlquery (a space then `%20`, so the
    anchor also reads right in a fragment): a queue or type named `a b#c` or `x&y`
    must not end the link, or start another argument, where its name does."""
    for name, body in alerts().items():
        console = re.search(r"^\s+console_url: '(.+)'$", body, re.M).group(1)
        for use in re.findall(r"\{\{ *\$labels\.\w+[^}]*\}\}", console):
            assert "| urlquery" in use, (name, use)


@pytest.fixture
def linked(engine):
    """The queues, types and SLA targets the rules' tests name, so that every view their
    links open has what it links to."""
    urls = re.findall(r'console_url: "([^"]+)"', RULE_TESTS)
    with engine.begin() as conn:
        for queue in {unquote(m) for u in urls for m in re.findall(r"/queues#queue-(.+)$", u)}:
            sample_data.insert_job(conn, "some_type", "pending", queue=queue)
        for job_type in {unquote(m) for u in urls for m in re.findall(r"/sla#sla-(.+)$", u)}:
            sample_data.insert_job(conn, job_type, "pending", queue="q")
            conn.exec_driver_sql(
                "INSERT INTO job_types (type, queue, max_attempts, lease_seconds, backoff, "
                "sla_seconds, version, repeat_safe, published_by) "
                "VALUES (%(t)s, 'q', 5, 60, '{}', 120, 1, true, 'w')", {"t": job_type})
    return urls


def test_every_link_the_alerts_carry_opens_a_console_view_that_holds_its_anchor(viewer, linked):
    assert len(linked) >= 10
    for url in linked:
        path = url.removeprefix(TEST_CONSOLE)
        assert path.startswith("/"), url
        address, _, anchor = path.partition("#")
        response = viewer.get(address)
        assert response.status_code == 200, url
        if anchor:
            # A browser matches the fragment, percent-decoded, with the element's id.
            assert f'id="{html.escape(unquote(anchor))}"' in response.get_data(as_text=True), url
