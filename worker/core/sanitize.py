"""Redact secrets from anything we store or show: errors, payloads, log lines.

The queue is persistent infrastructure that many people read, so an Authorization
header, a token or a password in a URL must never reach `last_error`, the
`job_executions` history or the console. Two nets: by key (a dict key or a
`key=value` pair that names a secret) and by pattern (Bearer tokens, credentials in
URLs, JWTs, PEM private keys, well-known API-key shapes). tests/unit/test_sanitize.py
keeps the table of shapes that must, and must not, be redacted.
"""

from __future__ import annotations

import collections
import functools
import hashlib
import logging
import re
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from jobwarden.worker.core.errors import JobError

if TYPE_CHECKING:
    from pydantic import ValidationError

REDACTED = "[REDACTED]"
MAX_ERROR_CHARS = 2000
#: An error code names a group of failures, not one of them (docs/security-pages.md).
MAX_ERROR_CODE_CHARS = 100
MAX_TRACEBACK_CHARS = 8000
#: The most a log line keeps, in characters, as an attempt's log line does
#: (worker/engine/attempt_log.py); a longer one ends `… [n chars cut]`.
MAX_LOG_CHARS = 4096
#: How far past the part of a long text that is kept it is redacted before the cut: a
#: secret that starts in the kept part ends within the margin (the longest shapes, PEM
#: private keys, are ~3,300 characters), so it is recognised whole, replaced, and only
#: then cut. Never more: a pattern holds the GIL while it runs, and redacting a handler's
#: 650 kB error whole froze the whole worker, its heartbeat too (docs/faults.md).
REDACT_MARGIN = 4096
#: The most of a long text redacted to keep a part of it: a run of non-blank characters
#: across the margin's end is redacted to its end when it ends within this (a 20 kB word
#: is kept as far as it fits); one longer is dropped from the kept part.
REDACT_MAX_WINDOW = 64 * 1024

# Keys that contain a secret-looking word but are not secrets.
_SAFE_KEYS = {"token_type", "auth_method", "authority", "author", "authors", "tokens_used"}

# The rule set follows the two maintained references, adapted to text that is read by
# people (a secret is replaced in place, its key and the text around it are kept):
#   gitleaks v8.30.0-27-gb58d3f10, config/gitleaks.toml (token shapes: github-pat,
#     github-fine-grained-pat, gitlab-pat, slack-*, slack-webhook-url, stripe-access-token,
#     aws-access-token, gcp-api-key, openai-api-key, anthropic-api-key, npm-access-token,
#     huggingface-access-token, jwt, private-key; generic-api-key's separators);
#   Yelp/detect-secrets v1.5.0-50-g5e14193, detect_secrets/plugins/ (keyword.py's
#     DENYLIST of key names, azure_storage_key.py, slack.py, discord.py).
# Lengths are the references' lower bounds, kept open-ended so that a token cut short (or
# a longer new generation of it) is still caught. Shapes in neither set are marked "ours".
# tests/unit/test_sanitize.py holds the table of what must and must not be redacted.
# Every pattern runs in time linear in the text (re holds the GIL while it runs): no run
# that a failed match would scan again from each later start (white space before a value
# is taken possessively, `*+`; a key's kind is bounded), tests/unit/test_sanitize_bounds.py.

#: Names of secrets, in `key=value`, `"key": "value"`, `key => value`, `key%3Dvalue` forms.
#: Long names also match at the end of a longer one (`db_password`, `clientSecret`,
#: `AccountKey`); short ones only as a word of their own or after `_`, `-` or `.`
#: (`card_cvv`, `x-auth`), so that `compass:`, `bypass:` or `oauth:` is no password.
_LONG_WORDS = (r"password|passwd|passphrase|secret|token|api[-_]?key|apikey|access[-_]?key|"
               r"account[-_]?key|auth[-_]?key|client[-_]?key|service[-_]?key|private[-_]?key|"
               r"priv[-_]?key|signature|session[-_]?id|credential|card[-_]?number|passcode|"
               r"security[-_]?code|account[-_]?number|routing[-_]?number|"
               r"(?:mfa|pin|verification)[-_]?code|recovery[-_]?codes?")
