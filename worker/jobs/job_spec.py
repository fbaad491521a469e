"""One job to enqueue, and the checks it must pass before any statement runs.

`JobSpec.validate()` refuses everything PostgreSQL or the queue would refuse later, with
an EnqueueError naming the field: a driver error inside the caller's transaction would
abort the caller's business transaction with it, and a RecursionError tells nobody what
was wrong. It needs no connection and no registry (enqueue applies the job type's
defaults afterwards), so it is tested as a unit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jobwarden.worker.core.durations import POSITIVE
from jobwarden.worker.core.errors import EnqueueError
from jobwarden.worker.jobs.flows import Parent, check_after
from jobwarden.worker.jobs.registry import check_name

INT32 = 2**31 - 1
#: Deepest nesting of objects and arrays a payload may have (the payload itself is 1).
MAX_PAYLOAD_DEPTH = 64
#: Longest idempotency or concurrency key: a key names an operation, it does not carry data.
MAX_KEY_CHARS = 500
#: Furthest a job may be delayed: ten years; further is a unit mistake (ms for s).
MAX_DELAY_SECONDS = 10 * 366 * 24 * 3600
MAX_ATTEMPTS = 1000


@dataclass
class JobSpec:
    """One job to enqueue (the bulk form takes a list of these, or of dicts alike)."""

    type: str
    payload: Mapping[str, Any]
    queue: str | None = None
    priority: int = 0
    run_at: datetime | None = None
    delay: float | None = None
    max_attempts: int | None = None
    idempotency_key: str | None = None
    version: int | None = None
    concurrency_key: str | None = None
    #: Parents this job waits for (worker/jobs/flows.py): job ids, keys or positions of
    #: the same enqueue_many call, At(n), Dep(parent, run_anyway=True).
    after: Sequence[Parent] | None = None
    #: A name for this job within one enqueue_many call, for its other jobs' `after`
    #: (not stored).
    key: str | None = None
    #: Uniqueness (docs/guide/uniqueness.md): the key, the window after its job's enqueue
    #: in which another enqueue of it is folded into that job (a duration; None: the
    #: type's), and debounce: a not yet started job of the key takes this payload and run
    #: time (None: the type's).
    unique_key: str | None = None
    unique_for: float | str | None = None
    replace: bool | None = None
    #: The deadline: not started by then, never started (None: the type's expires_after
    #: from its run time, if it declares one).
    expires_at: datetime | None = None

    def validate(self) -> None:
        """Raise EnqueueError naming the first field that cannot be enqueued as given."""
        _name("type", "job type", self.type)
        if self.queue is not None:
            _name("queue", "queue", self.queue)
        _integer("priority", self.priority, -INT32 - 1, INT32)
        if self.max_attempts is not None:
            _integer("max_attempts", self.max_attempts, 1, MAX_ATTEMPTS)
        if self.version is not None:
            _integer("version", self.version, 1, INT32)
        if self.run_at is not None and self.delay is not None:
            raise EnqueueError("run_at and delay: give one, not both", "run_at")
        if self.run_at is not None:
            self.run_at = _in_utc("run_at", self.run_at)
        if self.delay is not None:
            _delay(self.delay)
        if self.after is not None:
            check_after(self.after)
            if self.after and self.idempotency_key is not None:
                raise EnqueueError("idempotency_key and after: a job that waits for parents "
                                   "cannot take an idempotency key", "idempotency_key")
        self._validate_unique()
        if self.expires_at is not None:
            self.expires_at = _in_utc("expires_at", self.expires_at)
            if self.run_at is not None and self.expires_at <= self.run_at:
                raise EnqueueError("expires_at is not after run_at: the job could never "
                                   "start", "expires_at")
        for field in ("idempotency_key", "concurrency_key", "key", "unique_key"):
            value = getattr(self, field)
            if value is not None:
                _key(field, value)
        check_payload(self.payload)

    def _validate_unique(self) -> None:
        if self.unique_for is not None:
            try:
                self.unique_for = POSITIVE.parse(self.unique_for)
            except ValueError as exc:
                raise EnqueueError(f"unique_for: {exc}", "unique_for") from None
        if self.replace is not None and not isinstance(self.replace, bool):
            raise EnqueueError(f"replace must be True or False, not {_short(self.replace)}",
                               "replace")
        if self.replace and self.unique_key is None:
            raise EnqueueError("replace needs a unique_key: the key of the job it replaces",
                               "unique_key")
        if self.unique_key is None and self.unique_for is None and not self.replace:
            return
        # Two jobs of one unique key in two windows are two operations: they must not
        # share the idempotency key, which names one operation (the effects ledger's).
        if self.idempotency_key is not None:
            raise EnqueueError("idempotency_key and unique_key/unique_for/replace: give "
                               "one, not both", "idempotency_key")
        if self.after:
            raise EnqueueError("after and unique_key/unique_for/replace: a job that waits "
                               "for parents cannot be folded into another", "after")


def check_payload(payload: Any) -> None:
    """Raise EnqueueError naming the first part of `payload` that cannot be stored as JSON:
    a non-object payload, non-string keys, NUL or lone surrogates, non-finite numbers,
    values JSON does not have, or nesting deeper than MAX_PAYLOAD_DEPTH. Iterative, so a
    hostile depth cannot exhaust the stack."""
    if hasattr(payload, "model_dump"):  # a pydantic model instance: its JSON form
        payload = payload.model_dump(mode="json")
    if not isinstance(payload, Mapping):
        raise EnqueueError(
            f"payload must be a JSON object (a dict), not {type(payload).__name__}", "payload")
    # A path is built only for an error message: each entry carries its parent's link
    # (parent link, key or index), so a valid payload costs no string formatting.
    stack: list[tuple[Any, Any, int]] = [(payload, None, 1)]
    while stack:
        value, link, depth = stack.pop()
        if isinstance(value, Mapping | list | tuple):
            if depth > MAX_PAYLOAD_DEPTH:
                raise EnqueueError(f"{_path(link)}: nested deeper than {MAX_PAYLOAD_DEPTH} "
                                   "levels", "payload")
            if isinstance(value, Mapping):
                for key, item in value.items():
                    if not isinstance(key, str):
                        path = _path(link)
                        raise EnqueueError(f"{path}: key {_short(key)} is a {type(key).__name__}; "
                                           "JSON object keys must be strings", path)
                    if not _storable(key):
                        _text(_path(link), key, "a key")
                    stack.append((item, (link, key), depth + 1))
            else:
                stack.extend((item, (link, i), depth + 1) for i, item in enumerate(value))
        elif isinstance(value, str):
            if not _storable(value):
                _text(_path(link), value, "the value")
        elif isinstance(value, float):
            if not math.isfinite(value):
                path = _path(link)
                raise EnqueueError(f"{path}: {value} is not JSON-serializable "
                                   "(JSON has no NaN or infinity)", path)
        elif not (value is None or isinstance(value, bool | int)):
            path = _path(link)
            raise EnqueueError(f"{path}: a {type(value).__name__} is not JSON-serializable",
                               path)


def _path(link: Any) -> str:
    """The dotted path of a payload part from its chain of (parent link, key or index)."""
    parts = []
    while link is not None:
        link, step = link
        parts.append(f"[{step}]" if isinstance(step, int) else f".{_short(step)}")
    return "payload" + "".join(reversed(parts))


def _storable(value: str) -> bool:
    """True for text PostgreSQL stores as is; the fast test that spares _text's scan
    (ASCII text has no surrogates)."""
    return "\x00" not in value and (value.isascii() or not any(
        "\ud800" <= c <= "\udfff" for c in value))


def _text(field: str, value: str, what: str) -> None:
    if "\x00" in value:
        raise EnqueueError(f"{field}: {what} contains a NUL character (\\u0000), which "
                           "PostgreSQL rejects", field)
    if any("\ud800" <= c <= "\udfff" for c in value):
        raise EnqueueError(f"{field}: {what} contains a lone UTF-16 surrogate, which is "
                           "not valid Unicode text", field)


def _name(field: str, kind: str, value: Any) -> None:
    try:
        check_name(kind, value)
    except ValueError as exc:
        raise EnqueueError(f"{field}: {exc}", field) from None


def _integer(field: str, value: Any, low: int, high: int) -> None:
    # bool is an int to Python, but True as a priority is a mistake, not 1.
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise EnqueueError(f"{field} must be an integer from {low} to {high}, not {_short(value)}",
                           field)


def _delay(value: Any) -> None:
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or not 0 <= value <= MAX_DELAY_SECONDS):
        raise EnqueueError(f"delay must be a number of seconds from 0 to {MAX_DELAY_SECONDS} "
                           f"(ten years), not {_short(value)}", "delay")


def _in_utc(field: str, value: Any) -> datetime:
    """A timezone-aware datetime as the same instant in UTC, or EnqueueError naming
    `field`. Sent as given, an offset Python allows and PostgreSQL does not (beyond
    ±15:59) was refused by the server, aborting the caller's transaction; in UTC every
    offset reads. An instant outside years 1 to 9999 in UTC has no UTC datetime."""
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise EnqueueError(f"{field} must be a timezone-aware datetime", field)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise EnqueueError(f"{field} {_short(value.isoformat())} is out of range: in UTC it "
                           "falls outside the years 1 to 9999", field) from None


def _key(field: str, value: Any) -> None:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_KEY_CHARS:
        shown = type(value).__name__ if not isinstance(value, str) else f"{len(value)} chars"
        raise EnqueueError(f"{field} must be a non-empty string of at most {MAX_KEY_CHARS} "
                           f"characters, not {shown}", field)
    _text(field, value, "the key")


def _short(value: Any) -> str:
    """A value for an error message: escaped, and short even when the value is huge."""
    text = value if isinstance(value, str) else repr(value)
    text = text.encode("unicode_escape", "backslashreplace").decode("ascii")
    return text if len(text) <= 40 else text[:37] + "..."
