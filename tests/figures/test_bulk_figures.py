"""The bulk review's breakdown (by status, by type, by failure age), counted when the jobs
were selected, and the selections it narrows to equal independent counts over
`background_jobs` at that moment.

Each selection is made through the console's own forms on the seeded dataset (failures of
today and of five days ago, every status); the expected figures are SQL written here.
"""

from __future__ import annotations

import re

import psycopg

from jobwarden.worker.ops.operations import SELECTION_FROM
from tests.console_support import csrf_token
from tests.figures.conftest import rows
from tests.figures.html_tree import Element, page

# The review's failure-age buckets, written independently of console/data/bulk.py.
AGE_SQL = """
    CASE WHEN failed_at IS NULL THEN 'never'
         WHEN now() - failed_at <= interval '1 hour' THEN 'hour'
         WHEN now() - failed_at <= interval '24 hours' THEN 'day'
         WHEN now() - failed_at <= interval '168 hours' THEN 'week'
         ELSE 'older' END"""


def select(client, data: dict) -> str:
    response = client.post("/bulk/select", data={**data, "csrf_token": csrf_token(client, "/jobs")})
    assert response.status_code == 303, response.get_data(as_text=True)[:300]
    return re.search(r"/bulk/[0-9a-f-]{36}", response.headers["Location"]).group(0)


def shown(doc: Element) -> dict:
    def table(testid: str, attr: str, cells: tuple[str, ...]) -> dict:
        return {tr[attr]: tuple(int(tr.one(c).text()) for c in cells)
                for tr in doc.one(testid).having(attr)}

    return {
        "selected": int(doc.one("selected-count").text()),
        "eligible": int(doc.one("eligible").text().split()[0]),
        "status": {k: v[0] for k, v in table("by-status", "data-status-row",
                                             ("status-jobs",)).items()},
        "type": table("by-type", "data-type-row", ("type-jobs", "type-eligible")),
        "age": {k: v[0] for k, v in table("by-age", "data-age-row", ("age-jobs",)).items()},
    }


def real(url: str, where: str, params, action: str) -> dict:
    allowed = list(SELECTION_FROM[action])
    by = {key: dict((r[0], r[1:] if key == "type" else r[1]) for r in rows(url, f"""
        SELECT {column}, count(*){extra} FROM background_jobs WHERE {where} GROUP BY 1""",
        [*([allowed] if key == "type" else []), *params]))
        for key, column, extra in (
            ("status", "status", ""),
            ("type", "type", ", count(*) FILTER (WHERE status = ANY(%s))"),
            ("age", AGE_SQL, ""))}
    total = sum(by["status"].values())
    return {"selected": total,
            "eligible": sum(n for s, n in by["status"].items() if s in allowed),
            "status": by["status"], "type": by["type"], "age": by["age"]}


def test_the_review_of_a_failed_selection_breaks_it_down_by_type_and_failure_age(
        operator, seeded):
    review = select(operator, {"action": "retry", "all_matching": "1", "status": "failed"})
    doc = page(operator, review)
    expected = real(seeded.url, "status = 'failed'", [], "retry")
    assert shown(doc) == expected
    # today's failures and the seeded five-day-old ones: two buckets, two codes' types
    assert set(expected["age"]) == {"hour", "week"} and len(expected["type"]) >= 2


def test_the_review_of_jobs_in_every_status_says_which_the_action_can_change(
        operator, seeded):
    ids = [r[0] for r in rows(seeded.url, "SELECT id FROM background_jobs")]
    for action in ("retry", "skip", "cancel"):
        doc = page(operator, select(operator, {"action": action,
                                               "job_id": [str(i) for i in ids]}))
        assert shown(doc) == real(seeded.url, "true", [], action), action


def test_each_narrowing_holds_exactly_the_jobs_of_its_bucket_or_type(operator, seeded):
    review = select(operator, {"action": "skip", "all_matching": "1", "status": "failed"})
    doc = page(operator, review)
    narrowed = []
    for button in doc.all(lambda e: e.attrs.get("data-testid") in ("narrow-age",
                                                                    "narrow-type")):
        form = next(f for f in doc.all(lambda e: e.tag == "form") if button in f.walk())
        fields = {i["name"]: i.attrs.get("value", "") for i in form.all(
            lambda e: e.tag == "input")}
        response = operator.post(form["action"], data=fields)
        assert response.status_code == 303
        narrowed.append((fields, page(operator, response.headers["Location"])))
    assert {bool(f.get("type")) for f, _ in narrowed} == {True, False}
    for fields, view in narrowed:
        where, params = "status = 'failed'", []
        if fields.get("type"):
            where, params = where + " AND type = %s", [fields["type"]]
        if fields.get("failed_from"):
            where, params = where + " AND failed_at >= %s::timestamptz", [*params,
                                                                         fields["failed_from"]]
        if fields.get("failed_to"):
            where, params = where + " AND failed_at < %s::timestamptz", [*params,
                                                                        fields["failed_to"]]
        assert shown(view) == real(seeded.url, where, params, "skip"), fields


def test_the_review_shows_the_set_as_selected_and_the_action_reports_what_moved(
        operator, seeded):
    expected = real(seeded.url, "status = 'failed'", [], "retry")
    review = select(operator, {"action": "retry", "all_matching": "1", "status": "failed"})
    moved = seeded.ids["old_failed"][1]
    with psycopg.connect(seeded.url) as conn:
        conn.execute("UPDATE background_jobs SET status = 'skipped', skipped_at = now() "
                     "WHERE id = %s", [moved])
    assert shown(page(operator, review)) == expected  # as counted when selected
    doc = page(operator, review)
    form = doc.one(lambda e: e.attrs.get("data-action") == "bulk-retry")
    fields = {i["name"]: i.attrs.get("value", "") for i in form.all(lambda e: e.tag == "input")}
    response = operator.post(form["action"], data={**fields, "reason": "figures", "mode": "all"})
    assert response.status_code == 303
    progress = page(operator, review)
    assert progress.one("bulk-changed").text() == str(expected["selected"] - 1)
    assert progress.one("bulk-left-alone").text() == "1"
    assert rows(seeded.url, "SELECT count(*) FROM job_audit WHERE bulk_id = %s",
                [review.rsplit("/", 1)[1]])[0][0] == expected["selected"] - 1