_SHORT_WORDS = r"pass|pwd|cvv|cvc|pin|otp|sig|ssn|auth|iban"
#: A dict key or log field that names a secret: a long name anywhere in it, a short one
#: as a segment of its own (`card_cvv`, `x-auth`, `otpCode`; not `signal`, `compass`).
_SECRET_KEY = (r"(?i)(?:" + _LONG_WORDS + r"|authorization|cookie|session[-_]?key)"
               r"|(?:^|[_.-])(?:" + _SHORT_WORDS + r")s?(?-i:(?![a-z]))")
_SECRET_NAME = (r"(?:[\w.-]*(?:" + _LONG_WORDS + r")|(?:[\w.-]*[_.-])?(?:" + _SHORT_WORDS
                + r"))s?\b")
#: What separates a name from its value (gitleaks' generic-api-key: `=`, `:`, `=>`, `:=`;
#: and the percent-encoded `%3D` / `%3A` of a URL inside a URL).
_SEPARATOR = r"(?:=>|:=|==?|:|%3[aAdD])(?![=>])"  # never half of `=>` (idempotence)
#: Where a name starts: not inside a longer word, or just after a URL-encoded quote,
#: brace, comma or space (`%7B%22pin%22%3A…`: JSON inside a query string).
_NAME_START = r"(?:(?<![\w.-])|(?<=%2[027cC])|(?<=%7[bB]))"
#: The quote that may close a name: plain, JSON-escaped, HTML-escaped or URL-encoded.
_HTML_QUOTE = r"&(?:quot|#0*34|#[xX]0*22);"
_NAME_QUOTE = r"(?:\\?[\"']|&(?:quot|apos|#0*3[49]|#[xX]0*2[27]);|%2[27])"
#: A value: JSON-escaped quotes (doubly escaped quotes inside), quotes (escaped quotes
#: inside: a tail after `\"` is the secret's too), HTML-escaped or URL-encoded quotes, or
#: a bare run that stops at a separator of its own (`&`, `%26`, `,`, `;`, space) and
#: never ends with the `)` or `]` closing around it. A quoted value whose closing quote
#: never comes (a text cut short inside it) is the secret's up to the end.
_BARE = r"(?:(?!%26)[^\s&,;\"'}])"
_VALUE = (r'(\\"(?:\\\\\\"|\\\\\\\\|(?!\\").)*(?:\\"|\Z)|"(?:[^"\\]|\\.)*(?:"|\Z)|'
          r"'(?:[^'\\]|\\.)*(?:'|\Z)|"
          + _HTML_QUOTE + "(?:(?!" + _HTML_QUOTE + ").)*(?:" + _HTML_QUOTE + r"|\Z)"
          + r"|%22(?:(?!%22).)*(?:%22|\Z)|" + _BARE + r"*(?:(?!%26)[^\s&,;\"'})\]]))")
_NOT_DONE = r"(?!(?:\s|%20)*+\[REDACTED\])"  # redacting twice changes nothing more


class _Rule(NamedTuple):
    pattern: re.Pattern[str]
    replacement: str
    #: Lower-case substrings at least one of which a match must contain: a rule whose
    #: triggers are all absent is skipped (most text on a page holds none, and this keeps
    #: rendering a 200-row page cheap). None: always applied (cheap, anchored rules).
    triggers: tuple[str, ...] | None


def _token(regex: str, *triggers: str) -> _Rule:
    """A token with a recognisable shape, redacted whole; also when glued to a word by
    `_` (an error code like DECLINED_ghp_…)."""
    return _Rule(re.compile(r"(?<![A-Za-z0-9])" + regex), REDACTED, triggers)


