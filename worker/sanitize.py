"""Redact secrets from anything we store or show: errors, payloads, log lines.

The queue is persistent infrastructure that many people read, so an Authorization
header, a token or a password in a URL must never reach `last_error`, the
`job_executions` history or the console. Two nets: by key (a dict key or a
`key=value` pair that names a secret) and by pattern (Bearer tokens, credentials in
URLs, JWTs, well-known API-key shapes).
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "[REDACTED]"
MAX_ERROR_CHARS = 2000

_SECRET_KEY = re.compile(
    r"(pass(word|wd|phrase)?|pwd|secret|token|api[-_]?key|apikey|auth(orization)?|cookie|"
    r"credential|private[-_]?key|access[-_]?key|session[-_]?(id|key)|signature|sig|otp|"
    r"card[-_]?number|cvv|iban|ssn)",
    re.IGNORECASE,
)
# Keys that contain a secret-looking word but are not secrets.
_SAFE_KEYS = {"token_type", "auth_method", "authority", "author", "authors", "tokens_used"}

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # Authorization / Proxy-Authorization / Cookie headers, whatever the scheme.
    (re.compile(r"(?i)\b((?:proxy-)?authorization|cookie|set-cookie|x-api-key)"
                r"(\s*[:=]\s*)[^\r\n,;]+"), rf"\1\2{REDACTED}"),
    # Bearer / Basic / Token credentials anywhere in text.
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {REDACTED}"),
    # user:password@ in URLs (postgresql://u:p@h, https://u:p@h).
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^:/?#@\s]*):[^@/\s]+@"), rf"\1:{REDACTED}@"),
    # key=value or "key": "value" where the key names a secret (query strings, JSON, logs).
    (re.compile(
        r"(?i)([\"']?\b[\w-]*(?:pass(?:word|wd)?|pwd|secret|token|api[-_]?key|apikey|"
        r"access[-_]?key|private[-_]?key|signature|session[-_]?id|credential)s?\b[\"']?"
        r"\s*[:=]\s*)(\"[^\"]*\"|'[^']*'|[^\s&,;\"'}]+)"),
     rf"\1{REDACTED}"),
    # JSON Web Tokens.
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), REDACTED),
    # Well-known API key shapes: Stripe, GitHub, Slack, AWS access key ids.
    (re.compile(r"\b(sk|rk|pk)_(live|test)_[A-Za-z0-9]{8,}"), REDACTED),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), REDACTED),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), REDACTED),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), REDACTED),
]


def is_secret_key(key: str) -> bool:
    return key.lower() not in _SAFE_KEYS and bool(_SECRET_KEY.search(key))


def sanitize_text(text: str | None, max_chars: int = MAX_ERROR_CHARS) -> str | None:
    """The text with secrets replaced by [REDACTED], truncated to max_chars."""
    if text is None:
        return None
    text = str(text)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    if max_chars and len(text) > max_chars:
        text = text[: max_chars - 20] + f"… [{len(text) - max_chars + 20} chars cut]"
    return text


def sanitize_payload(value: Any, _depth: int = 0) -> Any:
    """A copy of a JSON value with secret keys' values and secret-looking strings redacted."""
    if _depth > 50:
        return REDACTED  # absurdly deep: don't recurse forever on hostile input
    if isinstance(value, dict):
        return {
            k: (REDACTED if isinstance(k, str) and is_secret_key(k) and v not in (None, "")
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


def describe_validation(exc) -> str:
    """A pydantic ValidationError as `field: problem; ...`, without the offending values
    (they may be secrets), truncated."""
    errors = exc.errors(include_url=False, include_input=False)
    parts = [f"{'.'.join(str(p) for p in err['loc']) or 'payload'}: {err['msg']}"
             for err in errors[:10]]
    if len(errors) > 10:
        parts.append(f"and {len(errors) - 10} more")
    return sanitize_text("; ".join(parts)) or "invalid payload"
