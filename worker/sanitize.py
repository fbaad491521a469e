"""Redact secrets from anything we store or show: errors, payloads, log lines.

The queue is persistent infrastructure that many people read, so an Authorization
header, a token or a password in a URL must never reach `last_error`, the
`job_executions` history or the console. Two nets: by key (a dict key or a
`key=value` pair that names a secret) and by pattern (Bearer tokens, credentials in
URLs, JWTs, PEM private keys, well-known API-key shapes). tests/unit/test_sanitize.py
keeps the table of shapes that must, and must not, be redacted.
"""

from __future__ import annotations

import logging
import re
import traceback
from typing import Any

REDACTED = "[REDACTED]"
MAX_ERROR_CHARS = 2000
MAX_TRACEBACK_CHARS = 8000

_SECRET_KEY = re.compile(
    r"(pass(word|wd|phrase)?|pwd|secret|token|api[-_]?key|apikey|auth(orization)?|cookie|"
    r"credential|private[-_]?key|access[-_]?key|session[-_]?(id|key)|signature|sig|otp|"
    r"card[-_]?number|cvv|iban|ssn)",
    re.IGNORECASE,
)
# Keys that contain a secret-looking word but are not secrets.
_SAFE_KEYS = {"token_type", "auth_method", "authority", "author", "authors", "tokens_used"}

#: Words that name a secret in `key=value`, `"key": "value"` and `key value` forms.
_SECRET_WORDS = (r"pass(?:word|wd|phrase)?|pwd|secret|token|api[-_]?key|apikey|access[-_]?key|"
                 r"private[-_]?key|signature|session[-_]?id|credential|card[-_]?number|cvv|"
                 r"otp|sig|ssn|auth|iban")