def _rule_table() -> list[_Rule]:
    """Every rule, in the order they are applied."""
    return [
        # PEM private keys, whole block (or up to the end of the text when cut short).
        # Its kind (RSA, OPENSSH, ENCRYPTED, PGP …) is bounded: unbounded, each BEGIN in a
        # run of them scanned the whole run.
        _Rule(re.compile(r"-----BEGIN [A-Z0-9 _-]{0,60}PRIVATE KEY(?: BLOCK)?-----.*?"
                         r"(?:-----END [A-Z0-9 _-]{0,60}PRIVATE KEY(?: BLOCK)?-----|\Z)",
                         re.DOTALL),
              REDACTED, ("-----begin",)),
        # Telegram bot tokens (telegram-bot-api-token), also inside api.telegram.org/bot<token>;
        # before "token <value>" below takes its digits for the whole token.
        _Rule(re.compile(r"(?<![0-9])[0-9]{5,16}:A[\w-]{30,}"), REDACTED, (":a",)),
        # Authorization / Proxy-Authorization / Cookie headers, whatever the scheme.
        _Rule(re.compile(r"(?i)\b((?:proxy-)?authorization|cookie|set-cookie|x-api-key)"
                         r"(\s*+[:=]\s*+)" + _NOT_DONE + r"[^\r\n,;]+"), rf"\1\2{REDACTED}",
              ("authorization", "cookie", "x-api-key")),
        # Bearer credentials of any length; Basic and "token" ones long enough to be one.
        _Rule(re.compile(r"(?i)\b(bearer)\s++" + _NOT_DONE + r"[A-Za-z0-9._~+/=-]+"),
              rf"\1 {REDACTED}", ("bearer",)),
        _Rule(re.compile(r"(?i)\b(basic|token)\s+[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {REDACTED}",
              ("basic", "token")),
        # user:password@ in URLs (also glued to a code: E_https://…). The password may hold
        # '@' and '/': it ends at the first '@' that a host follows; a port (`:8443/`) is none.
        # Nor '://': each URL's search for its '@' ends at the next URL, not at the end of
        # the text (many bare URLs and no '@' made it quadratic).
        _Rule(re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*://[^:/?#@\s]*):(?!\d+(?:[/?#\s]|$))(?:(?!://)\S)*?@"
                         r"(?=[^\s/?#@]*(?:[/?#\s]|$))"), rf"\1:{REDACTED}@", ("://",)),
        # Webhook URLs whose path is the credential: keep the host, drop the path.
        _Rule(re.compile(r"(?i)(hooks\.slack\.com/(?:services|workflows|triggers)/)"
                         r"[A-Za-z0-9+/_-]{20,}"), rf"\1{REDACTED}", ("hooks.slack.com",)),
        _Rule(re.compile(r"(?i)(discord(?:app)?\.com/api/(?:v\d+/)?webhooks/\d+/)[\w-]{20,}"),
              rf"\1{REDACTED}", ("discord",)),  # ours
        # name=value or "name": "value" where the name is a secret's (query strings, JSON,
        # JSON inside a string, config dumps, logs).
        _Rule(re.compile(r"(?i)(" + _NAME_START + _SECRET_NAME + _NAME_QUOTE + r"?(?:\s|%20)*+"
                         + _SEPARATOR + r"(?:\s|%20)*+)" + _NOT_DONE + _VALUE),
              rf"\1{REDACTED}",
              ("pass", "pwd", "secret", "token", "key", "signature", "session", "credential",
               "card", "cvv", "cvc", "pin", "otp", "sig", "ssn", "auth", "iban", "security",
               "account", "routing", "mfa", "verification", "recovery")),
        # "password hunter2", "the password is hunter2": a password word (and is / was)
        # followed by a value that is not an ordinary word (one with a digit or a symbol
        # beyond trailing punctuation, which stays the sentence's).
        _Rule(re.compile(r"(?i)\b(password|passwd|passphrase|passcode|pwd)(\s++(?:(?:is|was)\s++)?)"
                         + _NOT_DONE + r"(?=[^\s,;]*[^A-Za-z\s,;:.!?)\]])[^\s,;]*[^\s,;)\].!?:]"),
              rf"\1\2{REDACTED}", ("pass", "pwd")),
        # JSON Web Tokens.
        _Rule(re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), REDACTED,
              ("eyj",)),
        _token(r"(?:sk|rk|pk)_(?:live|test|prod)_[A-Za-z0-9]{8,}", "_live_", "_test_", "_prod_"),
        _token(r"gh[pousr]_[A-Za-z0-9]{20,}", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        _token(r"github_pat_\w{22,}", "github_pat_"),
        _token(r"glpat-[\w-]{20,}", "glpat-"),
        _token(r"xox[abeoprs]-[A-Za-z0-9-]{10,}", "xox"),
        _token(r"xapp-\d-[A-Za-z0-9-]{10,}", "xapp-"),
        _token(r"AIza[\w-]{35}(?![\w-])", "aiza"),
        _token(r"ya29\.[\w-]{20,}", "ya29."),  # ours: Google OAuth access tokens
        _token(r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
               "a3t", "akia", "asia", "abia", "acca"),
        _token(r"sk-(?:proj|svcacct|admin|ant-[a-z]+\d*)-[\w-]{20,}", "sk-"),
        _token(r"sk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}", "t3blbkfj"),
        _token(r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", "npm_"),
        _token(r"hf_[A-Za-z0-9]{34}(?![A-Za-z0-9])", "hf_"),
        _token(r"SG\.[\w-]{16,}\.[\w-]{16,}", "sg."),  # sendgrid-api-token
        _token(r"whsec_[A-Za-z0-9+/=]{24,}", "whsec_"),  # ours: Stripe webhook signing secrets
        _token(r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32,}", "shpat_", "shpss_", "shpca_", "shppa_"),
        _token(r"(?:pub)?key-[a-f0-9]{32,}(?![A-Za-z0-9])", "key-"),  # mailgun-*-api-token
        _token(r"AT[AC]TT3[\w=-]{20,}", "atatt3", "atctt3"),  # atlassian-api-token
        # Twilio API keys (twilio-api-key): no trigger rarer than "sk", which most text holds.
        _Rule(re.compile(r"(?<![A-Za-z0-9])SK[0-9a-fA-F]{32}(?![A-Za-z0-9])"), REDACTED, None),
        # Discord bot tokens (detect-secrets' discord.py): no prefix to trigger on.
        _Rule(re.compile(r"(?<![\w-])[MNO][\w-]{23,25}\.[\w-]{6}\.[\w-]{27}(?![\w-])"), REDACTED,
              None),
        # AWS secret access keys: 40 base64 characters with mixed case, a digit and a '/' or
        # '+' (which hex digests, UUIDs and base64url tokens never have).
        _Rule(re.compile(r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{0,39}[/+])(?=[A-Za-z0-9/+]{0,39}[0-9])"
                         r"(?=[A-Za-z0-9/+]{0,39}[a-z])(?=[A-Za-z0-9/+]{0,39}[A-Z])[A-Za-z0-9/+]{40}"
                         r"(?![A-Za-z0-9/+=])"), REDACTED, None),
    ]


