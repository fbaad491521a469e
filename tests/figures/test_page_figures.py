"""Every figure of the Jobs list, a job's page, a failed group, Needs review, the audit log
and Schedules equals an independent query over the base tables.

Pages are read by `data-testid` and row attributes (tests/figures/html_tree.py); each
expected value is written here in SQL over `background_jobs`, `job_executions`,
`job_audit` and `job_schedules`, never with the console's own query. Ages shown against
the clock are checked against the database's clock read just before and just after the
request: the page's `now` lies between the two.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import psycopg
import pytest

from jobwarden import Registry, enqueue, job
from jobwarden.worker.core.states import ExecutionOutcome, JobStatus
from jobwarden.worker.duties.scheduler import publish, run_once
from jobwarden.worker.engine.completer import Completion, write_batch
from jobwarden.worker.engine.producer import claim
from jobwarden.worker.jobs.job_types import publish_job_types
from jobwarden.worker.ops import operations
from jobwarden.worker.ops.operations import mark_completed, pause_schedule
from jobwarden.worker.store.schema import JOB_STATUSES
from tests.figures.conftest import WORKER, registry, rows
from tests.figures.html_tree import Element, page

CURRENT_ERROR = ("failed", "unknown")  # statuses whose error code is the current state
ALL = 200  # a page size that holds the whole dataset: every matching row on one page


def seconds_shown(text: str) -> tuple[float, float]:
    """The interval of durations a compact age ("850ms", "4.2s", "3m 07s", "2h 05m",
    "2d 4h") stands for: what it was rounded or truncated from."""
    patterns = [
        (r"(\d+)ms", lambda m: (int(m[1]) / 1000 - 0.0005, int(m[1]) / 1000 + 0.0005)),
        (r"(\d+\.\d)s", lambda m: (float(m[1]) - 0.05, float(m[1]) + 0.05)),
        (r"(\d+)s", lambda m: (int(m[1]) - 0.5, int(m[1]) + 0.5)),
        (r"(\d+)m (\d\d)s", lambda m: (int(m[1]) * 60 + int(m[2]),) * 2),
        (r"(\d+)h (\d\d)m", lambda m: ((int(m[1]) * 60 + int(m[2])) * 60,) * 2),
        (r"(\d+)d (\d+)h", lambda m: ((int(m[1]) * 24 + int(m[2])) * 3600,) * 2),
    ]
    steps = {r"(\d+)m (\d\d)s": 1, r"(\d+)h (\d\d)m": 60, r"(\d+)d (\d+)h": 3600}
    for pattern, bounds in patterns:
        match = re.fullmatch(pattern, text)
        if match:
            low, high = bounds(match)
            return low, high + steps.get(pattern, 0)
    raise AssertionError(f"not an age: {text!r}")


def assert_age(text: str, before: float, after: float) -> None:
    """`text` shows an age that was between `before` and `after` seconds (a clock moved
    between the two readings; a stored duration has before == after)."""
    low, high = seconds_shown(text)
    assert low <= after + 1e-6 and before <= high + 1e-6, (text, before, after)


def db_seconds(url: str, sql: str, params=None) -> float | None:
    value = rows(url, sql, params)[0][0]
    return None if value is None else float(value)


def iso_of(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


# -- the Jobs list --------------------------------------------------------------------------

def job_rows_shown(doc: Element) -> list[dict]:
    """The Jobs list's rows, each as the figures a reader sees."""
    shown = []
    for tr in doc.having("data-job-id"):
        if tr.tag != "tr":
            continue
        shown.append({
            "id": int(tr["data-job-id"]),
            "status": tr.one("row-status").one(lambda e: "data-status" in e.attrs)["data-status"],
            "cancel_requested": "cancel requested" in tr.one("row-status").text(),
            "queue": tr.one("row-queue").text(),
            "type": tr.one("row-type").text(),
            "attempts": tr.one("row-attempts").text(),
            "error": tr.one("row-error-code").text(),
            "scheduled": tr.one("row-scheduled").time(),
            "created": tr.one("row-created").time(),
            "key": tr.one("row-idempotency-key").text(),
        })
    return shown


def job_rows_real(url: str, where: str = "true", params=None) -> list[dict]:
    """The same figures from background_jobs, newest first."""
    return [{
        "id": id_, "status": status, "cancel_requested": cancel is not None, "queue": queue,
        "type": type_, "attempts": f"{attempts}/{max_attempts}",
        "error": ("" if code is None else code if status in CURRENT_ERROR
                  else f"earlier: {code}"),
        # a pending job's available_at: when it becomes runnable
        "scheduled": iso_of(available) if status == "pending" else None,
        "created": iso_of(created), "key": key or "",
    } for id_, status, cancel, queue, type_, attempts, max_attempts, code, available, created, key
        in rows(url, f"SELECT id, status, cancel_requested_at, queue, type, attempts, "
                     f"max_attempts, last_error_code, available_at, created_at, idempotency_key "
                     f"FROM background_jobs WHERE {where} ORDER BY id DESC", params)]


