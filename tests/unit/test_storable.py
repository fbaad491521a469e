"""storable_text: what PostgreSQL refuses becomes something it stores, nothing else changes."""

import pytest

from jobwarden.worker.core.storable import storable_json, storable_text


@pytest.mark.parametrize("given, stored", [
    ("plain text", "plain text"),
    ("nul\x00inside", "nul\\x00inside"),
    ("lone \ud800 high", "lone \ufffd high"),
    ("lone \udfff low", "lone \ufffd low"),
    ("pair \ud83d\ude00 joined", "pair \U0001f600 joined"),
    ("émoji 😀 kept", "émoji 😀 kept"),
    (None, None),
])
def test_storable_text(given, stored):
    assert storable_text(given) == stored
    if stored is not None:
        stored.encode("utf-8")  # what psycopg does with it


def test_storable_json_cleans_keys_and_nested_strings():
    assert storable_json({"k\x00": ["v\ud800", {"n": 1}]}) == {"k\\x00": ["v\ufffd", {"n": 1}]}