class _Compiled(NamedTuple):
    secret_key: re.Pattern[str]
    rules: list[_Rule]
    #: Any trigger of any rule: text without one takes the untriggered rules alone.
    any_trigger: re.Pattern[str]
    untriggered: list[_Rule]


@functools.cache
def _compiled() -> _Compiled:
    """The patterns, compiled at the first redaction, not at import: compiling them took
    several milliseconds of every process that imports Jobwarden, a worker's before its
    first claim, whether it ever redacts anything then or not."""
    rules = _rule_table()
    return _Compiled(
        re.compile(_SECRET_KEY), rules,
        re.compile("|".join(re.escape(t) for r in rules if r.triggers for t in r.triggers)),
        [r for r in rules if r.triggers is None])


def is_secret_key(key: str) -> bool:
    return key.lower() not in _SAFE_KEYS and bool(_compiled().secret_key.search(key))


def safe_str(value: object, what: str = "value", render: Callable[[object], str] = str) -> str:
    """`str(value)` (or `render(value)`), never raising: `<value str() failed>` when it
    does, as the traceback module says it.

    Whatever a handler hands the worker (an exception, an error code, a message, a log
    call's arguments) is turned into text through this on the way to its outcome: a
    `__str__` that raises (KeyError, a SystemExit even) or returns no str must fail that
    job with its own error, never the runner that records it (docs/faults.md)."""
    if type(value) is str:
        return value
    try:
        text = render(value)
        if type(text) is not str:  # a __repr__ may return any str subclass, or worse
            text = str.__str__(text) if isinstance(text, str) else None
    except BaseException:  # a handler's object, never the worker's failure
        text = None
    return text if text is not None else f"<{what} {render.__name__}() failed>"


