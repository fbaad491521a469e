"""Query objects: request parameters in, validated filters and view models out.

Views stay thin: they build one of these from `request.args`, call it, and render.
Every limit is clamped and every filter validated here before any SQL runs.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

from jobwarden.console.core.live_workers import ALL_QUEUES
from jobwarden.console.data import find
from jobwarden.console.data.database import CQ, Reader, Row
from jobwarden.console.data.flows import member_ids
from jobwarden.worker.core.sanitize import REDACTED, redact
from jobwarden.worker.store.schema import JOB_STATUSES

TEXT_FILTER_MAX = 200


def clamp_limit(value: str | int | None, default: int, maximum: int) -> int:
    """A page size within 1..maximum (default when missing or not a number)."""
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        return default
    return max(1, min(number, maximum))


def positive_int(value: object) -> int | None:
    """An id (1 to 2**63 - 1, PostgreSQL's bigint) written in ASCII digits, else None."""
    return bigint_digits(value, lowest=1)


def bigint_digits(value: object, lowest: int = 0) -> int | None:
    """A whole number written in ASCII digits alone (spaces around it allowed), from
    `lowest` to 2**63 - 1, else None. Python's int() also reads `١` (an Arabic-Indic
    one), `１`, `1_0` and `+1`, and numbers past bigint that PostgreSQL refuses."""
    text = "" if value is None else str(value).strip()
    if not (text.isascii() and text.isdigit()):
        return None
    # 19 digits hold every bigint; past them int() is work for nothing (and past 4,300 a
    # ValueError: Python's guard against quadratic conversions).
    digits = text.lstrip("0") or "0"
    if len(digits) > 19:
        return None
    number = int(digits)
    return number if lowest <= number < 2**63 else None


def text_filter(value: str | None) -> str | None:
    value = (value or "").strip()
    return value[:TEXT_FILTER_MAX] or None


def not_shown(label: str, value: str | None) -> str | None:
    """Why a name or filter taken from a request cannot be answered: every page shows it
    as the redactor does (for every role), so answering it would tell whether a guess at
    a secret is right. None when the pages show it as it is. Every view that takes a
    queue, type, code or key from the request asks this before any SQL runs, and refuses
    with the line it returns (a right and a wrong guess then get the same answer)."""
    if value is not None and redact(value) != value:
        return (f"The console shows this {label} as {REDACTED}, so it cannot filter by it: "
                "filter by what the pages show.")
    return None


@dataclass(frozen=True)
class JobFilter:
    """The jobs list's filters and keyset position, newest first: `before` an id for the
    older page, or `after` an id for the newer one."""

    status: str | None = None
    queue: str | None = None
    type: str | None = None
    error_code: str | None = None
    q: str | None = None
    #: Jobs of the flow of this job (console/data/flows.py): the ids its walk reaches.
    flow: int | None = None
    #: Members of this batch (background_jobs.batch_id).
    batch: int | None = None
    #: Jobs created in this range (console/data/find.py).
    created: find.Created = field(default_factory=find.Created)
    #: Where to start the list, when neither `before` nor `after` is given: just below a
    #: job id (that job first), or where a moment splits the ids (find.ids_at).
    jump_id: int | None = None
    jump_at: datetime | None = None
    before: int | None = None
    after: int | None = None
    limit: int = 50
    #: A `flow` value that names no job id, as given (the list answers it with a 400).
    bad_flow: str | None = None
    #: A `batch` value that names no batch id, as given (a 400 too).
    bad_batch: str | None = None
    #: Why a time (the range's or the jump's) cannot be read (a 400 too).
    bad_time: str | None = None

    @classmethod
    def from_args(cls, args: Mapping[str, str | None], default_limit: int = 50,
                  max_limit: int = 200) -> JobFilter:
        status = args.get("status") or None
        flow_text, flow = _id_arg(args.get("flow"))
        batch_text, batch = _id_arg(args.get("batch"))
        created, jump_id, jump_at, bad_time = find.Created(), None, None, None
        try:
            created = find.Created(find.moment(args.get("created_from"), "the range's start"),
                                   find.moment(args.get("created_to"), "the range's end"))
            jump_id, jump_at = _jump(args.get("at"))
        except find.BadTime as problem:
            bad_time = str(problem)
        return cls(
            status=status if status in JOB_STATUSES else None,
            queue=text_filter(args.get("queue")),
            type=text_filter(args.get("type")),
            error_code=text_filter(args.get("error_code")),
            q=text_filter(args.get("q")),
            flow=flow,
            bad_flow=flow_text[:30] if flow_text and flow is None else None,
            batch=batch,
            bad_batch=batch_text[:30] if batch_text and batch is None else None,
            created=created, jump_id=jump_id, jump_at=jump_at, bad_time=bad_time,
            before=positive_int(args.get("before")),
            after=None if args.get("before") else positive_int(args.get("after")),
            limit=clamp_limit(args.get("limit"), default_limit, max_limit),
        )

    @property
    def hidden(self) -> str | None:
        """Why these filters cannot be answered: a flow or batch that is no id, or a value
        the console shows as [REDACTED] (every page redacts what it shows, for every role):
        matching it would tell whether a guess at a secret is right."""
        if self.bad_flow is not None:
            return (f"A flow is named by the id of one of its jobs (a whole number from 1 "
                    f"to {2**63 - 1}), not {self.bad_flow!r}.")
        if self.bad_batch is not None:
            return (f"A batch is named by its id (a whole number from 1 to {2**63 - 1}), "
                    f"not {self.bad_batch!r}.")
        if self.bad_time is not None:
            return self.bad_time
        for label, value in (("queue", self.queue), ("type", self.type),
                             ("error code", self.error_code),
                             ("id or idempotency key", self.q)):
            if problem := not_shown(label, value):
                return problem
        return None

    def params(self) -> dict[str, Any]:
        # A value the console does not show is matched as the pages show it (redacted):
        # no stored value hidden from them is equal to that, so a right guess and a wrong
        # one select the same jobs (the jobs list refuses it outright, see `hidden`).
        queue, job_type, error_code, q = (
            None if v is None else redact(v)
            for v in (self.queue, self.type, self.error_code, self.q))
        search_id = positive_int(q) if q else None
        return {
            "status": self.status, "queue": queue, "type": job_type,
            "error_code": error_code, "search_key": q, "search_id": search_id,
            "flow": self.flow, "flow_ids": None, "batch": self.batch,
            "created_from": self.created.start, "created_to": self.created.end,
            "from_id": None, "to_id": None,
            "before_id": self.before, "after_id": self.after, "limit": self.limit + 1,
        }

    def filter_fields(self) -> list[tuple[str, str]]:
        """The filters given, as (field, value) for a form's hidden inputs (a selection of
        all matching jobs must carry every one of them, or it would select more)."""
        values = {"status": self.status, "queue": self.queue, "type": self.type,
                  "error_code": self.error_code, "q": self.q, "flow": self.flow,
                  "batch": self.batch, "created_from": _iso(self.created.start),
                  "created_to": _iso(self.created.end)}
        return [(k, str(v)) for k, v in values.items() if v not in (None, "")]

    def query_string(self, **changes: object) -> str:
        """These filters (with `changes`) as a query string, for links that keep them."""
        values: dict[str, object] = {**dict(self.filter_fields()), "before": self.before,
                                     "after": self.after,
                                     "limit": self.limit if self.limit != 50 else None}
        values.update(changes)
        return urlencode({k: v for k, v in values.items() if v not in (None, "")})

    @property
    def active(self) -> bool:
        return any((self.status, self.queue, self.type, self.error_code, self.q, self.flow,
                    self.batch, self.created.given))

    @property
    def positioned(self) -> bool:
        """Whether the page starts anywhere but at the newest matching job."""
        return any(v is not None for v in (self.before, self.after, self.jump_id,
                                            self.jump_at))


def _jump(value: str | None) -> tuple[int | None, datetime | None]:
    """A jump's target: a job id (`4242`, `#4242`) or a moment (find.moment)."""
    text = (value or "").strip()
    digits = text.removeprefix("#")
    if digits.isascii() and digits.isdigit():
        job_id = positive_int(digits)
        if job_id is None:
            raise find.BadTime(f"Jump to a job id from 1 to {2**63 - 1} or to a time, not "
                               f"{text[:30]!r}.")
        return job_id, None
    return None, find.moment(text, "the time to jump to")


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def _id_arg(value: str | None) -> tuple[str, int | None]:
    """An id filter as given (stripped) and as an id (1 to 2**63 - 1 in ASCII digits; None
    for anything else)."""
    text = (value or "").strip()
    return text, positive_int(text) if text.isascii() and text.isdigit() else None


@dataclass
class Page:
    rows: list[Row]
    next_before: int | None  # the "Older" link's position, if older rows exist
    prev_after: int | None = None  # the "Newer" link's position, if newer rows exist


def flow_params(reader: Reader, params: dict[str, Any]) -> dict[str, Any]:
    """`params` (JobFilter.params()) with the ids of its flow's jobs, when it names a flow:
    the first flows.MAX_NODES its walk reaches (none for a job that does not exist)."""
    flow = params.get("flow")
    return {**params, "flow_ids": None if flow is None else member_ids(reader, flow)}


def time_params(reader: Reader, params: dict[str, Any]) -> dict[str, Any]:
    """`params` (JobFilter.params()) with the ids its range of creation times lies in
    (find.id_bounds), None when it has none (a selection's filters name only theirs)."""
    created = find.Created(params.get("created_from"), params.get("created_to"))
    from_id, to_id = find.id_bounds(reader, created) if created.given else (None, None)
    return {**params, "from_id": from_id, "to_id": to_id}


def jobs_page(reader: Reader, flt: JobFilter) -> Page:
    """One keyset page of jobs: fetch one extra row to know whether another page exists.
    A jump starts it with its job, or where its moment splits the ids (find.ids_at)."""
    params = time_params(reader, flow_params(reader, flt.params()))
    if flt.before is None and flt.after is None:
        if flt.jump_id is not None:
            params["before_id"] = min(flt.jump_id + 1, 2**63 - 1)
        elif flt.jump_at is not None:
            params["before_id"] = find.ids_at(reader, [flt.jump_at])[0]
    if (params["from_id"] is not None or params["to_id"] is not None) and not any(
            params[k] is not None for k in ("search_key", "batch", "flow_ids")):
        # A range of ids: walk it in order rather than read it all and sort
        # (console_sort_setting says why), then leave the transaction as it was (after
        # an error there is nothing to leave: the transaction is over). A key's, a
        # batch's or a flow's jobs are a few read by their index and sorted: the range
        # only filters them.
        was = reader.row(CQ.console_sort_setting, value="off")["was"]
        page = _page(reader, flt, params)
        reader.one(CQ.console_sort_setting, value=was)
        return page
    return _page(reader, flt, params)


def _page(reader: Reader, flt: JobFilter, params: dict[str, Any]) -> Page:
    if flt.after is not None:
        rows = reader.all(CQ.console_jobs_page_newer, **params)
        more_newer = len(rows) > flt.limit
        rows = list(reversed(rows[: flt.limit]))
        if not rows:
            return Page([], None)
        # We came from the older page, so it exists.
        return Page(rows, rows[-1]["id"], rows[0]["id"] if more_newer else None)
    rows = reader.all(CQ.console_jobs_page, **params)
    more = len(rows) > flt.limit
    rows = rows[: flt.limit]
    return Page(rows, rows[-1]["id"] if more and rows else None,
                rows[0]["id"] if params["before_id"] is not None and rows else None)


@dataclass
class CountTable:
    """Counts of jobs per status, for one row label (a queue, a type, or everything)."""

    label: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(JOB_STATUSES, 0))

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass
class Overview:
    totals: CountTable
    by_queue: list[CountTable]
    by_type: list[CountTable]
    runnable_pending: int
    oldest_pending_s: float | None
    finished_last_hour: int
    #: Jobs completed in the last hour; completed_per_minute is its average per minute.
    completed_last_hour: int
    completed_per_minute: float
    retry_rate: float | None
    failure_rate: float | None
    recovered_last_hour: int
    #: Executions that snoozed their job in the last hour (no outcome: not in finished).
    snoozed_last_hour: int = 0
    #: Jobs failed in the last hour, code EXPIRED: not started by their deadline (also
    #: among the hour's failed outcomes above, as any job that reached failed).
    expired_last_hour: int = 0
    #: The raw (status, queue, type, jobs) rows the tables above were summed from.
    count_rows: list[Row] = field(default_factory=list)


