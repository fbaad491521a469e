"""Secrets never survive sanitizing, and ordinary text does."""

import pytest

from worker.sanitize import REDACTED, describe_exception, sanitize_payload, sanitize_text


@pytest.mark.parametrize("text, secret", [
    ("Authorization: Bearer abcdef1234567890", "abcdef1234567890"),
    ("authorization=Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ("GET https://bob:hunter2@api.example.com/x", "hunter2"),
    ("postgresql://app:s3cr3t@db.internal:5432/app", "s3cr3t"),
    ("POST /charge?api_key=abc123&amount=5", "abc123"),
    ('{"password": "swordfish", "user": "bob"}', "swordfish"),
    ("client_secret='xyz789' rejected", "xyz789"),
    ("token eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4", "eyJhbGciOiJIUzI1"),
    ("key sk_live_4eC39HqLyjWDarjtT1zdp7dc leaked", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("AWS AKIAIOSFODNN7EXAMPLE used", "AKIAIOSFODNN7EXAMPLE"),
    ("Cookie: session=abc; theme=dark", "session=abc"),
])
def test_secrets_are_redacted_from_text(text, secret):
    cleaned = sanitize_text(text)
    assert secret not in cleaned
    assert REDACTED in cleaned


@pytest.mark.parametrize("text", [
    "HTTP 503 from https://api.example.com/v1/charges",
    "ENTITY_NOT_FOUND: project 1842 was deleted",
    "author=Bob tokens_used=5",
])
def test_ordinary_text_is_kept(text):
    assert sanitize_text(text) == text


def test_text_is_truncated_with_a_marker():
    out = sanitize_text("y" * 10_000, max_chars=500)
    assert len(out) <= 500 and out.endswith("chars cut]")


def test_payload_secrets_are_redacted_by_key_and_pattern():
    payload = {"userId": 52, "password": "p", "nested": {"apiKey": "k", "Authorization": "x",
               "note": "see https://u:pw@host/x"}, "items": [{"refresh_token": "r"}],
               "author": "Ann", "empty_token": ""}
    clean = sanitize_payload(payload)
    assert clean["userId"] == 52 and clean["author"] == "Ann"
    assert clean["password"] == REDACTED
    assert clean["nested"]["apiKey"] == REDACTED == clean["nested"]["Authorization"]
    assert "pw" not in clean["nested"]["note"]
    assert clean["items"][0]["refresh_token"] == REDACTED
    assert payload["password"] == "p"  # the original is untouched


def test_describe_exception_names_the_type_and_redacts():
    assert describe_exception(ValueError("bad password=x")) == f"ValueError: bad password={REDACTED}"