_RULES: list[tuple[re.Pattern[str], str]] = [
    # PEM private keys, whole block (or up to the end of the text when cut short).
    (re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?"
                r"(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL), REDACTED),
    # Authorization / Proxy-Authorization / Cookie headers, whatever the scheme.
    (re.compile(r"(?i)\b((?:proxy-)?authorization|cookie|set-cookie|x-api-key)"
                r"(\s*[:=]\s*)(?!\s*\[REDACTED\])[^\r\n,;]+"), rf"\1\2{REDACTED}"),
    # Bearer credentials of any length; Basic and "token" ones long enough to be one.
    (re.compile(r"(?i)\b(bearer)\s+(?!\s*\[REDACTED\])[A-Za-z0-9._~+/=-]+"), rf"\1 {REDACTED}"),
    (re.compile(r"(?i)\b(basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {REDACTED}"),
    # user:password@ in URLs; the password may itself contain '@' (the last one ends it).
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/?#@\s]*):[^/\s]*@"), rf"\1:{REDACTED}@"),
    # key=value or "key": "value" where the key names a secret (query strings, JSON, logs).
    (re.compile(
        r"(?i)([\"']?\b[\w-]*(?:" + _SECRET_WORDS + r")s?\b[\"']?"
        r"\s*[:=]\s*)(?!\s*\[REDACTED\])(\"[^\"]*\"|'[^']*'|[^\s&,;\"'}]+)"),
     rf"\1{REDACTED}"),
    # "password hunter2": a password word followed by a value that is not an ordinary word.
    (re.compile(r"(?i)\b(pass(?:word|wd|phrase)?|pwd)\s+(?=\S*[^A-Za-z\s])(?!\s*\[REDACTED\])"
                r"[^\s,;]+"), rf"\1 {REDACTED}"),
    # JSON Web Tokens.
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), REDACTED),
    # Well-known API key shapes: Stripe, GitHub, GitLab, Slack, Google, AWS key ids; also
    # when glued to a word by '_' (an error code like DECLINED_ghp_…).
    (re.compile(r"(?<![A-Za-z0-9])(sk|rk|pk)_(live|test)_[A-Za-z0-9]{8,}"), REDACTED),
    (re.compile(r"(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{20,}"), REDACTED),
    (re.compile(r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{20,}"), REDACTED),
    (re.compile(r"(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"), REDACTED),
    (re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"), REDACTED),
    # AWS secret access keys: 40 base64 characters with mixed case, a digit and a '/' or
    # '+' (which hex digests, UUIDs and base64url tokens never have).
    (re.compile(r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]*[/+])(?=[A-Za-z0-9/+]*[0-9])"
                r"(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[A-Z])[A-Za-z0-9/+]{40}"
                r"(?![A-Za-z0-9/+=])"), REDACTED),
]


#: For each rule, lower-case substrings at least one of which a match must contain: a
#: rule whose triggers are all absent is skipped (most text on a page holds none, and this
#: keeps rendering a 200-row page cheap). None: always applied (cheap, anchored rules).
_TRIGGERS: list[tuple[str, ...] | None] = [
    ("-----begin",),
    ("authorization", "cookie", "x-api-key"),
    ("bearer",),
    ("basic", "token"),
    ("://",),
    ("pass", "pwd", "secret", "token", "key", "signature", "session", "credential", "card",
     "cvv", "otp", "sig", "ssn", "auth", "iban"),
    ("pass", "pwd"),
    ("eyj",),
    ("_live_", "_test_"),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ("glpat-",),
    ("xox",),
    ("aiza",),
    ("akia", "asia"),
    None,
]
_PATTERNS = list(zip(_RULES, _TRIGGERS, strict=True))
_ANY_TRIGGER = re.compile("|".join(re.escape(t) for ts in _TRIGGERS if ts for t in ts))
_UNTRIGGERED = [rule for rule, triggers in _PATTERNS if triggers is None]


def is_secret_key(key: str) -> bool:
    return key.lower() not in _SAFE_KEYS and bool(_SECRET_KEY.search(key))


def redact(text: str) -> str:
    """`text` with every secret shape replaced by [REDACTED].

    The one redaction function: stored errors, payloads and their keys, everything the
    console renders (a Jinja finalize hook), /metrics labels and log lines all pass
    through it. Idempotent: redacting twice changes nothing more."""
    text = str(text)
    lowered = text.lower()
    if not _ANY_TRIGGER.search(lowered):  # the common case: one scan, then the cheap rules
        for pattern, replacement in _UNTRIGGERED:
            text = pattern.sub(replacement, text)
        return text
    for (pattern, replacement), triggers in _PATTERNS:
        if triggers is None or any(t in lowered for t in triggers):
            text = pattern.sub(replacement, text)
    return text


def sanitize_text(text: str | None, max_chars: int = MAX_ERROR_CHARS) -> str | None:
    """The text with secrets replaced by [REDACTED], truncated to max_chars."""
    if text is None:
        return None
    text = redact(text)
    if max_chars and len(text) > max_chars:
        text = text[: max_chars - 20] + f"… [{len(text) - max_chars + 20} chars cut]"
    return text


def sanitize_payload(value: Any, _depth: int = 0) -> Any:
    """A copy of a JSON value with secret keys' values and secret-looking strings redacted."""
    if _depth > 50:
        return REDACTED  # absurdly deep: don't recurse forever on hostile input
    if isinstance(value, dict):
        return {
            (redact(k) if isinstance(k, str) else k):
                (REDACTED if isinstance(k, str) and is_secret_key(k) and v not in (None, "")
                 else sanitize_payload(v, _depth + 1))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [sanitize_payload(v, _depth + 1) for v in value]
    if isinstance(value, str):
        return sanitize_text(value, max_chars=0)
    return value


def describe_exception(exc: BaseException) -> str:
    """`ExceptionType: message`, sanitized and truncated, for storage. A JobError's
    code is stored in its own column, so only its message is kept here."""
    from .errors import JobError

    if isinstance(exc, JobError):
        return sanitize_text(exc.message or exc.code) or exc.code
    message = str(exc)
    name = type(exc).__name__
    return sanitize_text(f"{name}: {message}" if message else name) or name


def describe_traceback(exc: BaseException, max_chars: int = MAX_TRACEBACK_CHARS) -> str:
    """The exception's traceback as Python prints it, secrets redacted, at most max_chars.

    A long traceback keeps its first lines and, mostly, its last ones: the innermost
    frames and the exception itself are what an operator needs.
    """
    text = sanitize_text("".join(traceback.format_exception(exc)), max_chars=0) or ""
    if len(text) <= max_chars:
        return text
    head = max_chars // 4
    tail = max_chars - head - 40
    return f"{text[:head]}\n… [{len(text) - head - tail} chars cut] …\n{text[-tail:]}"


def describe_validation(exc) -> str:
    """A pydantic ValidationError as `field: problem; ...`, without the offending values
    (they may be secrets), truncated."""
    errors = exc.errors(include_url=False, include_input=False)
    parts = [f"{'.'.join(str(p) for p in err['loc']) or 'payload'}: {err['msg']}"
             for err in errors[:10]]
    if len(errors) > 10:
        parts.append(f"and {len(errors) - 10} more")
    return sanitize_text("; ".join(parts)) or "invalid payload"


class RedactingFilter(logging.Filter):
    """A logging filter that passes each record's message and traceback through redact().

    `jobwarden worker` and `jobwarden console` install it on their log handlers; an
    application embedding the worker adds it to its own: `handler.addFilter(
    RedactingFilter())`. On a handler it covers every logger, the application's too."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True


def redact_log_handlers(logger: logging.Logger | None = None) -> None:
    """Add a RedactingFilter to each handler of `logger` (the root logger by default)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