def distinct(url: str, column: str) -> list[str]:
    return [r[0] for r in rows(url, f"SELECT DISTINCT {column} FROM background_jobs "
                                    f"WHERE {column} IS NOT NULL ORDER BY 1")]


def test_the_jobs_list_shows_every_job_newest_first_with_its_figures(operator, audited):
    doc = page(operator, f"/jobs?limit={ALL}")
    real = job_rows_real(audited.url)
    assert len(real) > 50  # more than one default page
    assert any(r["cancel_requested"] for r in real) and any(r["key"] for r in real)
    assert job_rows_shown(doc) == real
    assert doc.maybe("older") is None and doc.maybe("newer") is None


@pytest.mark.parametrize("column", ["status", "queue", "type", "error_code"])
def test_each_filter_of_the_jobs_list_shows_exactly_the_matching_jobs(operator, seeded,
                                                                      column):
    sql_column = "last_error_code" if column == "error_code" else column
    values = JOB_STATUSES if column == "status" else distinct(seeded.url, sql_column)
    assert len(values) >= 3
    # A status the list does not know is no filter (the form then says "any"); any other
    # text matches nothing.
    unmatched = [] if column == "status" else ["no-such-value"]
    for value in [*values, *unmatched]:
        doc = page(operator, "/jobs?" + urlencode({column: value, "limit": ALL}))
        real = job_rows_real(seeded.url, f"{sql_column} = %s", [value])
        assert job_rows_shown(doc) == real, value
        if not real:
            assert "No jobs match these filters." in doc.one("job-rows-empty").text()


def test_the_jobs_list_combines_its_filters(operator, seeded):
    combos = rows(seeded.url, "SELECT DISTINCT status, queue, type, last_error_code "
                              "FROM background_jobs")
    assert len(combos) > 10
    for status, queue, type_, code in combos:
        args = {"status": status, "queue": queue, "type": type_, "error_code": code or ""}
        doc = page(operator, "/jobs?" + urlencode({**args, "limit": ALL}))
        if code is None:
            where, params = "status = %s AND queue = %s AND type = %s", [status, queue, type_]
        else:
            where = "status = %s AND queue = %s AND type = %s AND last_error_code = %s"
            params = [status, queue, type_, code]
        assert job_rows_shown(doc) == job_rows_real(seeded.url, where, params), args


def test_the_jobs_search_finds_a_job_by_id_or_by_idempotency_key(operator, seeded):
    with psycopg.connect(seeded.url) as conn:
        keyed = enqueue(conn, "mail.send", {}, idempotency_key="order-77",
                        registry=registry())
        conn.commit()
    for q, where, params in [("order-77", "idempotency_key = %s", ["order-77"]),
                             (str(seeded.ids["running"][0]), "id = %s",
                              [seeded.ids["running"][0]]),
                             ("order-78", "false", None)]:
        doc = page(operator, "/jobs?" + urlencode({"q": q}))
        assert job_rows_shown(doc) == job_rows_real(seeded.url, where, params), q
    assert [r["id"] for r in job_rows_shown(page(operator, "/jobs?q=order-77"))] == [keyed]


def walk(client, first: str, link: str) -> tuple[list[list[int]], str]:
    """The ids of each page, following the `link` ("older" or "newer") until there is
    none, and the last page's address."""
    pages, url = [], first
    while True:
        doc = page(client, url)
        pages.append([r["id"] for r in job_rows_shown(doc)])
        anchor = doc.maybe(link)
        if anchor is None:
            return pages, url
        url = anchor["href"]
        assert len(pages) < 50, "the pager does not end"


@pytest.mark.parametrize("filters", [{}, {"status": "pending"}, {"queue": "email"}])
def test_the_jobs_pager_walks_every_matching_job_once_each_way(operator, seeded, filters):
    size = 7
    where = " AND ".join(f"{k} = %s" for k in filters) or "true"
    real = [r["id"] for r in job_rows_real(seeded.url, where, list(filters.values()))]
    assert len(real) > size
    older, oldest = walk(operator, "/jobs?" + urlencode({**filters, "limit": size}), "older")
    assert older == [real[i:i + size] for i in range(0, len(real), size)]
    # Back from the oldest page, "Newer" shows the same pages in turn, up to the newest.
    newer, _ = walk(operator, oldest, "newer")
    assert newer == older[::-1]


# -- a job's page ---------------------------------------------------------------------------

