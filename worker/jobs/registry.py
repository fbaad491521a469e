"""The job-type registry: `@job(...)` declares a handler and its policy, per type.

Policy lives with the type, not in one global setting: an email and a PDF export live
on different time scales (timeout, lease), tolerate different numbers of attempts and
have different SLAs.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from jobwarden.worker.core.durations import POSITIVE, parse_duration
from jobwarden.worker.core.policy import RetryPolicy
from jobwarden.worker.core.rates import default_burst, parse_rate
from jobwarden.worker.jobs.cron import check_schedule

# \Z, not $: "$" also matches before a final newline.
NAME_PATTERN = re.compile(r"\A[A-Za-z0-9_][A-Za-z0-9_.:-]{0,199}\Z")

#: Highest concurrency_limit: the claim reads a key's running jobs for every job of the
#: key it considers, so a limit is a small number, not a way to switch limits off.
MAX_CONCURRENCY_LIMIT = 1000

#: A type's queue and attempts when its declaration (or, at enqueue, any known policy)
#: says nothing: the documented defaults.
DEFAULT_QUEUE = "default"
DEFAULT_MAX_ATTEMPTS = 5
#: How often one job may snooze before the next snooze fails it (`max_snoozes`).
DEFAULT_MAX_SNOOZES = 100

Handler = Callable[[Any, Any], Any]  # (ctx, payload dict or model)
Upgrader = Callable[[dict[str, Any]], dict[str, Any]]


def check_name(kind: str, value: str) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise ValueError(
            f"invalid {kind} name {value!r}: use 1-200 letters, digits, '_', '.', ':' or '-'"
        )
    return value


@dataclass
class JobType:
    """A registered job type: its handler and the policy the worker applies to it."""

    name: str
    handler: Handler
    queue: str = DEFAULT_QUEUE
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    timeout: float | None = 300.0  # maximum duration of one execution (None: no limit)
    lease: float = 60.0  # how long a claim stays valid without a heartbeat
    backoff: RetryPolicy = field(default_factory=RetryPolicy)
    sla: float | None = None  # target: seconds from available to started
    version: int = 1
    # False for jobs whose repetition is dangerous (e.g. charging a card without a
    # provider idempotency key): a lost execution goes to `unknown`, not back to pending.
    repeat_safe: bool = True
    upgraders: dict[int, Upgrader] = field(default_factory=dict)
    # A pydantic model of the current version's payload: enqueue refuses payloads that
    # do not fit it, and the handler receives the validated model instead of a dict.
    payload_model: Any = None  # a pydantic BaseModel subclass
    # Periodic jobs (worker/duties/scheduler.py): a cron expression evaluated in `schedule_tz`,
    # the payload each tick's job gets, and whether missed ticks are enqueued after
    # downtime (catch_up) or only the latest one.
    schedule: str | None = None
    schedule_tz: str = "UTC"
    schedule_payload: dict[str, Any] = field(default_factory=dict)
    catch_up: bool = False
    # Looks an unknown job's operation up by its business reference: returns "done",
    # "not_done" or "unknown" (worker/ops/reconcile.py).
    reconciler: Callable[[Any], str] | None = None
    # How many jobs of one concurrency_key may run at once when this type's job starts,
    # across all workers (claim_jobs; jobs without a key are not limited).
    concurrency_limit: int = 1
    # How often one job of this type may put itself off (`raise Snooze(...)`) before the
    # next snooze fails it (SNOOZE_LIMIT): a job waiting on something that never comes
    # must end where a person sees it.
    max_snoozes: int = DEFAULT_MAX_SNOOZES
    # At most this many jobs of the type (jobs per second; None: no limit) are claimed
    # per second across all workers: at most `rate_burst` in any window of
    # rate_burst / rate_limit seconds (one second's worth unless set, so N/s is at most N
    # in any second); with `rate_limit_key` (a dotted payload path) each value of that
    # path has a bucket of its own (claim_jobs, docs/guide/rate-limits.md).
    rate_limit: float | None = None
    rate_burst: float | None = None
    rate_limit_key: str | None = None
    # Uniqueness and expiry (docs/guide/uniqueness.md), for jobs enqueued where this
    # declaration is imported: an enqueue with a unique key (or, with unique_for and no
    # key, the same payload) inside `unique_for` seconds of the key's job's enqueue is
    # folded into that job; `replace` gives a not yet started job of the key the newer
    # payload and run time instead (debounce); a job not started within `expires_after`
    # seconds of its run time is never started (it ends failed, code EXPIRED).
    unique_for: float | None = None
    replace: bool = False
    expires_after: float | None = None
    # Fair share (docs/guide/fair-share.md): a dotted payload path whose value is each
    # job's fair key (claim_fair_jobs takes from each key in turn), and the jobs a key
    # takes per turn when it is not 1 (`fair_weights={"gold": 3}`).
    fair_key: str | None = None
    fair_weights: dict[str, int] = field(default_factory=dict)

    def __call__(self, ctx: Any, payload: Any) -> Any:
        return self.handler(ctx, payload)

    @functools.cached_property
    def is_coroutine(self) -> bool:
        """An `async def` handler: it runs on its lane's event loop, given an
        AsyncJobContext (worker/engine/loops.py), instead of on a slot thread. Asked
        several times per job on the loop's path; `inspect` takes a microsecond or two
        each time, so it is asked once (a type's handler never changes)."""
        return inspect.iscoroutinefunction(self.handler)

    def validate_payload(self, payload: dict[str, Any]) -> Any:
        """The payload as the handler gets it: a model instance when one is declared.

        Raises pydantic.ValidationError when the payload does not fit the model.
        """
        if self.payload_model is None:
            return payload
        return self.payload_model.model_validate(payload)

    def upgrader(self, from_version: int) -> Callable[[Upgrader], Upgrader]:
        """Register a function turning a payload of `from_version` into `from_version + 1`."""
        if not 1 <= from_version < self.version:
            raise ValueError(
                f"{self.name}: an upgrader from v{from_version} makes no sense at v{self.version}"
            )

        def register(fn: Upgrader) -> Upgrader:
            self.upgraders[from_version] = fn
            return fn

        return register

    def can_upgrade(self, from_version: int) -> bool:
        return all(v in self.upgraders for v in range(from_version, self.version))

    def upgrade(self, payload: dict[str, Any], from_version: int) -> dict[str, Any]:
        """The payload carried from `from_version` to the current version, step by step.

        Raises KeyError naming the missing step when there is no path.
        """
        for v in range(from_version, self.version):
            if v not in self.upgraders:
                raise KeyError(f"no upgrader from v{v} to v{v + 1}")
            payload = self.upgraders[v](payload)
            if not isinstance(payload, dict):
                raise TypeError(f"upgrader from v{v} returned {type(payload).__name__}")
        return payload


class Registry:
    def __init__(self) -> None:
        self._types: dict[str, JobType] = {}

    def register(self, job_type: JobType) -> JobType:
        existing = self._types.get(job_type.name)
        if existing is not None and existing.handler is not job_type.handler:
            raise ValueError(f"job type {job_type.name!r} is already registered")
        self._types[job_type.name] = job_type
        return job_type

    def get(self, name: str) -> JobType | None:
        return self._types.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self._types

    def __iter__(self) -> Iterator[JobType]:
        return iter(self._types.values())

    def names(self) -> list[str]:
        return sorted(self._types)

    def clear(self) -> None:
        self._types.clear()

    def clone(self) -> Registry:
        """A registry of the same types, to add to without changing this one."""
        other = Registry()
        other._types = dict(self._types)
        return other


#: The process-wide registry that `@job` fills and the worker reads.
registry = Registry()


def job(
    name: str,
    *,
    queue: str = DEFAULT_QUEUE,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    timeout: float | str | None = 300,
    lease: float | str = 60,
    backoff: RetryPolicy | float | str | None = None,
    sla: float | str | None = None,
    version: int = 1,
    repeat_safe: bool = True,
    payload: type | None = None,
    schedule: str | None = None,
    schedule_tz: str = "UTC",
    schedule_payload: dict[str, Any] | None = None,
    catch_up: bool = False,
    reconciler: Callable[[Any], str] | None = None,
    concurrency_limit: int = 1,
    max_snoozes: int = DEFAULT_MAX_SNOOZES,
    rate_limit: str | float | None = None,
    rate_burst: int | None = None,
    rate_limit_key: str | None = None,
    unique_for: float | str | None = None,
    replace: bool = False,
    expires_after: float | str | None = None,
    fair_key: str | None = None,
    fair_weights: dict[str, int] | None = None,
    registry: Registry = registry,
) -> Callable[[Handler], JobType]:
    """Declare a job type: `@job("send_email", queue="email", max_attempts=5, sla="30s")`.

    `payload=SomeModel` (a pydantic BaseModel) validates payloads at enqueue and hands
    the handler a SomeModel instance. `schedule="*/5 * * * *"` (cron, in `schedule_tz`)
    makes the workers enqueue one job of the type per tick (worker/duties/scheduler.py).
    `reconciler=fn` settles the type's unknown outcomes (worker/ops/reconcile.py; a worker
    serving such a type also runs the `jobwarden.reconcile` job that runs reconcilers).
    `concurrency_limit=N` lets up to N jobs of one `concurrency_key` run at once (default 1).
    `max_snoozes=N` bounds how often one job may `raise Snooze(seconds)` (default 100).
    `rate_limit="100/s"` (or "/m", "/h") claims at most that many jobs of the type per
    unit across all workers, bursts bounded by `rate_burst` (default: one second's worth);
    `rate_limit_key="account.id"` applies the rate to each value of that payload path.
    `unique_for="10m"`, `replace=True` and `expires_after="1h"`: the defaults of enqueue's
    keywords of the same names (docs/guide/uniqueness.md).
    `fair_key="tenant.id"` claims the type's jobs from each value of that payload path in
    turn, `fair_weights={"big": 3}` jobs per turn for the keys named (default 1;
    docs/guide/fair-share.md).
    """
    check_name("job type", name)
    check_name("queue", queue)
    if not isinstance(max_attempts, int) or max_attempts < 1:
        raise ValueError(f"{name}: max_attempts must be an integer >= 1")
    if not isinstance(version, int) or version < 1:
        raise ValueError(f"{name}: version must be an integer >= 1")
    if (not isinstance(concurrency_limit, int) or isinstance(concurrency_limit, bool)
            or not 1 <= concurrency_limit <= MAX_CONCURRENCY_LIMIT):
        raise ValueError(f"{name}: concurrency_limit must be an integer from 1 to "
                         f"{MAX_CONCURRENCY_LIMIT}")
    if not isinstance(max_snoozes, int) or isinstance(max_snoozes, bool) or max_snoozes < 0:
        raise ValueError(f"{name}: max_snoozes must be an integer >= 0")
    if payload is not None and not hasattr(payload, "model_validate"):
        raise ValueError(f"{name}: payload must be a pydantic model class")
    timeout_s, lease_s, sla_s = (_seconds(name, "timeout", timeout),
                                 _seconds(name, "lease", lease), _seconds(name, "sla", sla))
    if not lease_s or lease_s <= 0:
        raise ValueError(f"{name}: lease must be positive")
    if schedule is not None:
        check_schedule(name, schedule, schedule_tz)
    rate = _rate_limit(name, rate_limit, rate_burst, rate_limit_key)
    unique_s, expires_s = (_positive(name, "unique_for", unique_for),
                           _positive(name, "expires_after", expires_after))
    if not isinstance(replace, bool):
        raise ValueError(f"{name}: replace must be True or False")
    weights = _fair(name, fair_key, fair_weights)

    def decorate(fn: Handler) -> JobType:
        return registry.register(JobType(
            name=name, handler=fn, queue=queue, max_attempts=max_attempts,
            timeout=timeout_s, lease=lease_s,
            backoff=RetryPolicy.coerce(backoff), sla=sla_s,
            version=version, repeat_safe=repeat_safe, payload_model=payload,
            schedule=schedule, schedule_tz=schedule_tz,
            schedule_payload=dict(schedule_payload or {}), catch_up=catch_up,
            reconciler=reconciler, concurrency_limit=concurrency_limit,
            max_snoozes=max_snoozes, rate_limit=rate,
            rate_burst=(None if rate is None else
                        float(rate_burst) if rate_burst is not None else default_burst(rate)),
            rate_limit_key=rate_limit_key, unique_for=unique_s, replace=replace,
            expires_after=expires_s, fair_key=fair_key, fair_weights=weights,
        ))

    return decorate


def _seconds(name: str, argument: str, value: float | int | str | None) -> float | None:
    """A duration argument of @job in seconds, or ValueError naming the type and argument."""
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {argument}={exc}") from None


def _positive(name: str, argument: str, value: float | int | str | None) -> float | None:
    """A duration argument that must be more than zero ("0s" is no window), in seconds."""
    try:
        return None if value is None else POSITIVE.parse(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {argument}={exc}") from None


#: A rate_limit_key: a dotted path of payload keys ("account.id").
KEY_PATH_PATTERN = re.compile(r"\A[A-Za-z0-9_-]{1,100}(\.[A-Za-z0-9_-]{1,100}){0,7}\Z")


#: The most jobs one fair key takes per turn (`fair_weights`).
MAX_FAIR_WEIGHT = 100


def _fair(name: str, fair_key: str | None,
          fair_weights: dict[str, int] | None) -> dict[str, int]:
    """The declared fair weights once the fair key path and each weight are checked."""
    if fair_key is None:
        if fair_weights:
            raise ValueError(f"{name}: fair_weights need a fair_key")
        return {}
    # A path, like rate_limit_key: the enqueue reads it from the payload in SQL, so a job
    # gets its key alike whoever enqueued it.
    if not isinstance(fair_key, str) or not KEY_PATH_PATTERN.match(fair_key):
        raise ValueError(f"{name}: fair_key must be a dotted payload path like "
                         f"'tenant.id', not {fair_key!r}")
    weights = dict(fair_weights or {})
    for key, weight in weights.items():
        if not isinstance(key, str):
            raise ValueError(f"{name}: fair_weights keys must be strings, not {key!r}")
        if (not isinstance(weight, int) or isinstance(weight, bool)
                or not 1 <= weight <= MAX_FAIR_WEIGHT):
            raise ValueError(f"{name}: fair_weights[{key[:50]!r}] must be a whole number "
                             f"from 1 to {MAX_FAIR_WEIGHT}, not {weight!r}")
    return weights


def _rate_limit(name: str, rate_limit: str | float | None, rate_burst: int | None,
                rate_limit_key: str | None) -> float | None:
    """The declared rate (jobs per second) once its burst and key path are checked."""
    if rate_limit is None:
        if rate_burst is not None or rate_limit_key is not None:
            raise ValueError(f"{name}: rate_burst and rate_limit_key need a rate_limit")
        return None
    try:
        rate = parse_rate(rate_limit)
    except ValueError as exc:
        raise ValueError(f"{name}: rate_limit: {exc}") from None
    if rate_burst is not None and (not isinstance(rate_burst, int)
                                   or isinstance(rate_burst, bool) or rate_burst < 1):
        raise ValueError(f"{name}: rate_burst must be a whole number of jobs >= 1")
    # A path, not a callable: the claim reads it from the payload in SQL, so a job is
    # limited alike whoever enqueued it (another service, the CLI) and no column is added.
    if rate_limit_key is not None and (not isinstance(rate_limit_key, str)
                                       or not KEY_PATH_PATTERN.match(rate_limit_key)):
        raise ValueError(f"{name}: rate_limit_key must be a dotted payload path like "
                         f"'account.id', not {rate_limit_key!r}")
    return rate
