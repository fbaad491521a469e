"""Redaction is bounded, and describing what a handler raised never fails.

A handler's 650 kB error, redacted whole by a quadratic pattern, held the GIL and so froze
the whole worker for 40 s (docs/faults-handlers.md). No clock here: what is
held is how much text ever reaches the patterns, and that a secret across any cut is
never kept in part. bench/bench_redaction.py times each pattern on hostile text.
"""

from __future__ import annotations

import logging

import pytest

from jobwarden.worker.core import sanitize
from jobwarden.worker.core.errors import RetryableError
from jobwarden.worker.core.sanitize import (
    MAX_ERROR_CHARS,
    MAX_LOG_CHARS,
    MAX_TRACEBACK_CHARS,
    REDACT_MARGIN,
    REDACT_MAX_WINDOW,
    REDACTED,
    RedactingFilter,
    describe_exception,
    describe_traceback,
    redact,
    safe_str,
    sanitize_error_code,
    sanitize_text,
)
from jobwarden.worker.engine.attempt_log import line_text

MB = 1_000_000
#: Text made to make a backtracking pattern scan again from each start, ~1 MB each.
HOSTILE = {
    "json of bare urls": '{"id":1,"homepage":"https://site1.example.com"},' * (MB // 48),
    "many https:// and no @": "https://" * (MB // 8),
    "scheme://host: runs": "a://b:" * (MB // 6),
    "colons": ":" * MB,
    "word characters": "a" * MB,
    "a=": "a=" * (MB // 2),
    "quotes": '"' * MB,
    "token= then blanks": "token=" + " " * MB + REDACTED,
    "bearer then blanks": "bearer" + " " * MB + REDACTED,
    "password then blanks": "password" + " " * MB + "x",
    "-----BEGIN runs": "-----BEGIN " * (MB // 11),
}


@pytest.fixture
def seen(monkeypatch):
    """The length of every text that reaches redact(), the one door to the patterns."""
    lengths: list[int] = []
    real = sanitize.redact

    def spy(text):
        lengths.append(len(text))
        return real(text)

    monkeypatch.setattr(sanitize, "redact", spy)
    return lengths


def raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as e:
        return e


@pytest.mark.parametrize("name", HOSTILE)
def test_a_megabyte_error_reaches_the_patterns_only_as_far_as_it_is_kept(seen, name):
    text = HOSTILE[name]
    error = sanitize_text("provider answered 500: " + text)
    assert len(error) <= MAX_ERROR_CHARS and error.endswith("chars cut]")
    described = describe_exception(RetryableError("API_ERROR", text))
    assert len(described) <= MAX_ERROR_CHARS
    trace = describe_traceback(raised(RetryableError("API_ERROR", text)))
    assert len(trace) <= MAX_TRACEBACK_CHARS and "chars cut" in trace
    assert seen and max(seen) <= REDACT_MAX_WINDOW, max(seen)


def test_a_megabyte_log_line_reaches_the_patterns_only_as_far_as_it_is_kept(seen):
    body = HOSTILE["json of bare urls"]
    rec = logging.LogRecord("app", logging.WARNING, __file__, 1, "provider said %s password=%s",
                            (body, "hunter2"), None)
    rec.body = body  # a field of `extra`, as long
    rec.exc_info = (type(e := raised(ValueError(body))), e, e.__traceback__)
    assert RedactingFilter().filter(rec)
    message = rec.getMessage()
    assert len(message) <= MAX_LOG_CHARS + 30 and message.endswith("chars cut]")
    assert len(rec.body) <= MAX_LOG_CHARS + 30
    assert len(rec.exc_text) <= MAX_TRACEBACK_CHARS
    assert max(seen) <= REDACT_MAX_WINDOW, max(seen)


def test_an_attempts_log_line_of_a_megabyte_is_bounded_too(seen):
    rec = logging.LogRecord("app", logging.INFO, __file__, 1, "%s", (HOSTILE["colons"],), None)
    assert len(line_text(rec)) <= MAX_LOG_CHARS + 30


#: Secrets as they come, and the part of each that must never be seen, whole or in part.
SECRETS = [
    ("ghp_" + "Q7w" * 12, "Q7w" * 12),
    ("password=" + "Zx8Vb" * 6, "Zx8Vb" * 6),
    ('"client_secret": "' + "Kp4Lm" * 6 + '"', "Kp4Lm" * 6),
    ("https://bob:" + "Hn3Ty" * 6 + "@api.example.com/x", "Hn3Ty" * 6),
    ("Authorization: Bearer " + "Jr5Wq" * 6, "Jr5Wq" * 6),
    ("eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0." + "Sf1Kx" * 6, "Sf1Kx" * 6),
    ("AKIAIOSFODNN7EXAMPLE", "IOSFODNN7EXAMPLE"),
    ("-----BEGIN RSA PRIVATE KEY-----\n" + "MIIEow" * 40 + "\n-----END RSA PRIVATE KEY-----",
     "MIIEow"),
]


def visible_parts(secret: str, text: str, n: int = 5) -> list[str]:
    """Pieces of n characters of the secret that the text shows."""
    return sorted({secret[i:i + n] for i in range(len(secret) - n + 1)} & {
        text[i:i + n] for i in range(len(text) - n + 1)})


@pytest.mark.parametrize("filler", ["lorem ipsum ", '{"id":1,"url":"https://x.example"},'])
@pytest.mark.parametrize("shape, secret", SECRETS, ids=[s[1][:6] for s in SECRETS])
def test_a_secret_placed_across_the_cut_is_never_kept_in_part(shape, secret, filler):
    """Every offset from the secret ending just before the cut to it starting just after,
    in text with blanks and in minified JSON without any."""
    keep = MAX_ERROR_CHARS - 20
    tail = " " + filler * (3 * REDACT_MARGIN // len(filler))
    for start in range(keep - len(shape) - 2, keep + 3):
        head = (filler * (start // len(filler) + 1))[:start - 1] + " "  # not glued to a word
        error = sanitize_text(head + shape + tail)
        assert not visible_parts(secret, error), (start, visible_parts(secret, error))


@pytest.mark.parametrize("at", ["start", "end"])
def test_a_secret_longer_than_the_margin_across_the_window_is_dropped(at):
    """A run that goes on past what was redacted may be a secret too long to recognise:
    its kept part is dropped, whichever end of the text is kept."""
    secret = "Yt6Gd" * (2 * REDACT_MAX_WINDOW // 5)
    before = "note " * (MAX_TRACEBACK_CHARS // 5)
    if at == "start":
        kept, cut = sanitize.redact_start(before[:100] + "ghp_" + secret + before, 1000)
    else:
        kept, cut = sanitize.redact_end(before + "ghp_" + secret + " end", 1000)
    assert cut and not visible_parts(secret, kept)


def test_a_long_text_is_cut_after_redaction_and_counts_what_was_left_out():
    text = "password=hunter2 " + "y" * 10_000
    out = sanitize_text(text, max_chars=500)
    assert out.startswith(f"password={REDACTED} ") and "hunter2" not in out
    assert len(out) <= 500 and out.endswith("chars cut]")


def test_a_quoted_secret_cut_short_is_the_secrets_up_to_the_end():
    assert redact('{"password": "swordf') == f'{{"password": {REDACTED}'


# -- describing what a handler raised never fails -----------------------------------------
class ProviderError(Exception):
    def __init__(self, response):
        super().__init__(response)
        self.response = response

    def __str__(self):
        return f"provider said {self.response['error']}"  # KeyError: no 'error'


class NonStr(Exception):
    def __str__(self):
        return 42


class ExitStr(Exception):
    def __str__(self):
        raise SystemExit(3)


class BadStrRetryable(RetryableError):
    def __str__(self):
        raise AttributeError("missing")


class Unprintable:
    def __str__(self):
        raise SystemExit(4)

    __repr__ = __str__


def unprintable_message() -> RetryableError:
    """A JobError whose message was set, after it was made, to what cannot be printed."""
    exc = RetryableError("API_ERROR", "x")
    exc.message = Unprintable()
    return exc


@pytest.mark.parametrize("make, expected", [
    (lambda: ProviderError({"status": 500}), "ProviderError: <exception str() failed>"),
    (lambda: NonStr("x"), "NonStr: <exception str() failed>"),
    (lambda: ExitStr("x"), "ExitStr: <exception str() failed>"),
    (lambda: BadStrRetryable("API_ERROR", "timed out, password=x"),
     f"timed out, password={REDACTED}"),
    (unprintable_message, "<message str() failed>"),
], ids=["KeyError", "not a str", "SystemExit", "a JobError's own", "a JobError's message"])
def test_an_exception_whose_str_fails_is_described_by_its_type(make, expected):
    exc = make()
    assert describe_exception(exc) == expected
    assert type(raised(exc)).__name__ in describe_traceback(raised(exc))


def test_safe_str_never_raises():
    assert safe_str("text") == "text"
    assert safe_str(Unprintable(), "code") == "<code str() failed>"
    assert safe_str(Unprintable(), "arguments", repr) == "<arguments repr() failed>"
    assert sanitize_error_code(Unprintable()) == "<value str() failed>"
    assert redact(Unprintable()) == "<value str() failed>"


def test_a_log_line_whose_argument_fails_to_print_is_kept_saying_so():
    for rec in (logging.LogRecord("app", logging.INFO, __file__, 1, "got %s password=%s",
                                  (Unprintable(), "x"), None),
                logging.LogRecord("app", logging.INFO, __file__, 1, Unprintable(), (), None)):
        assert RedactingFilter().filter(rec)
        assert "could not be formatted" in rec.getMessage()
        assert "could not be formatted" in line_text(rec)


def _private_key(lines: int) -> tuple[str, list[str]]:
    """A PEM private key block of `lines` 64-character base64 lines, and those lines."""
    body = [("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[i % 64:]
             + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[:i % 64])
            for i in range(lines)]
    return ("-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(body)
            + "\n-----END RSA PRIVATE KEY-----"), body


@pytest.mark.parametrize("after", [0, 10, 100, 400, 1000])
def test_a_key_whose_first_line_is_before_the_end_window_is_redacted_in_it(after):
    """The end of a long text is redacted over a window that may start inside a private
    key block (its lines break every run): no line of the key is kept."""
    key, lines = _private_key(100)
    text = "could not load the signing key:\n" + key + "\nthen:\n" + "y = 2\n" * after
    kept, cut = sanitize.redact_end(text, 2000)
    assert cut
    assert not [line for line in lines if line in kept]


def test_a_traceback_that_quotes_a_private_key_keeps_none_of_it():
    key, lines = _private_key(100)
    try:
        raise ValueError("could not load signing key:\n" + key + "\nconfig dump follows:\n"
                         + "x = 1\n" * 800)
    except ValueError as exc:
        described = describe_traceback(exc)
    assert not [line for line in lines if line in described]


def test_a_key_ended_before_the_end_window_leaves_the_window_as_it_is():
    key, _ = _private_key(100)
    text = key + "\n" + "plain words, no secret\n" * 500
    kept, cut = sanitize.redact_end(text, 2000)
    assert cut and "[REDACTED]" not in kept and kept.endswith("no secret\n")
