"""The search box's forms, read before any SQL runs (console/data/search.py)."""

from __future__ import annotations

import pytest

from jobwarden.console.data.search import SearchError, error_words, parse


@pytest.mark.parametrize("text, kind, field, value", [
    ("12345", "id", "job_id", 12345),
    ("  #77 ", "id", "job_id", 77),
    ("key:welcome:user:52", "key", "key", "welcome:user:52"),
    ("KEY: spaced key ", "key", "key", "spaced key"),
    ("welcome:user:52", "key", "key", "welcome:user:52"),
    ("key:error:x", "key", "key", "error:x"),
    ("customer_id=42", "payload", "path", ["customer_id"]),
    ("customer.id = 42", "payload", "path", ["customer", "id"]),
    ("items.0.sku=A-1", "payload", "path", ["items", "0", "sku"]),
    ("error:timed out", "error", "pattern", "%timed%out%"),
    ("error:100%_done\\", "error", "pattern", "%100\\%\\_done\\\\%"),
    ("error:job  57*", "error", "pattern", "%job%57%"),
])
def test_each_form_is_read_as_its_kind(text, kind, field, value):
    search = parse(text)
    assert search.kind == kind and getattr(search, field) == value


@pytest.mark.parametrize("value, values", [
    ("42", ["42", '"42"']),
    ("-1.5e3", ["-1.5e3", '"-1.5e3"']),
    ("true", ["true", '"true"']),
    ("null", ["null", '"null"']),
    ('"42"', ['"42"']),
    ("alice@example.com", ['"alice@example.com"']),
    ('say "hi"', ['"say \\"hi\\""']),
    ("0042", ['"0042"']),  # not a JSON number: a string
])
def test_a_payload_value_matches_its_json_forms(value, values):
    assert parse(f"a.b={value}").values == values


@pytest.mark.parametrize("text, problem", [
    ("", "Type what to search for"),
    ("x" * 201, "at most 200 characters"),
    ("a\tb", "control characters"),
    ("99999999999999999999", "No job has the id"),
    ("0", "No job has the id"),
    ("key:", "Give the idempotency key"),
    ("error:  ", "Give the text to find"),
    ("error: * ", "at least one word before the \\*"),
    ("=42", "Write a payload path"),
    ("a..b=1", "Write a payload path"),
    (".a=1", "Write a payload path"),
    ("a b=1", "Write a payload path"),
    ("a=", "Give the value to find"),
    ("a=[1,2]", "not a list or an object"),
    ('a={"b": 1}', "not a list or an object"),
    ('a="unterminated', "one JSON string"),
    ('a="x" "y"', "one JSON string"),
    (".".join("abcdefghijk") + "=1", "at most 10 parts"),
    ("a=1e99999", None),  # a long exponent is text, never a number PostgreSQL overflows on
    # What a jsonb value or key cannot hold, however it is written: a NUL, a lone surrogate.
    ('a="\\u0000"', "cannot hold"),
    ('a="\\ud800"', "cannot hold"),
    ('a="\\uDFFF tail"', "cannot hold"),
    ('a="\\ude00\\ud83d"', "cannot hold"),
    ("a=\ud800", "cannot hold"),
    ("a\udc00.b=1", "cannot hold"),
    ("\ud83d=1", "cannot hold"),
])
def test_unreadable_searches_are_refused_with_the_reason(text, problem):
    if problem is None:
        assert parse(text).values == [f'"{text[2:]}"']
        return
    with pytest.raises(SearchError, match=problem):
        parse(text)


@pytest.mark.parametrize("text", [
    "customer.cvv=737", "Customer.CVV=737", "password=x", "auth.user=bob", "pin=4321",
    "items.0.card_number=4242", "note=sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    'note="sk_live_4eC39HqLyjWDarjtT1zdp7dc"', "note=password=hunter2",
    "key:reset:token=abc123", "charge:sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "error:pin=4321", "error:whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
])
def test_a_search_for_what_the_console_shows_as_redacted_is_refused(text):
    with pytest.raises(SearchError, match=r"as \[REDACTED\]"):
        parse(text)


@pytest.mark.parametrize("text", [
    "customer.name=Ada", "tokens_used=5", "author=Ann", "key:crm:42", "error:pin",
    "error:[REDACTED]",
])
def test_look_alikes_of_secrets_are_searched(text):
    parse(text)


#: (typed after error:, errors it finds, errors it does not): whole words, on both sides.
WORDS = [
    ("job 57", ["job 57 failed", "Job  57.", "(job 57)", "JOB\t57", "retry of job 57"],
     ["job 5707 failed", "job 157", "myjob 57", "job 57b", "job_57", "job 5 7"]),
    ("57", ["57", "57: gone", "#57", "code=57;"], ["5707", "157", "57a", "x57", "_57"]),
    ("timed out", ["Timed out after 30s"], ["untimed out", "timed outage", "timed-out"]),
    ("time*", ["timeout", "timed out", "time"], ["overtime", "runtime"]),
    ("AUTH_FAILED", ["AUTH_FAILED", "auth_failed: 535"], ["AUTH_FAILED_TWICE", "X_AUTH_FAILED"]),
    ("100%", ["failed for 100% of tries", "100%!"], ["1100% up"]),
    ("(57)", ["job (57) failed", "x(57)y"], ["(570)"]),
    # typed signs are literal, never a regular expression's or LIKE's
    ("a.c", ["a.c"], ["abc"]),
    ("5+", ["5+ retries"], ["55 retries"]),
    ("[0-9]", ["[0-9]"], ["5"]),
    ("a|b", ["a|b"], ["a", "b"]),
    ("100_", ["100_"], ["1000"]),
    ("\\d", ["\\d"], ["5", "d"]),
]


@pytest.mark.parametrize("needle, finds, misses", WORDS)
def test_an_error_text_is_matched_by_whole_words(needle, finds, misses):
    like, words = error_words(needle)
    for error in finds:
        assert words.search(error), (needle, error)
        assert _ilike(like, error), (needle, error)  # the database's test lets it through
    for error in misses:
        assert not words.search(error), (needle, error)


def _ilike(pattern: str, text: str) -> bool:
    """PostgreSQL's ILIKE with its default escape, for the superset check above."""
    import re

    regex, i = "", 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 1
            regex += re.escape(pattern[i])
        else:
            regex += ".*" if c == "%" else "." if c == "_" else re.escape(c)
        i += 1
    return re.fullmatch(regex, text, re.IGNORECASE | re.DOTALL) is not None


def test_a_json_escaped_surrogate_pair_is_one_character():
    assert parse('a="\\ud83d\\ude00"').values == ['"\\ud83d\\ude00"']