def overview(reader: Reader) -> Overview:
    """The overview's numbers from three cheap queries."""
    totals = CountTable("all")
    by_queue: dict[str, CountTable] = {}
    by_type: dict[str, CountTable] = {}
    count_rows = reader.all(CQ.console_counts_by_queue_type)
    for row in count_rows:
        status, jobs = row["status"], row["jobs"]
        totals.counts[status] += jobs
        by_queue.setdefault(row["queue"], CountTable(row["queue"])).counts[status] += jobs
        by_type.setdefault(row["type"], CountTable(row["type"])).counts[status] += jobs
    pending = reader.one(CQ.console_pending_age) or {}
    rates = reader.one(CQ.console_last_hour_rates) or {}
    finished = rates.get("finished") or 0
    return Overview(
        totals=totals,
        by_queue=sorted(by_queue.values(), key=lambda t: t.label),
        by_type=sorted(by_type.values(), key=lambda t: t.label),
        runnable_pending=pending.get("runnable") or 0,
        oldest_pending_s=_float(pending.get("oldest_pending_s")),
        finished_last_hour=finished,
        completed_last_hour=rates.get("completed") or 0,
        completed_per_minute=(rates.get("completed") or 0) / 60.0,
        retry_rate=(rates["retried"] / finished) if finished else None,
        failure_rate=(rates["failed"] / finished) if finished else None,
        recovered_last_hour=rates.get("recovered") or 0,
        snoozed_last_hour=rates.get("snoozed") or 0,
        expired_last_hour=rates.get("expired") or 0,
        count_rows=count_rows,
    )