#: (which seeded job, its index): one of each history: the first handed-back job was then
#: cancelled by an operator, the first declined one retried, the first old failure skipped.
JOBS = [("retried", 0), ("handed_back", 1), ("handed_back", 0), ("recovered", 0), ("failed_timeout", 0),
        ("failed_declined", 1), ("failed_declined", 0), ("old_failed", 0), ("running", 0),
        ("completed", 0), ("unknown", 0), ("skipped", 0)]


def stale_running(url: str, job_id: int) -> None:
    """Make a running job look like its worker stopped: its execution started 2 hours ago
    (42 s after it was due), its last heartbeat 1 h 05 m 30 s ago, its lease over 10 s ago (the clock is written,
    not waited for)."""
    with psycopg.connect(url) as conn:
        # The running execution's record is its job row (migration 0061): its
        # scheduled_at is the job's available_at.
        conn.execute("UPDATE background_jobs SET started_at = now() - interval '2 hours', "
                     "available_at = now() - interval '2 hours 42 seconds', "
                     "heartbeat_at = now() - interval '65 minutes 30 seconds', "
                     "lease_expires_at = now() - interval '10 seconds' WHERE id = %s",
                     [job_id])
        conn.commit()


def job_clock(url: str, job_id: int) -> dict:
    """The job's clock-dependent ages now, on the database clock."""
    heartbeat, lease_left = rows(url, "SELECT extract(epoch FROM now() - heartbeat_at), "
                                      "extract(epoch FROM lease_expires_at - now()) "
                                      "FROM background_jobs WHERE id = %s", [job_id])[0]
    running = dict(rows(url, "SELECT execution_id::text, extract(epoch FROM now() - started_at) "
                             "FROM job_executions_all WHERE job_id = %s AND finished_at IS NULL",
                        [job_id]))
    return {"heartbeat": heartbeat, "lease_left": lease_left, "running": running}


def check_job_head(doc: Element, url: str, job_id: int, before: dict, after: dict) -> None:
    (status, attempts, max_attempts, worker, code, error, available, cancel) = rows(url, """
        SELECT status, attempts, max_attempts, worker_id, last_error_code, last_error,
               available_at, cancel_requested_at FROM background_jobs WHERE id = %s""",
        [job_id])[0]
    live = doc.one(lambda e: e.attrs.get("id") == "job-live")
    assert live.one("job-status").one(lambda e: "data-status" in e.attrs)["data-status"] == status
    assert live.one("attempts").text() == f"{attempts}/{max_attempts}"
    assert live.one("job-worker").text() == (worker or "—")
    assert live.one("available-at").time() == iso_of(available)
    asked = live.maybe("cancel-requested")
    assert (asked.time() if asked is not None else None) == iso_of(cancel)
    heartbeat = live.one("heartbeat-age")
    if status == "running":
        assert_age(heartbeat.text().replace("lease expired", "").strip(),
                   float(before["heartbeat"]), float(after["heartbeat"]))
        expired = after["lease_left"] < 0
        assert (heartbeat.maybe("lease-expired") is not None) == expired
    else:
        assert heartbeat.text() == "—"
    current, earlier = live.maybe("current-error"), live.maybe("earlier-error")
    if code is None and error is None:
        assert current is None and earlier is None
    else:
        box = current if status in CURRENT_ERROR else earlier
        assert box is not None and (earlier if box is current else current) is None
        assert (code or "error") in box.text()


def check_executions(doc: Element, url: str, job_id: int, before: dict, after: dict) -> None:
    real = rows(url, """
        SELECT execution_id::text, attempt, worker_id, coalesce(outcome, 'running'),
               error_code, started_at,
               extract(epoch FROM started_at - scheduled_at),
               -- a lost execution ran until its last sign of life, not until recovery
               extract(epoch FROM CASE WHEN outcome = 'worker_lost'
                                       THEN coalesce(heartbeat_at, started_at)
                                       ELSE finished_at END - started_at)
        FROM job_executions_all WHERE job_id = %s ORDER BY started_at, id""", [job_id])
    shown = doc.having("data-execution-id")
    assert [tr["data-execution-id"] for tr in shown] == [r[0] for r in real]
    for tr, (eid, attempt, worker, outcome, code, started, waited, took) in zip(
            shown, real, strict=True):
        assert tr.one("execution-attempt").text() == str(attempt)
        assert tr.one("execution-worker").text() == worker
        assert tr.one("execution-outcome").text() == outcome
        assert tr.one("execution-started").time() == iso_of(started)
        error = tr.maybe("execution-error-code")
        assert (error.text() if error is not None else None) == code
        assert_age(tr.one("execution-waited").text(), float(waited), float(waited))
        duration = tr.one("execution-duration").text()
        if outcome == "running":
            assert duration.endswith(" so far")
            assert_age(duration.removesuffix(" so far"), float(before["running"][eid]),
                       float(after["running"][eid]))
        else:
            assert_age(duration, float(took), float(took))


