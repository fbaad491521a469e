"""What a handler raises to say how its attempt ended, and the error codes we store.

The class of the exception answers "may we try again?": RetryableError and RateLimited
yes (with backoff / at the time given), PermanentError no, SkipJob means the work no
longer makes sense, AmbiguousOutcome means nobody knows whether the side effect
happened — a person or a reconciler must look, a blind retry could repeat it.
Any other exception is UNKNOWN: retried a limited number of times, always recorded.
"""

from __future__ import annotations

# Structured error codes (docs/architecture.md §4). Applications may add their own strings.
NETWORK_TIMEOUT = "NETWORK_TIMEOUT"
RATE_LIMITED = "RATE_LIMITED"
AUTH_FAILED = "AUTH_FAILED"
PAYLOAD_INVALID = "PAYLOAD_INVALID"
ENTITY_NOT_FOUND = "ENTITY_NOT_FOUND"
PROVIDER_5XX = "PROVIDER_5XX"
WORKER_LOST = "WORKER_LOST"
TIMEOUT = "TIMEOUT"
PAYLOAD_VERSION_UNSUPPORTED = "PAYLOAD_VERSION_UNSUPPORTED"
CANCELLED = "CANCELLED"
AMBIGUOUS_OUTCOME = "AMBIGUOUS_OUTCOME"
UNKNOWN = "UNKNOWN"
#: PostgreSQL refused the outcome as built; this failure was recorded in its place.
OUTCOME_UNSTORABLE = "OUTCOME_UNSTORABLE"
SNOOZE_LIMIT = "SNOOZE_LIMIT"
#: The handler raised what is not an Exception (SystemExit, KeyboardInterrupt,
#: GeneratorExit, a BaseException of its own) or tried to stop its lane's event loop:
#: its job fails (retried within max_attempts), the worker runs on.
HANDLER_ABORTED = "HANDLER_ABORTED"
#: The handler returned a value that is not JSON (docs/guide/flows.md, results), or one
#: over the size a result may take: its job fails, at once (a retry returns the same).
RESULT_UNSTORABLE = "RESULT_UNSTORABLE"
RESULT_TOO_LARGE = "RESULT_TOO_LARGE"


#: The longest a job may be put off at once, by a Snooze or a RateLimited's retry_after:
#: a year; longer is a unit mistake or a header misread, and its time would not store.
MAX_PUT_OFF_SECONDS = 366 * 86400.0


def put_off_seconds(seconds: float, what: str) -> float:
    """`seconds` as a float if it is 0 to MAX_PUT_OFF_SECONDS, else ValueError naming
    `what` (NaN and infinity are refused: either would make a time PostgreSQL cannot
    store, and the job would fail instead of waiting)."""
    value = float(seconds)
    if not 0 <= value <= MAX_PUT_OFF_SECONDS:  # NaN is refused too
        raise ValueError(f"{what} takes 0 to {MAX_PUT_OFF_SECONDS:g} seconds, not {value}")
    return value


class JobError(Exception):
    """Base of the exceptions a handler raises on purpose; carries a structured code."""

    default_code = UNKNOWN

    def __init__(self, code: str | None = None, message: str = ""):
        self.code = code or self.default_code
        self.message = message
        super().__init__(f"{self.code}: {message}" if message else self.code)


class RetryableError(JobError):
    """A temporary failure (timeout, 5xx, lock conflict): try again after a backoff."""

    default_code = NETWORK_TIMEOUT


class PermanentError(JobError):
    """Trying again will not help (invalid payload, revoked credentials): fail now."""

    default_code = PAYLOAD_INVALID


class RateLimited(RetryableError):
    """The provider said when to come back (Retry-After): retry at exactly that time."""

    default_code = RATE_LIMITED

    def __init__(self, retry_after: float, message: str = ""):
        self.retry_after = put_off_seconds(retry_after, "RateLimited")
        super().__init__(RATE_LIMITED, message or f"retry after {self.retry_after:g}s")


class SkipJob(JobError):
    """The job no longer makes sense (entity deleted, superseded): end it as skipped."""

    default_code = "SKIPPED"

    def __init__(self, reason: str = ""):
        self.reason = reason
        super().__init__("SKIPPED", reason)


class Snooze(Exception):
    """Put the job off for `seconds` without spending an attempt (the provider said "not
    yet", the data is not there yet): it runs again then, as if this run had not happened.
    A type's `max_snoozes` bounds how often one job may do so (then it fails,
    SNOOZE_LIMIT). Not a JobError: it records no error."""

    #: The longest a job may be put off in one snooze.
    MAX_SECONDS = MAX_PUT_OFF_SECONDS

    def __init__(self, seconds: float):
        seconds = put_off_seconds(seconds, "Snooze")
        self.seconds = seconds
        super().__init__(f"snoozed for {seconds:g}s")


class AmbiguousOutcome(JobError):
    """The external effect may or may not have happened: park the job as `unknown`."""

    default_code = AMBIGUOUS_OUTCOME

    def __init__(self, message: str = "", code: str | None = None):
        super().__init__(code or AMBIGUOUS_OUTCOME, message)


class JobCancelled(JobError):
    """Raised by ctx.raise_if_cancelled() once an operator asked to cancel the job."""

    default_code = CANCELLED


class EnqueueError(ValueError):
    """A job was refused at enqueue: bad payload, bad type or queue name, bad options.

    `field` names what was wrong (`priority`, `payload.items[3]`), None when the job as a
    whole was (say, a payload model that does not fit)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field