def workers_with_jobs(reader: Reader, gone_s: float, limit: int = 200,
                      rates: bool = False) -> list[Row]:
    """Workers (newest first) each with `jobs`: what it is running now, and `lane_slots`:
    its lanes (worker/engine/lanes.py), each with (queue, running) per queue, its slots and how
    many run. With `rates`, also `per_minute`: executions it finished per minute over the
    last 5 minutes."""
    workers = reader.all(CQ.console_workers_list, gone_s=gone_s, limit=limit)
    running: dict[str, list[Row]] = defaultdict(list)
    ids = [w["worker_id"] for w in workers if w["running_jobs"]]
    if ids:
        for job in reader.all(CQ.console_running_jobs_of_workers, worker_ids=ids):
            running[job["worker_id"]].append(job)
    finished = {}
    if rates and workers:
        finished = {r["worker_id"]: r["finished"] for r in reader.all(
            CQ.console_worker_rates, worker_ids=[w["worker_id"] for w in workers])}
    for worker in workers:
        worker["jobs"] = running.get(worker["worker_id"], [])
        per_queue: dict[str, int] = defaultdict(int)
        for job in worker["jobs"]:
            per_queue[job["queue"]] += 1
        worker["lane_slots"] = _lane_slots(worker, per_queue)
        worker["per_minute"] = finished.get(worker["worker_id"], 0) / 5.0
    return workers