def check_audit_trail(doc: Element, url: str, job_id: int) -> None:
    real = rows(url, """
        SELECT id, at, actor, role, action, coalesce(from_status, '—'),
               coalesce(to_status, '—'), reason
        FROM job_audit WHERE job_id = %s ORDER BY at DESC, id DESC""", [job_id])
    trail = doc.maybe("job-audit")
    if not real:
        assert trail is None and "No operator has acted on this job." in doc.text()
        return
    shown = [(int(tr["data-audit-id"]), tr.one("audit-at").time(), tr.one("audit-actor").text(),
              tr.one("audit-role").text(), tr.one("audit-action").text(),
              *tr.one("audit-transition").text().split(" → "), tr.one("audit-reason").text())
             for tr in trail.having("data-audit-id")]
    assert shown == [(id_, iso_of(at), *rest) for id_, at, *rest in real]


def check_job_page(client, url: str, job_id: int) -> Element:
    """Every figure of the job's page against its rows, the clock read either side."""
    before = job_clock(url, job_id)
    doc = page(client, f"/jobs/{job_id}")
    after = job_clock(url, job_id)
    check_job_head(doc, url, job_id, before, after)
    check_executions(doc, url, job_id, before, after)
    check_audit_trail(doc, url, job_id)
    return doc


@pytest.mark.parametrize(("kind", "index"), JOBS)
def test_a_jobs_page_shows_its_state_attempts_executions_and_audit_trail(operator, seeded,
                                                                          kind, index):
    job_id = seeded.ids[kind][index]
    if kind == "running":
        stale_running(seeded.url, job_id)
    check_job_page(operator, seeded.url, job_id)


def run_attempts(url: str, outcomes: list[tuple[JobStatus, ExecutionOutcome, str]]) -> int:
    """A new job of its own type, executed once per outcome through the runtime's claim and
    completer (each retry due at once); returns its id."""
    reg = Registry()
    job("mail.resend", queue="email", lease=30.0, max_attempts=len(outcomes),
        registry=reg)(lambda ctx, payload: None)
    with psycopg.connect(url) as conn:
        job_id = enqueue(conn, "mail.resend", {"to": "someone"}, registry=reg)
        conn.commit()
        for status, outcome, code in outcomes:
            taken = claim(conn, types=["mail.resend"], leases=[30.0], queues=None, limit=1,
                          worker_id=WORKER)
            conn.commit()
            assert [j.id for j in taken] == [job_id]
            j = taken[0]
            write_batch(conn, [Completion(job_id=j.id, execution_id=j.execution_id,
                                          type=j.type, attempt=j.attempt, lease=30.0,
                                          status=status, outcome=outcome, error_code=code,
                                          error=f"{code} (seeded)", queue=j.queue)])
            conn.commit()
    return job_id


def test_a_job_retried_twice_then_failed_shows_each_execution_in_order(operator, seeded):
    job_id = run_attempts(seeded.url, [
        (JobStatus.PENDING, ExecutionOutcome.RETRY, "SMTP_TIMEOUT"),
        (JobStatus.PENDING, ExecutionOutcome.RETRY, "SMTP_421"),
        (JobStatus.FAILED, ExecutionOutcome.FAILED, "MAILBOX_FULL")])
    doc = check_job_page(operator, seeded.url, job_id)
    assert [tr.one("execution-error-code").text() for tr in doc.having("data-execution-id")] \
        == ["SMTP_TIMEOUT", "SMTP_421", "MAILBOX_FULL"]


def test_a_fresh_running_job_shows_its_heartbeat_and_time_so_far_without_a_lease_warning(
        operator, seeded):
    job_id = seeded.ids["running"][1]
    assert job_clock(seeded.url, job_id)["lease_left"] > 0
    doc = check_job_page(operator, seeded.url, job_id)
    assert doc.maybe("lease-expired") is None


def test_the_seeded_histories_are_the_ones_the_job_pages_are_checked_on(seeded):
    """The job pages above cover a retry, a hand-back, a recovery, failures, an operator's
    retry and skip, a running job: if the seed changed, say so here, not by a vacuous pass."""
    def outcomes(kind, index=0):
        return [r[0] for r in rows(seeded.url, "SELECT coalesce(outcome, 'running') FROM "
                                   "job_executions_all WHERE job_id = %s ORDER BY started_at",
                                   [seeded.ids[kind][index]])]
    assert outcomes("retried") == ["retry"]
    assert outcomes("handed_back") == ["handed_back"]
    assert outcomes("recovered") == ["worker_lost"]
    assert outcomes("failed_timeout") == ["failed"]
    assert outcomes("running") == ["running"]
    audited = dict(rows(seeded.url, "SELECT job_id, action FROM job_audit"))
    assert audited[seeded.ids["failed_declined"][0]] == "retry"
    assert audited[seeded.ids["old_failed"][0]] == "skip"


