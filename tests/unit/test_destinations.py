"""Where a notification may go (worker/core/destinations.py) and what a message carries
(worker/core/notices.py): the address policy on each kind of address, numbers written
otherwise, URLs shown without their secret, mail addresses that cannot end a header,
and text that stays one short line."""

from __future__ import annotations

import ipaddress

import pytest

from jobwarden.worker.core import destinations as d
from jobwarden.worker.core.notices import SAMPLE_CHARS, Notice, email, line, slack_body

#: (address, refused without private addresses, refused with them)
ADDRESSES = [
    ("93.184.216.34", False, False),  # public
    ("2606:2800:220:1::1", False, False),
    ("127.0.0.1", True, False),
    ("::1", True, False),
    ("10.1.2.3", True, False),
    ("172.16.0.1", True, False),
    ("192.168.1.1", True, False),
    ("100.64.0.1", True, False),  # shared (CGNAT)
    ("fc00::1", True, False),
    ("169.254.169.254", True, True),  # link-local: the metadata service
    ("fe80::1", True, True),
    ("fd00:ec2::254", True, True),  # AWS's over IPv6
    ("100.100.100.200", True, True),  # Alibaba Cloud's
    ("::ffff:169.254.169.254", True, True),
    ("::ffff:127.0.0.1", True, False),
    ("0.0.0.0", True, True),
    ("224.0.0.1", True, True),
    ("240.0.0.1", True, True),
]


@pytest.mark.parametrize(("address", "closed", "still_closed"), ADDRESSES,
                         ids=[a for a, _, _ in ADDRESSES])
def test_the_address_policy(address, closed, still_closed):
    ip = ipaddress.ip_address(address)
    assert (d.address_problem(ip, allow_private=False) is not None) is closed
    assert (d.address_problem(ip, allow_private=True) is not None) is still_closed


@pytest.mark.parametrize("host", ["127.1", "2130706433", "0x7f.0.0.1", "0177.0.0.1",
                                  "[::1]", "127.0.0.1"])
def test_a_number_written_otherwise_is_the_address_it_stands_for(host):
    ip = d.numeric_host(host)
    assert ip is not None and ip.is_loopback
    assert d.host_problem(host, allow_private=False) is not None


def test_a_name_is_checked_when_sent_and_the_loopback_names_at_once():
    assert d.numeric_host("hooks.example.com") is None
    assert d.host_problem("hooks.example.com", allow_private=False) is None
    for local in ("localhost", "LOCALHOST.", "api.localhost", "localhost.localdomain"):
        assert d.host_problem(local, allow_private=False) is not None, local
        assert d.host_problem(local, allow_private=True) is None, local
    assert d.host_problem("bad_host!", allow_private=True) == "the host is not a host name"


def test_resolve_refuses_a_name_with_one_forbidden_address_and_pins_the_first():
    with pytest.raises(d.ForbiddenAddress):
        d.resolve("localhost", 80, allow_private=False)
    assert d.resolve("localhost", 80, allow_private=True) in ("127.0.0.1", "::1")


@pytest.mark.parametrize(("url", "shown"), [
    ("https://hooks.slack.com/services/T0/B0/abcdef", "https://hooks.slack.com/[REDACTED]"),
    ("https://hooks.example.com:8443/x?token=abc", "https://hooks.example.com:8443/[REDACTED]"),
    ("https://hooks.example.com/", "https://hooks.example.com/"),
    ("https://hooks.example.com", "https://hooks.example.com/"),
    ("http://[2606:2800::1]:8080/p", "http://[2606:2800::1]:8080/[REDACTED]"),
    ("https://hooks.example.com?k=v", "https://hooks.example.com/[REDACTED]"),
])
def test_a_url_is_shown_as_its_scheme_and_host(url, shown):
    assert d.redact_url(url) == shown


@pytest.mark.parametrize("address", [
    "ops@example.com\r\nBcc: x@evil.example", "Eve <eve@example.com>", "a@b,c@d",
    "ops@", "@example.com", "ops@example.com;x", "ops @example.com", "ops@-example.com",
    "x" * 250 + "@example.com"])
def test_an_address_that_could_end_a_header_is_refused(address):
    with pytest.raises(ValueError, match="is not a mail address"):
        d.check_address(address)


def test_recipients_are_checked_each_counted_and_none_twice():
    assert d.check_addresses("a@example.com, B@example.com,b@example.com,") == (
        "a@example.com", "B@example.com")
    with pytest.raises(ValueError, match="at most 20"):
        d.check_addresses([f"u{n}@example.com" for n in range(21)])


def test_a_line_is_redacted_one_line_and_capped():
    text = "token=abc123secret\r\nBcc: x@evil\x00\x1b[31m" + "z" * 10_000
    out = line(text, SAMPLE_CHARS)
    assert "abc123secret" not in out and "\n" not in out and "\r" not in out
    assert "\x00" not in out and "\x1b" not in out
    assert len(out) == SAMPLE_CHARS and out.endswith("…")


def test_a_message_of_each_kind_says_its_figures():
    shown = Notice("sla_breach", "report.build", count=3,
                   detail={"wait_s": 300.0, "target_s": 60.0})
    assert shown.title == "SLA breached: report.build"
    assert "waited 5m (target 60s); 3 runnable" in shown.text
    held = Notice("flow_held", "import.mail", count=2, summary=True,
                  detail={"longest_id": 42, "parent_type": "import.row",
                          "parent_code": "ROW_INVALID"})
    assert (held.title, held.path) == ("Flows still held: import.mail waiting on failed "
                                       "parents", "/flows/42")
    digest = Notice("digest", count=30, detail={"titles": [f"t{n}" for n in range(30)]})
    assert digest.text.endswith("t19; and 10 more.")


def test_slack_and_email_keep_their_control_characters_out():
    message = Notice("failed_group", "mail.send", "E<1>&", 1, 1, sample="<!channel>").message(
        "https://ops.example.com")
    text = slack_body(message)["text"]
    assert "<!channel>" not in text and "&lt;!channel&gt;" in text and "E&lt;1&gt;&amp;" in text
    mail = email(message, "jobs@example.com", ("ops@example.com",))
    assert mail["To"] == "ops@example.com" and "\n" not in mail["Subject"]


def test_an_email_header_is_one_line_whatever_the_stored_message_says():
    """A message read back from the database (written there by hand, say) is cleaned
    again when it becomes an email."""
    mail = email({"title": "hi\r\nBcc: thief@evil.example", "text": "t\r\nX: y",
                  "url": "https://ops.example.com/\r\nBcc: z@evil.example"},
                 "jobs@example.com", ("ops@example.com",))
    assert sorted(mail.keys()) == ["Content-Transfer-Encoding", "Content-Type", "From",
                                   "MIME-Version", "Subject", "To"]
    assert mail["Subject"] == "[Jobwarden] hi Bcc: thief@evil.example"