def redact(text: str) -> str:
    """`text` with every secret shape replaced by [REDACTED].

    The one redaction function: stored errors, payloads and their keys, everything the
    console renders (a Jinja finalize hook), /metrics labels and log lines all pass
    through it. Idempotent: redacting twice changes nothing more. Every pattern runs in
    time linear in the text (tests/unit/test_sanitize_bounds.py), but text that is cut
    afterwards goes through redact_start and redact_end, which redact only a bounded
    window of it."""
    text = safe_str(text)
    lowered = text.lower()
    compiled = _compiled()
    # The common case: no trigger, and the untriggered rules alone.
    rules = compiled.rules if compiled.any_trigger.search(lowered) else compiled.untriggered
    for rule in rules:
        if rule.triggers is None or any(t in lowered for t in rule.triggers):
            text = rule.pattern.sub(rule.replacement, text)
    return text


#: What ends a run of characters a secret may be part of, at a cut: a run that goes on
#: past the redacted window may be the start of a secret too long to be recognised.
_RUN_BREAK = re.compile(r"[\s\"']")


def redact_start(text: str, keep: int) -> tuple[str, bool]:
    """The start of `text` redacted, at most `keep` characters, and whether anything of
    `text` was left out. Only `keep + REDACT_MARGIN` characters are redacted, however
    long `text` is, and they are redacted before they are cut: a secret across the cut is
    recognised whole and never kept in part. When the run of characters at the cut goes
    on past the redacted window (a secret longer than the margin may start there), the
    kept part of that run is dropped too."""
    end = keep + REDACT_MARGIN
    if end < len(text) and not _RUN_BREAK.match(text, end - 1):  # a run goes on: to its end
        found = _RUN_BREAK.search(text, end, min(len(text), REDACT_MAX_WINDOW))
        end = found.end() if found else REDACT_MAX_WINDOW
    window = text[:end]
    redacted = redact(window)
    kept = redacted[:keep]
    if len(window) == len(text) and len(kept) == len(redacted):
        return kept, False
    if len(window) < len(text) and not _RUN_BREAK.search(redacted, len(kept)):
        breaks = list(_RUN_BREAK.finditer(kept))  # at most `keep` characters to look at
        kept = kept[: breaks[-1].end()] if breaks else ""
    return kept, True


#: A private key block's first and last lines (the PEM rule's): the one secret shape that
#: spans lines, so a window of a text's end may start inside one.
_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 _-]{0,60}PRIVATE KEY(?: BLOCK)?-----")
_KEY_END = re.compile(r"-----END [A-Z0-9 _-]{0,60}PRIVATE KEY(?: BLOCK)?-----")


def _open_key(text: str, start: int) -> str:
    """The first line of a private key block that begins before `start` and has not
    ended by then ("" if none): a window that starts at `start` is inside the key, and
    redacts it as such only with that line put before it. Linear: two literal-led scans
    of the text before `start`."""
    last = collections.deque(_KEY_BEGIN.finditer(text, 0, start), maxlen=1)
    if not last or _KEY_END.search(text, last[0].end(), start):
        return ""
    return last[0].group(0) + "\n"