# -- a failed group -------------------------------------------------------------------------

def failed_codes(url: str) -> list[str]:
    return [r[0] for r in rows(url, "SELECT DISTINCT last_error_code FROM background_jobs "
                                    "WHERE status = 'failed' ORDER BY 1")]


def group_targets(url: str) -> list[tuple[str, str | None]]:
    """Every failed code, alone and with each of its types."""
    return [(code, None) for code in failed_codes(url)] + rows(
        url, "SELECT DISTINCT last_error_code, type FROM background_jobs "
             "WHERE status = 'failed' ORDER BY 1, 2")


def test_each_failed_group_page_counts_its_jobs_by_type_and_lists_them(operator, seeded):
    targets = group_targets(seeded.url)
    assert len({code for code, _ in targets}) >= 3 and any(t for _, t in targets)
    for code, job_type in targets:
        doc = page(operator, "/failed/group?" + urlencode(
            {"code": code, **({"type": job_type} if job_type else {})}))
        by_type = {t: (n, iso_of(last)) for t, n, last in rows(seeded.url, """
            SELECT type, count(*), max(failed_at) FROM background_jobs
            WHERE status = 'failed' AND last_error_code = %s GROUP BY type""", [code])}
        shown = {tr["data-type"]: (int(tr.one("type-jobs").text()),
                                   tr.one("type-last-seen").time())
                 for tr in doc.one("group-by-type").having("data-type")}
        assert shown == by_type, code
        where = "status = 'failed' AND last_error_code = %s"
        params = [code]
        if job_type:
            where, params = where + " AND type = %s", [code, job_type]
        assert job_rows_shown(doc) == job_rows_real(seeded.url, where, params), (code, job_type)


def test_a_failed_groups_buttons_say_how_many_jobs_they_act_on_and_act_on_those(
        operator, seeded):
    for code, job_type in group_targets(seeded.url):
        args = {"code": code, **({"type": job_type} if job_type else {})}
        doc = page(operator, "/failed/group?" + urlencode(args))
        jobs, seen_until = rows(seeded.url, """
            SELECT count(*), max(failed_at) FROM background_jobs
            WHERE status = 'failed' AND last_error_code = %s
              AND (%s::text IS NULL OR type = %s)""", [code, job_type, job_type])[0]
        assert jobs > 0
        assert doc.one("preview-count").text() == str(jobs)
        assert doc.one("preview-seen-until").time() == iso_of(seen_until)
        for action, label in (("retry", "Retry"), ("skip", "Skip")):
            button = doc.one(f"bulk-{action}")
            assert button.text() == f"{label} {jobs} job(s)…", (code, job_type)
            # What the button posts is stored as the selection the operator reviews.
            form = doc.one(lambda e, a=action: e.attrs.get("data-action") == f"bulk-{a}")
            fields = {i["name"]: i.attrs.get("value", "")
                      for i in form.all(lambda e: e.tag == "input")}
            response = operator.post(form["action"], data=fields)
            assert response.status_code == 303
            review = page(operator, response.headers["Location"])
            assert review.one("selected-count").text() == str(jobs), (code, job_type, action)
            assert review.one("eligible").text().startswith(f"{jobs} of {jobs} "), action


def test_a_group_of_a_code_no_failed_job_has_shows_nothing_to_act_on(operator, seeded):
    codes = [r[0] for r in rows(seeded.url, """
        SELECT DISTINCT last_error_code FROM background_jobs WHERE last_error_code IS NOT NULL
        EXCEPT SELECT last_error_code FROM background_jobs WHERE status = 'failed'""")]
    assert codes  # codes of unknown, skipped and retried jobs only
    for code in codes:
        doc = page(operator, "/failed/group?" + urlencode({"code": code}))
        assert doc.one("preview-count").text() == "0"
        assert doc.maybe("bulk-retry") is None and doc.maybe("bulk-skip") is None
        assert doc.one("group-by-type").having("data-type") == []
        assert job_rows_shown(doc) == []


# -- Needs review ---------------------------------------------------------------------------

def review_cards_shown(doc: Element) -> list[tuple]:
    return [(int(card["data-job-id"]), card.one("review-type").text(),
             card.one("review-queue").text(), card.one("review-attempts").text(),
             card.one("review-since").time(), card.one("review-error-code").text())
            for card in doc.all(lambda e: "review-item" in e.attrs.get("class", "").split())]


