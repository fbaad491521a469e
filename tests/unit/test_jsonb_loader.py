"""The worker's own connections read jsonb with JsonbLoader (worker/store/jobstore.py):
whatever PostgreSQL writes, and whatever else it might be given, it reads as json.loads
does, and it refuses what json.loads refuses."""

from __future__ import annotations

import json
import math

import pytest

from jobwarden.worker.store.jobstore import JsonbLoader, UnreadableJson

TEXTS = [
    '{"i": 12345}', "{}", "[]", "null", "true", "false", "0", "-1.5e-07",
    "123456789012345678901234567890", '"text"', '""',
    '{"a": [1, 2.5, null, true, {"b": "c"}], "d": {"e": []}}',
    '{"quote": "a \\" b", "slash": "\\\\", "nl": "\\n", "u": "\\u00e9\\ud83d\\ude00"}',
    '{"é": "日本語", "emoji": "😀"}',
    '{"a": 1, "a": 2}',
    # not PostgreSQL's shape: spaces around the value
    ' {"a": 1}', '{"a": 1} ', "\n[1]\n",
]


@pytest.mark.parametrize("text", TEXTS)
def test_it_reads_what_json_loads_reads(text):
    loader = JsonbLoader(0, None)
    for data in (text.encode(), memoryview(text.encode())):
        got = loader.load(data)
        assert got == json.loads(text)
        assert type(got) is type(json.loads(text))


def test_it_reads_nan_as_json_loads_does():
    assert math.isnan(JsonbLoader(0, None).load(b"NaN"))


@pytest.mark.parametrize("text", ["", " ", "{", '{"a": }', "[1,]", "1 2", "{} {}", "nope"])
def test_it_refuses_what_json_loads_refuses(text):
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        JsonbLoader(0, None).load(text.encode())


@pytest.mark.parametrize("text, error, why", [
    ('{"a": ' + "[" * 3000 + "]" * 3000 + "}", RecursionError,
     "is nested deeper than the worker can read"),
    (" " + "[" * 3000 + "]" * 3000, RecursionError, "is nested deeper than the worker can read"),
    ('{"a": ' + "7" * 5000 + "}", ValueError,
     "holds an integer of more digits than the worker reads"),
    (" " + "7" * 5000, ValueError, "holds an integer of more digits than the worker reads"),
], ids=["deep", "deep-spaced", "digits", "digits-spaced"])
def test_what_postgresql_stores_and_json_cannot_read_is_an_unreadable_empty_object(
        text, error, why):
    """json.loads raises on it (PostgreSQL stores both: thousands of levels, numbers of
    131,072 digits); the loader gives an empty object that says why (runner.py fails the
    job with it), not an error that ends the claim."""
    with pytest.raises(error):
        json.loads(text)
    got = JsonbLoader(0, None).load(text.encode())
    assert isinstance(got, UnreadableJson) and got == {}
    assert got.reason == f"the payload ({len(text):,} characters of JSON) {why}"