def redact_end(text: str, keep: int) -> tuple[str, bool]:
    """redact_start at the other end: the last `keep` characters of `text`, redacted
    over at most `keep + REDACT_MARGIN`, and whether anything was left out. A window
    that starts inside a private key block is redacted with the block's first line put
    before it, so the rest of the key is recognised (its lines break the runs above)."""
    start = max(len(text) - keep - REDACT_MARGIN, 0)
    if start > 0 and not _RUN_BREAK.match(text, start):  # a run goes on: to its start
        lowest = max(len(text) - REDACT_MAX_WINDOW, 0)
        found = _RUN_BREAK.search(text[lowest:start][::-1])
        start = start - found.end() if found else lowest
    window = text[start:]
    redacted = redact(_open_key(text, start) + window)
    kept = redacted[-keep:] if keep else ""
    if len(window) == len(text) and len(kept) == len(redacted):
        return kept, False
    if len(window) < len(text) and not _RUN_BREAK.search(redacted, 0, len(redacted) - len(kept)):
        match = _RUN_BREAK.search(kept)
        kept = kept[match.start():] if match else ""
    return kept, True


def sanitize_text(text: str | None, max_chars: int = MAX_ERROR_CHARS) -> str | None:
    """The text with secrets replaced by [REDACTED], truncated to max_chars (0: whole).
    Never more than max_chars + REDACT_MARGIN characters of it are redacted."""
    if text is None:
        return None
    text = safe_str(text)
    if not max_chars:
        return redact(text)
    if len(text) <= max_chars:  # the common case: redacted whole, cut if it grew
        redacted = redact(text)
        if len(redacted) <= max_chars:
            return redacted
    kept, cut = redact_start(text, max_chars - 20)
    # The count is of the text as given: how much of it is not shown.
    return f"{kept}… [{max(len(text) - len(kept), 1)} chars cut]" if cut else kept


def sanitize_error_code(code: str | None) -> str | None:
    """An error code as it is stored and logged: secrets redacted (DECLINED_sk_live_… →
    DECLINED_[REDACTED]), at most MAX_ERROR_CODE_CHARS characters.

    A longer code keeps its start and ends in `…#` and 8 hex digits of a digest of the
    whole redacted code: one long code always becomes the same stored code, so its
    failures still group on /failed, two different ones stay apart, and none can make
    that page megabytes long. Never refused: the failure is recorded whatever its code."""
    if code is None:
        return None
    code = redact(code)
    if len(code) <= MAX_ERROR_CODE_CHARS:
        return code
    digest = hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{code[:MAX_ERROR_CODE_CHARS - 10]}…#{digest}"