def review_cards_real(url: str) -> list[tuple]:
    """Unknown jobs, newest first, each since its latest execution ended."""
    return [(id_, type_, queue, f"{attempts}/{max_attempts}", iso_of(since), code or "UNKNOWN")
            for id_, type_, queue, attempts, max_attempts, since, code in rows(url, """
        SELECT j.id, j.type, j.queue, j.attempts, j.max_attempts,
               coalesce((SELECT finished_at FROM job_executions e WHERE e.job_id = j.id
                         ORDER BY e.started_at DESC LIMIT 1), j.heartbeat_at, j.started_at),
               j.last_error_code
        FROM background_jobs j WHERE j.status = 'unknown' ORDER BY j.id DESC""")]


def test_needs_review_lists_every_unknown_job_with_its_figures(operator, seeded):
    doc = page(operator, "/review")
    real = review_cards_real(seeded.url)
    assert len(real) == len(seeded.ids["unknown"])
    assert review_cards_shown(doc) == real
    assert doc.one("nav-badge-review").text() == str(len(real))
    assert doc.maybe("older") is None and doc.maybe("review-empty") is None


def test_needs_review_pages_through_every_unknown_job_once(operator, seeded):
    shown, url = [], "/review?limit=1"
    while url:
        doc = page(operator, url)
        cards = review_cards_shown(doc)
        assert len(cards) == 1
        shown += cards
        older = doc.maybe("older")
        url = older["href"] if older is not None else None
    assert shown == review_cards_real(seeded.url)


def test_needs_review_says_nothing_needs_review_when_no_job_is_unknown(operator, seeded):
    with psycopg.connect(seeded.url) as conn:
        for job_id in seeded.ids["unknown"]:
            assert mark_completed(conn, job_id, actor="ann", role="operator",
                                  reason="provider says done").ok
        conn.commit()
    doc = page(operator, "/review")
    assert review_cards_shown(doc) == review_cards_real(seeded.url) == []
    assert doc.one("review-empty") is not None


# -- Schedules ------------------------------------------------------------------------------

SCHEDULER = "figures-scheduler"
#: type -> (cron, zone, catch_up); published a day ago, so the first two have run since.
SCHEDULES = {"digest.daily": ("0 3 * * *", "Europe/Berlin", False),
             "cache.warm": ("*/5 * * * *", "UTC", True),
             "tidy.hourly": ("0 * * * *", "UTC", False)}
#: published now, with a tick months away: never run.
YEARLY = {"report.yearly": ("0 0 1 1 *", "America/New_York", False)}


def _schedule_registry(schedules: dict) -> Registry:
    reg = Registry()
    for name, (cron, zone, catch_up) in schedules.items():
        job(name, queue="scheduled", schedule=cron, schedule_tz=zone, catch_up=catch_up,
            registry=reg)(lambda ctx, payload: None)
    return reg


@pytest.fixture
def scheduled(seeded):
    """The seeded dataset plus four schedules, through the scheduler's own API: one ran, its
    job failed and it is paused; one catches up and is still behind (a pass enqueues at most
    CATCH_UP_LIMIT ticks); one ran and its job was pruned; one never ran."""
    reg, yearly = _schedule_registry(SCHEDULES), _schedule_registry(YEARLY)
    with psycopg.connect(seeded.url) as conn:
        now = conn.execute("SELECT now()").fetchone()[0]
        publish_job_types(conn, [*reg, *yearly], published_by=SCHEDULER)
        publish(conn, reg, SCHEDULER, now=now - timedelta(days=1))
        publish(conn, yearly, SCHEDULER, now=now)
        conn.commit()
        ran = run_once(conn, reg, now=now)
        assert set(ran) == set(SCHEDULES) and len(ran["cache.warm"]) > 1
        digest = claim(conn, types=["digest.daily"], leases=[30.0], queues=None, limit=1,
                       worker_id=WORKER)
        conn.commit()
        write_batch(conn, [Completion(job_id=j.id, execution_id=j.execution_id, type=j.type,
                                      attempt=j.attempt, lease=30.0, status=JobStatus.FAILED,
                                      outcome=ExecutionOutcome.FAILED,
                                      error_code="PROVIDER_5XX", error="provider 503",
                                      queue=j.queue)
                           for j in digest])
        conn.commit()
        assert set(ran["digest.daily"]) == {j.id for j in digest}
        assert pause_schedule(conn, "digest.daily", actor="carol", role="operator",
                              reason="provider migration").ok
        # what `jobwarden prune` does to an old job: the schedule keeps its id
        conn.execute("DELETE FROM background_jobs WHERE id = ANY(%s)", [ran["tidy.hourly"]])
        conn.commit()
    return seeded


