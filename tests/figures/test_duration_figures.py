"""A job type's duration chart: each bucket's p50, p95 and count against percentile_cont
over job_executions, bucket by bucket; its version and worker-start marks against the
rows that make them.

The executions are written through the runtime's own statements (claim, then
finish_executions with the handler's start set back by the duration wanted, in the same
transaction, so the duration written is exact) and then moved to the moments wanted, as
the history would stand: on both sides of a bucket's start and of the window's start,
with a lost worker's, a hand-back's, a cancel's and an unknown end (none a handler's
duration) and another type's in the same bucket, each long enough to move a p95 if it
were counted.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.types.json import Jsonb

from jobwarden import Registry, enqueue, job
from jobwarden.console.web.charts import (
    BOTTOM,
    DUR_H,
    DUR_TOP,
    DUR_W,
    LEFT,
    LONE_DASH,
    RIGHT,
    nice_ceiling,
)
from jobwarden.worker.core.states import ExecutionOutcome as O
from jobwarden.worker.core.states import JobStatus as S
from jobwarden.worker.duties.recovery import recover_stale_running
from jobwarden.worker.engine.completer import Completion, hand_back, write_batch
from jobwarden.worker.engine.producer import claim
from jobwarden.worker.store.queries import Q
from tests.figures.html_tree import Element, page

TYPE, OTHER = "report.build", "mail.send"
LEASE = 30.0
WORKER, NEW_WORKER, OTHER_WORKER = "old-host:1:aaaa", "new-host:2:bbbb", "other-host:3:cccc"
HANDLER_ENDED = ("completed", "retry", "failed", "skipped", "snoozed", "timeout")
#: status the job takes, and error code, per outcome written through finish_executions
ENDS = {O.COMPLETED: (S.COMPLETED, None), O.RETRY: (S.PENDING, "E_RETRY"),
        O.FAILED: (S.FAILED, "E_FAILED"), O.SKIPPED: (S.SKIPPED, None),
        O.SNOOZED: (S.PENDING, None), O.TIMEOUT: (S.PENDING, "TIMEOUT"),
        O.UNKNOWN: (S.UNKNOWN, "AMBIGUOUS"), O.CANCELLED: (S.CANCELLED, "CANCELLED")}


def registry() -> Registry:
    reg = Registry()
    for name in (TYPE, OTHER):
        job(name, queue="q", lease=LEASE, registry=reg)(lambda ctx, payload: None)
    return reg


def register(conn, worker: str, types: list[str], started_ago_s: float) -> None:
    conn.execute(Q.register_worker, {
        "worker_id": worker, "host": worker.split(":")[0], "pid": 1, "queues": ["q"],
        "lanes": Jsonb([{"queues": ["q"], "slots": 4, "shared": True}]),
        "job_types": types, "concurrency": 4, "version": "test"})
    conn.execute("UPDATE job_workers SET started_at = now() - make_interval(secs => %s) "
                 "WHERE worker_id = %s", [started_ago_s, worker])
    conn.commit()


def ran(conn, reg, job_type: str, items: list[tuple[float, float, O]],
        worker: str = WORKER) -> None:
    """Executions of `job_type` by `worker`, each (finished at, epoch seconds; duration
    in ms; outcome), written by finish_executions and then moved to that moment."""
    for _ in items:
        enqueue(conn, job_type, {}, registry=reg)
    conn.commit()
    jobs = claim(conn, types=[job_type], leases=[LEASE], queues=None, limit=len(items),
                 worker_id=worker)
    conn.commit()
    assert len(jobs) == len(items)
    with conn.transaction():
        for j, (_, ms, _) in zip(jobs, items, strict=True):
            conn.execute("UPDATE background_jobs SET started_at = now() - "
                         "make_interval(secs => %s) WHERE id = %s", [ms / 1000, j.id])
        written = write_batch(conn, [
            Completion(job_id=j.id, execution_id=j.execution_id, type=j.type,
                       attempt=j.attempt, lease=LEASE, status=ENDS[outcome][0],
                       outcome=outcome, error_code=ENDS[outcome][1], delay=3600,
                       queue=j.queue)
            for j, (_, _, outcome) in zip(jobs, items, strict=True)])
        assert len(written) == len(items)
    with conn.transaction():
        for j, (at, _, _) in zip(jobs, items, strict=True):
            conn.execute("UPDATE job_executions SET finished_at = to_timestamp(%s), "
                         "started_at = to_timestamp(%s) - duration_ms * interval '1 ms' "
                         "WHERE execution_id = %s", [at, at, j.execution_id])


def db_now(conn) -> float:
    return float(conn.execute("SELECT extract(epoch FROM now())").fetchone()[0])


@pytest.fixture
def history(clean_db):
    """Executions of TYPE across the 24-hour and the 7-day windows of this moment."""
    reg = registry()
    with psycopg.connect(clean_db) as conn:
        register(conn, WORKER, [TYPE, OTHER], 3 * 86400)
        now = db_now(conn)
        last5 = math.floor(now / 300)
        prev = (last5 - 1) * 300  # the last full 5 minutes' start
        first5 = (last5 - 287) * 300  # the 24-hour window's start
        last_h = math.floor(now / 3600)
        first_h = (last_h - 167) * 3600  # the 7-day window's start
        us = 1e-6
        ran(conn, reg, TYPE, [
            # the last full 5 minutes: five handler ends, the first at its very start
            (prev, 10, O.COMPLETED), (prev + 60, 20, O.RETRY), (prev + 120, 30, O.FAILED),
            (prev + 180, 40, O.TIMEOUT), (prev + 299, 1000, O.SKIPPED),
            # the 5 minutes before it: just before its end, and a snooze
            (prev - us, 5000, O.COMPLETED), (prev - 100, 7, O.SNOOZED),
            # the window's first 5 minutes, from its very start; and just before it
            (first5, 123.5, O.COMPLETED), (first5 + 1, 64, O.COMPLETED),
            (first5 - us, 99999, O.COMPLETED),
            # the current 5 minutes, still filling
            (now - 1, 250, O.COMPLETED),
            # two days ago (the 7-day chart's hours); the 7-day window's start both sides
            (now - 2 * 86400, 300, O.COMPLETED), (now - 2 * 86400 + 5, 900, O.RETRY),
            (first_h, 45, O.COMPLETED), (first_h - us, 88888, O.COMPLETED),
        ])
        # No handler's duration, in the last full 5 minutes: each would move its p95.
        ran(conn, reg, TYPE, [(prev + 30, 700000, O.UNKNOWN),
                              (prev + 31, 700000, O.CANCELLED)])
        ran(conn, reg, OTHER, [(prev + 30, 800000, O.COMPLETED)])
        enqueue(conn, TYPE, {}, registry=reg)
        conn.commit()
        (handed,) = claim(conn, types=[TYPE], leases=[LEASE], queues=None, limit=1,
                          worker_id=WORKER)
        conn.commit()
        conn.execute("UPDATE background_jobs SET started_at = now() - interval '600 s' "
                     "WHERE id = %s", [handed.id])
        assert hand_back(conn, [(handed, None, None)]) == {handed.id}
        conn.commit()
        enqueue(conn, TYPE, {}, registry=reg)
        conn.commit()
        (lost,) = claim(conn, types=[TYPE], leases=[LEASE], queues=None, limit=1,
                        worker_id=WORKER)
        conn.commit()
        conn.execute("UPDATE background_jobs SET started_at = now() - interval '900 s', "
                     "heartbeat_at = now(), lease_expires_at = now() - interval '1 s' "
                     "WHERE id = %s", [lost.id])
        conn.commit()
        assert recover_stale_running(conn, reg) == {"pending": 1}
        conn.commit()
        conn.execute("UPDATE job_executions SET finished_at = to_timestamp(%s) "
                     "WHERE execution_id = ANY(%s)",
                     [prev + 40, [handed.execution_id, lost.execution_id]])
        conn.commit()
        # Still running: no history row, no duration.
        enqueue(conn, TYPE, {}, registry=reg)
        conn.commit()
        claim(conn, types=[TYPE], leases=[LEASE], queues=None, limit=1, worker_id=WORKER)
        conn.commit()
    return {"url": clean_db, "last5": last5}


def independent(url: str, since: datetime, until: datetime, bucket_s: int) -> dict:
    """{bucket start: (executions, p50, p95)} of TYPE's handler ends in [since, until),
    one percentile_cont per bucket over job_executions_all, the buckets walked by
    generate_series (not the page's arithmetic on epochs)."""
    with psycopg.connect(url) as conn:
        found = conn.execute("""
            SELECT b.start, count(e.duration_ms),
                   percentile_cont(0.5) WITHIN GROUP (ORDER BY e.duration_ms),
                   percentile_cont(0.95) WITHIN GROUP (ORDER BY e.duration_ms)
            FROM generate_series(%(since)s::timestamptz, %(until)s::timestamptz
                                 - make_interval(secs => %(step)s), make_interval(secs => %(step)s))
                 AS b(start)
            JOIN job_executions_all e
              ON e.finished_at >= b.start AND e.finished_at < b.start + make_interval(secs => %(step)s)
            WHERE e.type = %(type)s AND e.outcome = ANY(%(outcomes)s)
            GROUP BY b.start""", {"since": since, "until": until, "step": bucket_s,
                                  "type": TYPE, "outcomes": list(HANDLER_ENDED)}).fetchall()
    return {start.astimezone(UTC): (n, p50, p95) for start, n, p50, p95 in found}


PLOT_W = DUR_W - LEFT - RIGHT
PLOT_H = DUR_H - DUR_TOP - BOTTOM
BASE = DUR_TOP + PLOT_H


def plotted(chart: Element, series: str, buckets: int) -> dict[int, float]:
    """{bucket index: y} of one series' lines as drawn: a point per bucket at the middle of
    its slot, a lone bucket as a level dash centred on it."""
    slot = PLOT_W / buckets
    found = {}
    for line in chart.all(lambda e: e.tag == "polyline" and e.attrs.get("data-outcome") == series):
        points = [tuple(map(float, p.split(","))) for p in line["points"].split()]
        if len(points) == 2 and points[0][1] == points[1][1] \
                and points[1][0] - points[0][0] == pytest.approx(max(slot, LONE_DASH), abs=0.11):
            points = [((points[0][0] + points[1][0]) / 2, points[0][1])]
        for x, y in points:
            i = (x - LEFT) / slot - 0.5
            assert i == pytest.approx(round(i), abs=0.05), (series, x)
            found[round(i)] = y
    return found


def shown(tree: Element) -> tuple[dict, datetime, datetime, int]:
    section = tree.one("durations")
    since = datetime.fromisoformat(section["data-since"])
    until = datetime.fromisoformat(section["data-until"])
    rows = {}
    for tr in section.all(lambda e: e.tag == "tr" and "data-bucket" in e.attrs):
        ms = [float(tr.one(t).text().removesuffix(" ms")) for t in ("p50", "p95")]
        rows[datetime.fromisoformat(tr["data-bucket"])] = (
            int(tr.one("executions").text()), *ms)
    return rows, since, until, int(section["data-bucket-s"])


@pytest.mark.parametrize(("range_", "bucket_s", "buckets"), [("24h", 300, 288),
                                                             ("7d", 3600, 168)])
def test_each_bucket_shows_the_p50_p95_and_count_of_the_handlers_durations(
        operator, history, range_, bucket_s, buckets):
    tree = page(operator, f"/types/{TYPE}?range={range_}")
    rows, since, until, step = shown(tree)
    assert step == bucket_s
    assert (until - since).total_seconds() == buckets * bucket_s
    expected = independent(history["url"], since, until, bucket_s)
    assert set(rows) == set(expected)
    for start, (n, p50, p95) in expected.items():
        assert rows[start][0] == n, start
        # shown to a tenth of a millisecond
        assert rows[start][1] == pytest.approx(p50, abs=0.051), start
        assert rows[start][2] == pytest.approx(p95, abs=0.051), start
    # The chart draws a hover target per bucket with executions, and a point per bucket
    # in each line, at the height the y axis gives the bucket's value.
    chart = tree.one("duration-chart")
    assert len(chart.all(lambda e: e.tag == "rect" and e.attrs.get("class") == "hover")) \
        == len(rows)
    top = nice_ceiling(max(v for _, p50, p95 in expected.values() for v in (p50, p95)))
    for series, column in (("p50", 1), ("p95", 2)):
        drawn = plotted(chart, series, buckets)
        assert set(drawn) == {int((start - since).total_seconds()) // bucket_s
                              for start in expected}, series
        for start, values in expected.items():
            i = int((start - since).total_seconds()) // bucket_s
            assert drawn[i] == pytest.approx(BASE - PLOT_H * values[column] / top, abs=0.051), \
                (series, start)


def test_the_boundaries_fall_on_the_right_side(operator, history):
    """Checked only when no 5 minutes began between the seeding and the page (the window
    moved on by one bucket otherwise, and the seeded edges are no longer its edges)."""
    rows, since, _, _ = shown(page(operator, f"/types/{TYPE}?range=24h"))
    if round(since.timestamp()) != (history["last5"] - 287) * 300:
        pytest.skip("a 5-minute bucket began during the test")
    prev = datetime.fromtimestamp((history["last5"] - 1) * 300, UTC)
    # The last full 5 minutes: its five handler ends (not the unknown end, the cancel,
    # the hand-back, the lost worker or the other type's), p95 between the two highest.
    tenth = {"abs": 0.051}  # shown to a tenth of a millisecond
    assert rows[prev] == (5, 30.0, pytest.approx(40 + 0.8 * 960, **tenth))
    # The 5 minutes before: the execution that ended a microsecond before `prev`.
    assert rows[prev - timedelta(minutes=5)] == (
        2, pytest.approx((7 + 5000) / 2, **tenth), pytest.approx(7 + 0.95 * 4993, **tenth))
    # The window's first bucket holds the two from its start on, not the one before it.
    assert rows[since][0] == 2
    assert rows[since][1] == pytest.approx((123.5 + 64) / 2, **tenth)


def test_versions_and_worker_starts_are_marked_where_they_happened(operator, clean_db):
    reg = registry()
    with psycopg.connect(clean_db) as conn:
        register(conn, WORKER, [TYPE], 10 * 86400)  # before the 7 days: no mark
        register(conn, NEW_WORKER, [TYPE], 3 * 3600)
        register(conn, OTHER_WORKER, [OTHER], 3 * 3600)  # another type's: no mark
        now = db_now(conn)
        # Version 1 before the week, 2 three hours ago by NEW_WORKER, 3 an hour ago by a
        # worker that ran none of the type within its hour.
        conn.execute("INSERT INTO job_type_versions (type, version, first_at, first_by) "
                     "VALUES (%(t)s, 1, to_timestamp(%(n)s) - interval '9 days', %(o)s), "
                     "(%(t)s, 2, to_timestamp(%(n)s) - interval '3 hours', %(w)s), "
                     "(%(t)s, 3, to_timestamp(%(n)s) - interval '1 hour', %(x)s)",
                     {"t": TYPE, "n": now, "o": WORKER, "w": NEW_WORKER, "x": OTHER_WORKER})
        conn.commit()
        v2 = now - 3 * 3600
        # Before version 2 by its worker; after it by an old worker first; then its own
        # first run (the mark), and later ones.
        ran(conn, reg, TYPE, [(v2 - 60, 100, O.COMPLETED)], worker=NEW_WORKER)
        ran(conn, reg, TYPE, [(v2 + 10, 100, O.COMPLETED)], worker=WORKER)
        ran(conn, reg, TYPE, [(v2 + 30, 200, O.COMPLETED), (v2 + 90, 200, O.COMPLETED)],
            worker=NEW_WORKER)
        first_run = float(conn.execute(
            "SELECT extract(epoch FROM started_at) FROM job_executions "
            "WHERE finished_at = to_timestamp(%s)", [v2 + 30]).fetchone()[0])
    tree = page(operator, f"/types/{TYPE}?range=7d")
    marks = {int(m["data-version"]): m for m in tree.all("version-mark")}
    assert sorted(marks) == [2, 3]
    moment = {"abs": 0.001}  # an epoch's relative tolerance would be half an hour
    assert datetime.fromisoformat(marks[2]["data-at"]).timestamp() == pytest.approx(
        first_run, **moment)
    assert "first ran" in marks[2].text()
    assert datetime.fromisoformat(marks[3]["data-at"]).timestamp() == pytest.approx(
        now - 3600, **moment)
    assert "published" in marks[3].text()
    starts = tree.all("start-mark")
    assert [int(s["data-workers"]) for s in starts] == [1]
    bucket = math.floor((now - 3 * 3600) / 3600) * 3600
    assert datetime.fromisoformat(starts[0]["data-at"]).timestamp() == bucket
    chart = tree.one("duration-chart")
    labels = [e.text() for e in chart.all(lambda e: e.tag == "text"
                                          and e.attrs.get("class") == "mark-label")]
    assert labels == ["v2", "v3"]