def _lane_slots(worker: Row, per_queue: dict[str, int]) -> list[dict[str, Any]]:
    """A worker's lanes as its row records them; one lane of its queues and concurrency
    for a worker that registered before lanes were recorded. `every_other`: a `*` lane
    (every queue no other lane names; "all" when no lane names any)."""
    lanes = worker.get("lanes") or [{"queues": worker["queues"] or [ALL_QUEUES],
                                     "slots": worker["concurrency"]}]
    named = {q for lane in lanes for q in lane["queues"] if q != ALL_QUEUES}
    shown = []
    for lane in lanes:
        queues = [(q, per_queue.get(q, 0)) for q in lane["queues"] if q != ALL_QUEUES]
        every_other = ALL_QUEUES in lane["queues"]
        running = sum(n for _q, n in queues)
        if every_other:
            running += sum(n for q, n in per_queue.items() if q not in named)
        shown.append({"queues": queues, "slots": lane["slots"], "running": running,
                      "every_other": ("other" if named else "all") if every_other else None})
    return shown


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


SPARK_MINUTES = 60
#: A group whose code occurred this recently (failed, retried or ended unknown) is
#: marked "active now" on /failed.
ACTIVE_SECONDS = 15 * 60
_NEVER = datetime.min.replace(tzinfo=UTC)
#: The most jobs a retrying group counts (queries stay bounded in a storm of millions).
RETRYING_CAP = 10_000