def schedules_real(url: str) -> dict[str, dict]:
    out = {}
    for (type_, cron, zone, catch_up, paused, next_run, last_run, last_id, status,
         code) in rows(url, """
            SELECT s.type, s.cron, s.timezone, s.catch_up, s.paused, s.next_run_at,
                   s.last_run_at, s.last_job_id, j.status, j.last_error_code
            FROM job_schedules s LEFT JOIN background_jobs j ON j.id = s.last_job_id"""):
        outcome = ("no run yet" if last_id is None else f"job #{last_id} pruned"
                   if status is None else " ".join(filter(None, (status, code))))
        out[type_] = {"cron": cron, "zone": zone + (", catches up" if catch_up else ""),
                      "state": "paused" if paused else "active",
                      # paused, it runs at no time: resumed, from its next tick then
                      "next": "none while paused" if paused
                      else (iso_of(next_run), local_time(next_run, zone)),
                      "last": (iso_of(last_run), local_time(last_run, zone)) if last_run
                      else "never", "outcome": outcome}
    return out


def local_time(value: datetime, zone: str) -> str:
    local = value.astimezone(ZoneInfo(zone))
    return f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}"


def shown_time(cell: Element) -> tuple[str, str] | str:
    time = cell.maybe(lambda e: e.tag == "time")
    return cell.text() if time is None else (time["datetime"], time.text())


def test_the_schedules_page_shows_each_schedules_state_next_and_last_run_and_outcome(
        operator, scheduled):
    doc = page(operator, "/schedules")
    shown = {tr["data-schedule"]: {
        "cron": tr.one("schedule-cron").text(), "zone": tr.one("schedule-zone").text(),
        "state": tr.one("schedule-state").text(), "next": shown_time(tr.one("next-run")),
        "last": shown_time(tr.one("last-run")), "outcome": tr.one("last-outcome").text(),
    } for tr in doc.having("data-schedule")}
    real = schedules_real(scheduled.url)
    assert shown == real
    assert {s["state"] for s in real.values()} == {"active", "paused"}
    assert {s["outcome"].split()[0] for s in real.values()} >= {"failed", "no", "job"}


def test_a_schedules_next_run_says_how_far_off_or_how_late_it_is(operator, scheduled):
    def left():
        return dict(rows(scheduled.url, "SELECT type, extract(epoch FROM next_run_at - now()) "
                                        "FROM job_schedules WHERE NOT paused"))
    before = left()
    doc = page(operator, "/schedules")
    after = left()
    for tr in doc.having("data-schedule"):
        type_ = tr["data-schedule"]
        if type_ not in before:
            continue  # paused
        relative = tr.one("next-run").one(lambda e: e.tag == "span").text()
        if before[type_] > 0:
            assert relative.startswith("in "), (type_, relative)
            assert_age(relative.removeprefix("in "), float(after[type_]), float(before[type_]))
        else:  # behind: a catch-up schedule's pass enqueues at most CATCH_UP_LIMIT ticks
            assert relative.endswith(" ago"), (type_, relative)
            assert_age(relative.removesuffix(" ago"), -float(before[type_]),
                       -float(after[type_]))
    assert min(before.values()) < 0 < max(before.values())


# -- the audit log --------------------------------------------------------------------------

BULK = "6f1d2c3b-0a4e-4b8f-9c7d-5e6f7a8b9c0d"


@pytest.fixture
def audited(scheduled):
    """The scheduled dataset plus the other kinds of operator action, by other actors: a
    queue paused, a job run now and one moved, a cancel requested of a running job, and a
    bulk retry of a reviewed selection (the schedule pause and ann's actions are there)."""
    bob = {"actor": "bob", "role": "operator"}
    with psycopg.connect(scheduled.url) as conn:
        pending = conn.execute("SELECT max(id) FROM background_jobs WHERE status = 'pending' "
                               "AND attempts = 0").fetchone()[0]
        assert operations.pause_queue(conn, "email", **bob, reason="smtp relay swap").ok
        # ann retried this one: its page shows two actions, newest first
        assert operations.reschedule_job(conn, scheduled.ids["failed_declined"][0], **bob,
                                         reason="customer waiting", request_id="req-7").ok
        assert operations.reschedule_job(conn, pending, **bob, reason="after the window",
                                         run_at=datetime.now(UTC) + timedelta(hours=3)).ok
        assert operations.cancel_job(conn, scheduled.ids["running"][2], **bob,
                                     reason="wrong recipient").ok
        failed = [r[0] for r in conn.execute(
            "SELECT id FROM background_jobs WHERE status = 'failed' "
            "AND last_error_code = 'SMTP_TIMEOUT'")]
        assert operations.act_on_selection(conn, "retry", failed, actor="carol",
                                           role="admin", reason="relay is back",
                                           bulk_id=BULK).jobs == len(failed) > 1
        conn.commit()
    return scheduled