def sanitize_payload(value: Any, _depth: int = 0, max_chars: int = 0) -> Any:
    """A copy of a JSON value with secret keys' values and secret-looking strings redacted
    (each string, key or value, cut to max_chars; 0: kept whole)."""
    if _depth > 50:
        return REDACTED  # absurdly deep: don't recurse forever on hostile input
    if isinstance(value, dict):
        return {
            (sanitize_text(k, max_chars) if isinstance(k, str) else k):
                (REDACTED if isinstance(k, str) and is_secret_key(k) and v not in (None, "")
                 else sanitize_payload(v, _depth + 1, max_chars))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [sanitize_payload(v, _depth + 1, max_chars) for v in value]
    if isinstance(value, str):
        return sanitize_text(value, max_chars=max_chars)
    return value


def describe_exception(exc: BaseException) -> str:
    """`ExceptionType: message`, sanitized and truncated, for storage. A JobError's
    code is stored in its own column, so only its message is kept here. Never raises:
    an exception whose `__str__` fails is `ExceptionType: <exception str() failed>`."""
    name = type(exc).__name__
    if isinstance(exc, JobError):
        message = safe_str(exc.message, "message")
        return sanitize_text(message or safe_str(exc.code, "code")) or name
    message = safe_str(exc, "exception")
    return sanitize_text(f"{name}: {message}" if message else name) or name


def describe_traceback(exc: BaseException, max_chars: int = MAX_TRACEBACK_CHARS) -> str:
    """The exception's traceback as Python prints it, secrets redacted, at most max_chars.

    A long traceback keeps its first lines and, mostly, its last ones: the innermost
    frames and the exception itself are what an operator needs.
    """
    return _sanitize_traceback("".join(traceback.format_exception(exc)), max_chars)


def _sanitize_traceback(text: str, max_chars: int = MAX_TRACEBACK_CHARS) -> str:
    """A formatted traceback (or stack) redacted, at most max_chars: its first lines and,
    mostly, its last ones; each end redacted over a bounded window only."""
    if len(text) <= max_chars:
        redacted = redact(text)
        if len(redacted) <= max_chars:
            return redacted
    head_chars = max_chars // 4
    head, _ = redact_start(text, head_chars)
    tail, _ = redact_end(text, max_chars - head_chars - 40)
    cut = max(len(text) - len(head) - len(tail), 1)
    return f"{head}\n… [{cut} chars cut] …\n{tail}"


class _NotLoaded(Exception):
    """Never raised: what validation_error() names while pydantic is not loaded."""


def validation_error() -> type[ValidationError]:
    """pydantic's ValidationError, for an `except`, without loading pydantic: a payload
    model is a pydantic model, so while pydantic is not loaded no model has validated
    anything, and nothing can be one (worker/core/env.py says why it may not be)."""
    core = sys.modules.get("pydantic_core")
    return cast("type[ValidationError]",
                core.ValidationError if core is not None else _NotLoaded)


def describe_validation(exc: ValidationError) -> str:
    """A pydantic ValidationError as `field: problem; ...`, without the offending values
    (they may be secrets), truncated."""
    errors = exc.errors(include_url=False, include_input=False)
    parts = [f"{'.'.join(str(p) for p in err['loc']) or 'payload'}: {err['msg']}"
             for err in errors[:10]]
    if len(errors) > 10:
        parts.append(f"and {len(errors) - 10} more")
    return sanitize_text("; ".join(parts)) or "invalid payload"


#: The attributes every LogRecord has; anything else on a record came from `extra`.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message", "asctime", "taskName"}


def redact_value(value: Any, _depth: int = 0, max_chars: int = 0) -> Any:
    """A copy of any value with secrets redacted: strings (each cut to max_chars, 0: kept
    whole), and the keys and values of dicts, lists, tuples and sets (by key as
    sanitize_payload does); others as they are."""
    if isinstance(value, tuple | set | frozenset):
        return [redact_value(v, _depth + 1, max_chars) for v in value]
    return sanitize_payload(value, _depth, max_chars)


class RedactingFilter(logging.Filter):
    """A logging filter that passes each record's message, traceback, stack and every
    field its `extra` added (nested values too) through redact().

    A line keeps what an attempt's log line keeps: MAX_LOG_CHARS characters of its
    message and of each text field, MAX_TRACEBACK_CHARS of its traceback or stack (its
    first and last lines), each redacted over a bounded window, never whole: a handler
    logging a 268 kB response body froze the worker while it was redacted. A message
    that cannot be formatted (`log.info("%d", "x")`, an argument whose `__str__` fails)
    is kept as logged, saying so.

    `jobwarden worker` and `jobwarden console` install it on their log handlers; an
    application embedding the worker adds it to its own: `handler.addFilter(
    RedactingFilter())`. On a handler it covers every logger, the application's too."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message: str | None = record.getMessage()
        except BaseException:  # bad arguments: what was logged, saying so
            message = None
        redacted = sanitize_text(message if message is not None else (
            f"{safe_str(record.msg, 'message')} "
            f"{safe_str(record.args, 'arguments', repr)} (could not be formatted)"),
            MAX_LOG_CHARS)
        if redacted != message:
            record.msg, record.args = redacted, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = _sanitize_traceback(
                logging.Formatter().formatException(record.exc_info))
        if record.stack_info:
            record.stack_info = _sanitize_traceback(safe_str(record.stack_info))
        for name, value in list(vars(record).items()):
            if name not in _RECORD_ATTRIBUTES and value is not None \
                    and not isinstance(value, bool | int | float):
                # A field named like a secret (`token=…`) is redacted whole, as in payloads.
                empty = isinstance(value, str) and not value
                setattr(record, name, REDACTED if is_secret_key(name) and not empty
                        else redact_value(value, max_chars=MAX_LOG_CHARS))
        return True


def redact_log_handlers(logger: logging.Logger | None = None) -> None:
    """Add a RedactingFilter to each handler of `logger` (the root logger by default)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
