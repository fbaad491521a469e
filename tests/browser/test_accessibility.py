"""axe-core on every page and fragment the console serves, as each role, in both colour
schemes: any serious or critical violation fails, named by page, rule and nodes.

axe-core is pinned in the Makefile (`make axe` installs it into .axe/, a prerequisite of
`make test`) and injected into each page as a Playwright init script, which the
console's Content-Security-Policy does not apply to. The sweep is built from the Flask
url_map: a GET route with no entry in SWEEP or NOT_HTML fails
test_every_get_route_is_swept, so a new page cannot be forgotten.

Fragments (what htmx polls) are fetched as htmx fetches them (HX-Request) and put alone
into a page's <main>, under the console's stylesheet, and axe checks that <main>.

One browser context per role and colour scheme, one page in it, each visit with its own
timeout, so a hanging page fails in seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobwarden.console.data import sample_data
from jobwarden.console.views.overview import PANELS
from tests.batch_support import seed_batches
from tests.browser.conftest import checked_page
from tests.console_support import PASSWORD, USERS

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / ".axe" / "node_modules" / "axe-core" / "axe.min.js"
#: The Makefile's AXE_VERSION, major.minor: a different axe-core fails the run.
AXE_SERIES = "4.14."
#: Per visit: a page or fragment that takes longer fails the test, naming it.
VISIT_MS = 15_000
#: Each colour scheme, and the rules run in it (None: every rule). The pages' markup is
#: the same in both: the dark scheme needs only the rules that read colours.
SCHEMES = {"light": None, "dark": ["color-contrast", "link-in-text-block"]}
FAILING = ("serious", "critical")

#: Each GET endpoint: the paths to check ({name} from the seeded ids), and whether the
#: path is a fragment (fetched with HX-Request, checked inside <main>).
SWEEP: dict[str, list[tuple[str, bool]]] = {
    "jobwarden.auth.login": [("/login", False)],
    "jobwarden.overview.index": [("/", False)],
    "jobwarden.overview.nav_counts": [("/_nav/badges", True)],
    "jobwarden.overview.panel": [(f"/_overview/{p}", True) for p in PANELS],
    "jobwarden.alerts.panel": [("/_overview/alerts", True)],
    "jobwarden.failed.index": [("/failed", False), ("/failed", True),
                               ("/failed?type=send_email", False)],
    "jobwarden.failed.group": [("/failed/group?code=AUTH_FAILED", False),
                               ("/failed/group?code=CRM_UNAVAILABLE&type=sync_crm", False)],
    "jobwarden.jobs.index": [("/jobs", False), ("/jobs?status=failed", True)],
    "jobwarden.jobs.detail": [("/jobs/{failed}", False), ("/jobs/{running}", False),
                              ("/jobs/{unknown}", False), ("/jobs/{pending}", False)],
    "jobwarden.jobs.live": [("/jobs/{running}/_live", True)],
    "jobwarden.flows.detail": [("/flows/{flow}", False)],
    "jobwarden.batches.index": [("/batches", False)],
    "jobwarden.batches.detail": [("/batches/{batch}", False)],
    "jobwarden.bulk.review": [("{bulk}", False)],
    "jobwarden.bulk.progress": [("{bulk}/_progress", True)],
    "jobwarden.queues.index": [("/queues", False)],
    "jobwarden.queues.job_type": [("/types/export_report", False)],
    "jobwarden.schedules.index": [("/schedules", False)],
    "jobwarden.schedules.preview": [
        ("/schedules/preview?cron=0+2+*+*+*&timezone=Europe/Berlin", True),
        ("/schedules/preview?cron=61+*+*+*+*&timezone=UTC", True)],
    "jobwarden.review.index": [("/review", False)],
    "jobwarden.workers.index": [("/workers", False), ("/workers", True)],
    "jobwarden.sla.index": [("/sla", False), ("/sla", True)],
    "jobwarden.audit.index": [("/audit", False)],
    "jobwarden.audit.actions": [("/audit/actions", False)],
    "jobwarden.search.index": [("/search?q=orderId%3D7100", False)],
    "jobwarden.users.index": [("/users", False)],
    "jobwarden.notifications.index": [("/notifications", False)],
}
#: GET endpoints that serve no HTML, and why.
NOT_HTML = {
    "jobwarden.metrics.metrics": "Prometheus' text format",
    "jobwarden.static": "the stylesheet, scripts and icon the pages load",
}

#: Runs axe on `context` (a selector, or the whole document) and returns the serious and
#: critical violations, each with the CSS targets of its first nodes. Playwright's evaluate
#: has no timeout of its own: a run longer than `timeout` ms is an error.
RUN_AXE = """async ([context, failing, rules, timeout]) => {
  const options = {resultTypes: ['violations']};
  if (rules) options.runOnly = {type: 'rule', values: rules};
  const late = new Promise((_, fail) => setTimeout(
    () => fail(new Error(`axe-core ran over ${timeout} ms`)), timeout));
  const result = await Promise.race([axe.run(context || document, options), late]);
  return result.violations.filter(v => failing.includes(v.impact)).map(v => ({
    rule: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 6).map(n => n.target.join(' ') + ' :: '
                                        + n.failureSummary.split('\\n').slice(1).join(' '))
  }));
}"""

#: Puts a fragment alone into a <main> of the current page (its stylesheet kept): no
#: navigation, no polling, nothing of the page it replaces left to confuse the check.
SHOW_FRAGMENT = """async ([path, timeout]) => {
  const answer = await fetch(path, {headers: {'HX-Request': 'true'},
                                    signal: AbortSignal.timeout(timeout)});
  document.body.innerHTML = '<main id="fragment-host"></main>';
  document.getElementById('fragment-host').innerHTML = await answer.text();
  return answer.status;
}"""


def test_every_get_route_is_swept(app):
    gets = {rule.endpoint for rule in app.url_map.iter_rules() if "GET" in rule.methods}
    assert gets - set(SWEEP) - set(NOT_HTML) == set(), "GET routes the axe sweep misses"
    assert set(SWEEP) - gets == set(), "swept endpoints that no longer exist"


@pytest.fixture
def targets(engine, clean_db, browser, live_console, users):
    """Something on every page: the incident, a retrying outage, a type's durations,
    batches, a flow, and a bulk review (made through the admin's own form)."""
    with engine.begin() as conn:
        ids = sample_data.seed_console_scenario(conn)
        sample_data.seed_retry_storm(conn)
        sample_data.seed_duration_history(conn)
        flow = sample_data.insert_job(conn, "report.export", "pending")
        step = sample_data.insert_job(conn, "report.step", "waiting")
        sample_data.insert_edge(conn, step, flow)
    batch = seed_batches(clean_db).batch["a"]
    with checked_page(browser, live_console) as page:
        sign_in(page, "ada")
        bulk = review_a_retry(page)  # the viewer's try: refused
    return {**ids, "failed": ids["auth_failed"][0], "flow": flow, "batch": batch,
            "bulk": bulk}


def review_a_retry(page) -> str:
    """A bulk review of its own (a selection is its maker's alone), through the form."""
    page.goto("/failed/group?code=AUTH_FAILED", timeout=VISIT_MS)
    page.get_by_role("button", name="Retry 6 job(s)…").click()
    page.get_by_test_id("selected-count").wait_for()
    return "/" + page.url.split("/", 3)[3].split("?")[0]


def sign_in(page, username: str) -> None:
    page.goto("/login", timeout=VISIT_MS)
    page.get_by_label("User name").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/login" not in url, timeout=VISIT_MS)


def check(page, path: str, fragment: bool, rules: list[str] | None) -> tuple[int, list[dict]]:
    """The status `path` answered with and the serious and critical violations on it."""
    if fragment:
        status = page.evaluate(SHOW_FRAGMENT, [path, VISIT_MS])
        return status, page.evaluate(RUN_AXE, ["#fragment-host", list(FAILING), rules, VISIT_MS])
    response = page.goto(path, timeout=VISIT_MS, wait_until="load")
    assert response is not None, path
    return response.status, page.evaluate(RUN_AXE, [None, list(FAILING), rules, VISIT_MS])


def report(where: str, violations: list[dict]) -> list[str]:
    return [f"{where}: {v['impact']} {v['rule']} ({v['help']}) {json.dumps(v['nodes'])}"
            for v in violations]


def test_no_page_or_fragment_has_a_serious_or_critical_violation(browser, live_console,
                                                                  targets):
    assert AXE.exists(), f"{AXE} is missing: run `make axe` (a prerequisite of make test)"
    found: list[str] = []
    for username, role in USERS.items():
        for scheme, rules in SCHEMES.items():
            with checked_page(browser, live_console, color_scheme=scheme,
                              viewport={"width": 1280, "height": 900}) as page:
                page.context.add_init_script(path=str(AXE))
                page.context.set_default_timeout(VISIT_MS)
                page.goto("/login", timeout=VISIT_MS)
                assert page.evaluate("axe.version").startswith(AXE_SERIES)
                found += report(f"{role}/{scheme} signed out page /login",
                                check(page, "/login", False, rules)[1])
                sign_in(page, username)
                own = {} if role == "viewer" else {"bulk": review_a_retry(page)}
                for endpoint, paths in SWEEP.items():
                    for pattern, fragment in paths:
                        path = pattern.format(**{**targets, **own})
                        if endpoint == "jobwarden.auth.login":
                            continue  # checked signed out, above
                        status, violations = check(page, path, fragment, rules)
                        # A role that may not see a page gets the error page: checked too.
                        assert status in (200, 403), (role, path, status)
                        assert status == 200 or role != "admin", (role, path, status)
                        kind = "fragment" if fragment else "page"
                        found += report(f"{role}/{scheme} {kind} {path}", violations)
    assert not found, "axe-core violations:\n" + "\n".join(found)