def audit_rows_shown(doc: Element) -> list[tuple]:
    return [(int(tr["data-audit-id"]), tr.one("audit-at").time(), tr.one("audit-actor").text(),
             tr.one("audit-role").text(), tr.one("audit-action").text(),
             tr.one("audit-subject").text(), tr.one("audit-transition").text(),
             tr.one("audit-reason").text(), tr.one("audit-request").text())
            for tr in doc.one("audit-log").having("data-audit-id")]


def audit_rows_real(url: str, where: str = "true", params=None) -> list[tuple]:
    """job_audit, newest first, each row's subject as a reader names it: the job, the queue
    or the schedule acted on."""
    return [(id_, iso_of(at), actor, role, action,
             f"#{job_id}" if job_id else f"queue {queue}" if queue
             else f"schedule {schedule}" if schedule else "—",
             f"{from_status or '—'} → {to_status or '—'}", reason, request or "")
            for (id_, at, actor, role, action, job_id, queue, schedule, from_status,
                 to_status, reason, request) in rows(url, f"""
        SELECT id, at, actor, role, action, job_id, details->>'queue', details->>'schedule',
               from_status, to_status, reason, request_id
        FROM job_audit WHERE {where} ORDER BY id DESC""", params)]


def test_the_audit_log_shows_every_operator_action_with_who_what_and_why(operator, audited):
    real = audit_rows_real(audited.url)
    assert len({r[4] for r in real}) >= 7 and len({r[2] for r in real}) == 3
    assert audit_rows_shown(page(operator, f"/audit?limit={ALL}")) == real


@pytest.mark.parametrize(("arg", "column"), [("actor", "actor"), ("action", "action"),
                                             ("job", "job_id"), ("bulk", "bulk_id")])
def test_each_filter_of_the_audit_log_shows_exactly_the_matching_actions(operator, audited,
                                                                         arg, column):
    values = [r[0] for r in rows(audited.url, f"SELECT DISTINCT {column}::text FROM job_audit "
                                              f"WHERE {column} IS NOT NULL")]
    assert values
    absent = {"job": "999999", "bulk": "00000000-0000-4000-8000-000000000000"}
    for value in [*values, absent.get(arg, "nobody")]:
        doc = page(operator, "/audit?" + urlencode({arg: value, "limit": ALL}))
        real = audit_rows_real(audited.url, f"{column}::text = %s", [value])
        assert audit_rows_shown(doc) == real, (arg, value)


def test_the_audit_logs_action_filter_offers_every_action_on_record(operator, audited):
    doc = page(operator, "/audit")
    offered = {o["value"] for o in doc.one("audit-action-filter").all(lambda e: e.tag == "option")}
    recorded = {r[0] for r in rows(audited.url, "SELECT DISTINCT action FROM job_audit")}
    assert recorded - offered == set()


def test_a_bulk_actions_summary_counts_the_jobs_it_changed(operator, audited):
    doc = page(operator, "/audit?" + urlencode({"bulk": BULK}))
    (actor, reason, jobs), = rows(audited.url, "SELECT actor, reason, count(*) FROM job_audit "
                                               "WHERE bulk_id = %s GROUP BY 1, 2", [BULK])
    summary = doc.one("bulk-summary")
    assert (summary.one("bulk-count").text(), summary.one("bulk-actor").text(),
            summary.one("bulk-reason").text()) == (str(jobs), actor, reason)


def test_the_audit_log_pages_through_every_action_once_keeping_its_filter(operator, audited):
    for filters in ({}, {"actor": "bob"}):
        shown, url = [], "/audit?" + urlencode({**filters, "limit": 2})
        while url:
            doc = page(operator, url)
            found = audit_rows_shown(doc)
            assert 1 <= len(found) <= 2
            shown += found
            older = doc.maybe("older")
            url = older["href"] if older is not None else None
        where = " AND ".join(f"{k} = %s" for k in filters) or "true"
        assert shown == audit_rows_real(audited.url, where, list(filters.values()))


def test_the_page_of_every_job_an_operator_acted_on_shows_its_figures(operator, audited):
    """Bulk-retried, run now, moved, asked to cancel, skipped, cancelled, retried: each
    job's page against its rows."""
    acted = [r[0] for r in rows(audited.url, "SELECT DISTINCT job_id FROM job_audit "
                                             "WHERE job_id IS NOT NULL ORDER BY 1")]
    assert len(acted) >= 7
    assert rows(audited.url, "SELECT max(n) FROM (SELECT count(*) AS n FROM job_audit "
                             "GROUP BY job_id) c")[0][0] >= 2
    for job_id in acted:
        check_job_page(operator, audited.url, job_id)
