"""Secrets never survive sanitizing, and ordinary text does."""

import logging

import pytest

from jobwarden.worker.core.sanitize import (
    MAX_ERROR_CODE_CHARS,
    REDACTED,
    RedactingFilter,
    describe_exception,
    is_secret_key,
    redact,
    sanitize_error_code,
    sanitize_payload,
    sanitize_text,
)


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

GITHUB_PAT = ("github_pat_11ABCDEFG0123456789abcd_"
              "EXAMPLEexampleEXAMPLEexampleEXAMPLEexampleEXAMPLEexample123")
AZURE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
             "KBHBeksoGMGw==")

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
    ("verify otp=551199 rejected", "551199"),
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
    # Shapes from gitleaks' and detect-secrets' rule sets (see worker/core/sanitize.py).
    (f"clone with {GITHUB_PAT} failed", GITHUB_PAT[11:]),
    ("post to https://hooks.slack.com/services/T024BE7LD/B01ABCDEF12/4q8YtEXAMPLEabcdEFGH1234"
     " failed", "4q8YtEXAMPLEabcdEFGH1234"),
    ("post to https://discord.com/api/webhooks/123456789012345678/AbCdEf-gHiJkLmNoPqRs_TuVwXyZ"
     "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGH: 404", "AbCdEf-gHiJkLmNoPqRs_TuVwXyZ"),
    (f"DefaultEndpointsProtocol=https;AccountName=shop;AccountKey={AZURE_KEY};"
     "EndpointSuffix=core.windows.net", AZURE_KEY[:20]),
    ("openai said 401 for sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-abcdEFGH",
     "AbCdEfGhIjKlMnOpQrStUvWxYz"),
    ("google answered 401 for ya29.a0AfH6SMBx3EXAMPLEtoken-abc_def123 expired", "a0AfH6SMBx3EXAMPLE"),
    ("publish with npm_abcdefghijklmnopqrstuvwxyz0123456789 refused",
     "npm_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("hub refused hf_abcdefghijklmnopqrstuvwxyzABCDEFGH invalid", "hf_abcdefghijklmnopqrstuvwxyzABCDEFGH"),
    ("connect postgresql://u:pa/ss@host:5432/db failed", "pa/ss"),
    ('body {\\"password\\": \\"swordfish\\", \\"user\\": \\"bob\\"}', "swordfish"),
    ("config api_key => 'abc123xyz' rejected", "abc123xyz"),
    ("GET /login?next=%2Fhome%3Fpassword%3Dhunter2%26user%3Dbob", "hunter2"),
    ("DECLINED_sk_live_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc"),
    ("E_password=hunter2", "hunter2"),
    ("E_AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("AccountKey: Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50u", "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50u"),
    ("pass: hunter2", "hunter2"),
    ("E_https://bob:hunter2@api.example.com/x", "hunter2"),
    # Issue 35: the shapes the third round of attacks found unredacted.
    # (Secrets of 6 characters or more: the console's pages are searched for each, and a
    # shorter one turns up by chance in a random request id.)
    ("card pin=482193 rejected", "482193"),
    ("cvc: 737119 does not match", "737119"),
    ('{"security_code": "616161", "account_number": "000123456789"}', "616161"),
    ('{"security_code": "616161", "account_number": "000123456789"}', "000123456789"),
    ("routing_number=021000021&amount=5", "021000021"),
    ("mfa_code=884422 expired", "884422"),
    ("passcode: 135790 rejected", "135790"),
    ("recovery_codes=[a1b2-c3d4,e5f6-a7b8]", "a1b2-c3d4"),
    ("sendgrid 401 for 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",
     "TwL2iGABf9DHoTf-09kqeF8tAmbihYzrnopKc"),
    ("webhook signed with whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw failed",
     "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"),
    ("shopify refused 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", "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d"),
    ("mailgun 401 for key-0f1e2d3c4b5a69788796a5b4c3d2e1f0", "0f1e2d3c4b5a69788796a5b4c3d2e1f0"),
    ("twilio rejected SK2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d", "2a4b6c8d0e2f4a6b8c0d2e4f6a8b0c2d"),
    ("jira 401 for ATATT3xFfGF0T4kZ-a9jq1Xc_bM2Lk7pQ8rS5tU0vW3yZ6=A1B2C3D4",
     "xFfGF0T4kZ-a9jq1Xc_bM2Lk7pQ8rS5tU0vW3yZ6"),
    ("POST https://api.telegram.org/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/send 401",
     "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"),
    ("telegram token 7123456789:AAF-0a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6 revoked",
     "AAF-0a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6"),
    ("body {&quot;password&quot;: &quot;swordfish&quot;, &quot;user&quot;: &quot;bob&quot;}",
     "swordfish"),
    ("body {&#34;cvc&#34;:&#34;737119&#34;}", "737119"),
    ("GET /cb?data=%7B%22password%22%3A%22swordfish%22%2C%22user%22%3A%22bob%22%7D", "swordfish"),
    ("GET /cb?data=%7B%22pin%22%3A%20%22482193%22%7D", "482193"),
    ('{"password": "sw\\"ordfish9", "user": "bob"}', "ordfish9"),
    ("body {\\\"password\\\": \\\"sw\\\\\\\"ordfish9\\\"}", "ordfish9"),
    ("client_secret='ab\\'cd9xq' rejected", "cd9xq"),
    ("the password is hunter2", "hunter2"),
    ("login failed: password was Tr0ub4dor&3", "Tr0ub4dor"),
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
    "pass failed: 3 of 5 checks",
    "compass: north",
    "bypass: enabled for admins",
    "signed in via oauth: google",
    "password failed: too short",
    "see https://example.com:8443/users/@ada for details",
    "https://hooks.slack.com/services is the endpoint",
    "hf_status=ok npm_version=10",
    "api.example.com returned 404",
    "spinning up 3 workers; ping: 12ms; mapping=default",
    "the password is too short",
    "account_number_format=iban routing=eu-west",
    "security_level=high",
    "webhook key-rotation scheduled",
]

#: (text, exactly what redaction makes of it): where the redaction starts and ends.
EXACTLY = [
    ("retry (password=hunter2) failed", f"retry (password={REDACTED}) failed"),
    ("[token=abc123] rejected", f"[token={REDACTED}] rejected"),
    ("GET /x?password%3Dhunter2%26user%3Dbob", f"GET /x?password%3D{REDACTED}%26user%3Dbob"),
    ("api_key => 'abc123xyz'", f"api_key => {REDACTED}"),
    ("connect postgresql://u:pa/ss@host:5432/db", f"connect postgresql://u:{REDACTED}@host:5432/db"),
    ("https://hooks.slack.com/services/T024BE7LD/B01ABCDEF12/4q8YtEXAMPLEabcdEFGH1234 (404)",
     f"https://hooks.slack.com/services/{REDACTED} (404)"),
    ('{&quot;pin&quot;: &quot;4321&quot;, &quot;n&quot;: 1}',
     f'{{&quot;pin&quot;: {REDACTED}, &quot;n&quot;: 1}}'),
    ("%7B%22pin%22%3A%224321%22%2C%22n%22%3A1%7D", f"%7B%22pin%22%3A{REDACTED}%2C%22n%22%3A1%7D"),
    ('{"password": "hunt\\"er2", "user": "bob"}', f'{{"password": {REDACTED}, "user": "bob"}}'),
    ("the password is hunter2.", f"the password is {REDACTED}."),
    ("card pin=4321, cvc: 737", f"card pin={REDACTED}, cvc: {REDACTED}"),
]


@pytest.mark.parametrize("text, secret", MUST_REDACT)
def test_secret_shapes_are_redacted(text, secret):
    cleaned = redact(text)
    assert secret not in cleaned, cleaned
    assert REDACTED in cleaned


@pytest.mark.parametrize("text", MUST_NOT_REDACT)
def test_look_alikes_are_not_redacted(text):
    assert redact(text) == text


@pytest.mark.parametrize("text, expected", EXACTLY)
def test_redaction_covers_the_secret_and_nothing_around_it(text, expected):
    assert redact(text) == expected


@pytest.mark.parametrize("text, _secret", MUST_REDACT)
def test_redaction_is_idempotent(text, _secret):
    once = redact(text)
    assert redact(once) == once


def test_payload_keys_are_redacted_too():
    clean = sanitize_payload({"sk_live_4eC39HqLyjWDarjtT1zdp7dc": 1, "plain": {"Bearer abc123": 2}})
    assert "sk_live_4eC39HqLyjWDarjtT1zdp7dc" not in str(clean) and "abc123" not in str(clean)


def test_a_log_records_every_field_is_redacted_nested_values_too():
    record = logging.LogRecord("shop", logging.WARNING, __file__, 1, "declined %s", ("ok",), None)
    record.__dict__.update({
        "provider_code": "DECLINED_sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "card": {"token": "tok_visa_4242abcd", "last4": "4242"},
        "headers": ("Authorization: Bearer q1w2e3r4t5",), "api_key": "k-123",
        "attempt": 2, "signal": "SIGTERM", "compass": "north"})
    assert RedactingFilter().filter(record)
    assert record.provider_code == f"DECLINED_{REDACTED}"
    assert record.card == {"token": REDACTED, "last4": "4242"}
    assert record.headers == [f"Authorization: {REDACTED}"]
    assert record.api_key == REDACTED
    assert (record.attempt, record.signal, record.compass) == (2, "SIGTERM", "north")
    assert record.getMessage() == "declined ok"


def test_error_codes_are_redacted_and_capped_but_stay_groupable():
    assert sanitize_error_code("E_AKIAIOSFODNN7EXAMPLE") == f"E_{REDACTED}"
    assert sanitize_error_code("NETWORK_TIMEOUT") == "NETWORK_TIMEOUT"
    long_a, long_b = "E_" + "A" * 3000, "E_" + "A" * 2999 + "B"
    capped = sanitize_error_code(long_a)
    assert len(capped) == MAX_ERROR_CODE_CHARS and capped.startswith("E_AAAA")
    assert sanitize_error_code(long_a) == capped != sanitize_error_code(long_b)  # stable, apart
    assert sanitize_error_code(capped) == capped  # idempotent


@pytest.mark.parametrize("key, secret", [
    ("password", True), ("refresh_token", True), ("apiKey", True), ("AccountKey", True),
    ("Authorization", True), ("card_cvv", True), ("x-auth", True), ("session_key", True),
    ("pin", True), ("cvc", True), ("security_code", True), ("account_number", True),
    ("routing_number", True), ("mfa_code", True), ("passcode", True),
    ("recovery_codes", True), ("card_pin", True), ("pinCode", True), ("accountNumber", True),
    ("signal", False), ("compass", False), ("design", False), ("oauth", False),
    ("author", False), ("auth_method", False), ("passenger", False),
    ("pinned", False), ("shipping", False), ("opinion", False), ("account_id", False),
    ("routing_key", False), ("security_level", False), ("code", False),
])
def test_secret_keys_are_told_from_look_alikes(key, secret):
    assert is_secret_key(key) is secret
