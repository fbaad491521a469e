"""Secrets never survive sanitizing, and ordinary text does."""

import pytest

from worker.sanitize import REDACTED, describe_exception, redact, sanitize_payload, sanitize_text


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


# -- secret shapes: one table of what must and must not be redacted --------------------
PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
       "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n"
       "-----END RSA PRIVATE KEY-----")

#: (text, the part that must disappear)
MUST_REDACT = [
    (f"loaded key:\n{PEM}\ndone", "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"),
    (f"loaded key:\n{PEM}\ndone", "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK"),
    ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC (truncated", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
     "b3BlbnNzaC1rZXktdjEAAAAA"),
    ("aws secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY in env", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("temporary creds ASIAIOSFODNN7EXAMPLE expired", "ASIAIOSFODNN7EXAMPLE"),
    ("AWS_SECRET_ACCESS_KEY=je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY", "je7MtGbClwBF"),
    ("charge failed card_number=4242424242424242 exp=12/30", "4242424242424242"),
    ("verify otp=123456 rejected", "123456"),
    ("GET /download?file=a.pdf&sig=9f8e7d6c5b4a", "9f8e7d6c5b4a"),
    ("lookup ssn=078-05-1120 failed", "078-05-1120"),
    ("callback auth=s3cr3tv4lue refused", "s3cr3tv4lue"),
    ("push with glpat-xxxxXXXXxxxx1234abcd failed", "glpat-xxxxXXXXxxxx1234abcd"),
    ("maps key AIzaSyA-1234567890abcdefghijklmnopqrstu rejected", "AIzaSyA-1234567890abcdefghijklmnopqrstu"),
    ("Authorization: Bearer abc123", "abc123"),
    ("retrying with bearer q1w2e3", "q1w2e3"),
    ("login with password hunter2 failed", "hunter2"),
    ("https://bob:p@ss@w0rd@api.example.com/x", "p@ss@w0rd"),
    ("https://bob:p@ss@w0rd@api.example.com/x", "ss@w0rd"),
    ('{"otp": "987654"}', "987654"),
    ("DECLINED_ghp_1234567890abcdefghijABCDEFGHIJ", "ghp_1234567890abcdefghijABCDEFGHIJ"),
    ("key_AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
]

#: Text that looks a little like a secret but is not one: it must come back unchanged.
MUST_NOT_REDACT = [
    "HTTP 503 from https://api.example.com/v1/charges",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b deployed",
    "job 550e8400-e29b-41d4-a716-446655440000 retried",
    "author=Bob tokens_used=5",
    "design=modern signature_valid=true",
    "password reset email sent to user 52",
    "the basic plan has 3 seats",
    "mail to ada@example.com bounced",
    "auth_method=oauth authority=registry",
    "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----",
    "token expired at 2026-11-30T12:00:00Z",
    "ENTITY_NOT_FOUND: project 1842 was deleted",
]


@pytest.mark.parametrize("text, secret", MUST_REDACT)
def test_secret_shapes_are_redacted(text, secret):
    cleaned = redact(text)
    assert secret not in cleaned, cleaned
    assert REDACTED in cleaned


@pytest.mark.parametrize("text", MUST_NOT_REDACT)
def test_look_alikes_are_not_redacted(text):
    assert redact(text) == text


@pytest.mark.parametrize("text, _secret", MUST_REDACT)
def test_redaction_is_idempotent(text, _secret):
    once = redact(text)
    assert redact(once) == once


def test_payload_keys_are_redacted_too():
    clean = sanitize_payload({"sk_live_4eC39HqLyjWDarjtT1zdp7dc": 1, "plain": {"Bearer abc123": 2}})
    assert "sk_live_4eC39HqLyjWDarjtT1zdp7dc" not in str(clean) and "abc123" not in str(clean)