def failed_groups(reader: Reader, limit: int = 500, job_type: str | None = None) -> list[Row]:
    """Failed jobs by error code (`jobs` and `types`: the failed jobs now; of `job_type`
    only when given), each with the times of the code's occurrences in those types,
    failures and retries alike (so that a row never mixes the two, nor speaks of a type
    it does not list): `first_seen`, its current streak's start (a retry does not reset
    it), `last_seen`, its latest occurrence, and `spark` (its occurrences per minute over
    the last hour, oldest first) with `spark_total`. `active`: the code occurred within
    ACTIVE_SECONDS, in those types or (`active_in`, that type) in another one: its old
    failures' code is live again elsewhere. Occurrences come from the per-minute rollup;
    a failure older than the rollup's 8 days counts by its failed_at. The code's latest
    activity first (`activity`, in any type): a live incident's group on top, however few
    jobs it has failed so far."""
    groups = reader.all(CQ.console_failed_groups, limit=limit, type=job_type)
    types = {g["error_code"]: sorted(g["types"]) for g in groups if g["error_code"]}
    streaks = {}
    if types:
        streaks = {r["error_code"]: r for r in reader.all(
            CQ.failed_group_streaks, codes=list(types), type=job_type,
            types=json.dumps(types))}
    spark = _sparklines(reader, list(types), job_type, lambda r: (r["error_code"], r["type"]))
    for g in groups:
        streak = streaks.get(g["error_code"]) or {}
        if streak.get("last_minute") is not None:
            g["first_seen"] = streak["streak_start"]
            g["last_seen"] = max(g["last_seen"] or _NEVER, streak["last_minute"])

        def recent(moment: datetime | None, now: datetime = g["db_now"]) -> bool:
            return moment is not None and (now - moment).total_seconds() <= ACTIVE_SECONDS

        elsewhere = not recent(g["last_seen"]) and recent(streak.get("latest_any"))
        g["active"] = recent(g["last_seen"]) or elsewhere
        g["active_in"] = streak["latest_type"] if elsewhere else None
        values = [spark[(g["error_code"], t)] for t in g["types"]
                  if g["error_code"] and (g["error_code"], t) in spark]
        _spark(g, [sum(m) for m in zip(*values, strict=True)] if values else None)
        # The group's order: its code's latest activity, its types' or another's.
        g["activity"] = max(g["last_seen"] or _NEVER, streak.get("latest_any") or _NEVER)
    # A failure imported without failed_at has no time: such a group goes last.
    groups.sort(key=lambda g: (g["activity"], g["jobs"]), reverse=True)
    return groups


def retrying_groups(reader: Reader, limit: int = 200, job_type: str | None = None) -> list[Row]:
    """Retrying now: per (error code, type), the executions that failed with the code and
    went back to pending in the last hour (`retries`, from the rollup, with their first
    and last minute and `spark`), and the jobs still waiting for or running their next
    attempt (`jobs`, up to RETRYING_CAP, `capped` then; `running`, `next_attempt_at` and
    its queue `next_queue`, `fewest_attempts_left`, a sample). `overdue` when that next
    attempt is past: then `queue_wait` (the queue's jobs started in the last 5 minutes and
    their median wait, None when none started) and `queue_paused`. The latest retries
    first."""
    groups = reader.all(CQ.console_retrying_groups, limit=limit, type=job_type,
                        cap=RETRYING_CAP)
    spark = _sparklines(reader, sorted({g["error_code"] for g in groups}), job_type,
                        lambda r: (r["error_code"], r["type"]), outcomes=("retried",))
    # A next attempt in the past is overdue: its queue is behind (or paused, or served by
    # no worker). Say what its queue's jobs wait now, for those queues only.
    overdue = sorted({g["next_queue"] for g in groups
                      if g["overdue_s"] is not None and g["overdue_s"] > 0})
    waits: dict[str, Row] = {}
    paused: set[str] = set()
    if overdue:
        waits = {r["queue"]: r for r in reader.all(CQ.console_queue_waits, queues=overdue)}
        paused = {r["queue"] for r in reader.all(CQ.queue_controls_list)
                  if r["paused"] and r["queue"] in overdue}
    for g in groups:
        g["capped"] = g["jobs"] >= RETRYING_CAP
        g["overdue"] = g["overdue_s"] is not None and g["overdue_s"] > 0
        g["queue_wait"] = waits.get(g["next_queue"]) if g["overdue"] else None
        g["queue_paused"] = g["overdue"] and g["next_queue"] in paused
        _spark(g, spark.get((g["error_code"], g["type"])))
    return groups


def _sparklines(reader: Reader, codes: list[str], job_type: str | None,
                key: Callable[[Row], Hashable],
                outcomes: tuple[str, ...] = ("failed", "retried", "unknown"),
                ) -> dict[Hashable, list[int]]:
    """Occurrences per minute of the last hour, oldest first, per `key(row)`."""
    spark: dict[Hashable, list[int]] = defaultdict(lambda: [0] * SPARK_MINUTES)
    if codes:
        for r in reader.all(CQ.console_failed_group_sparklines, codes=codes, type=job_type):
            if r["outcome"] in outcomes and 0 <= r["bucket"] < SPARK_MINUTES:
                spark[key(r)][SPARK_MINUTES - 1 - r["bucket"]] += r["jobs"]
    return spark


def _spark(group: Row, values: list[int] | None) -> None:
    """A group's last hour: `spark`, its values per minute, and `spark_total`."""
    group["spark"] = values or [0] * SPARK_MINUTES
    group["spark_total"] = sum(group["spark"])
