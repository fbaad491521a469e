"""Sending notifications to real receivers: a webhook on an HTTP server that checks the
signature as the guide says, Slack's shape, mail through a real SMTP server (aiosmtpd),
STARTTLS, a receiver that is down and then up (nothing lost), and the address policy of
a target set in the console, enforced when the message is sent."""

from __future__ import annotations

import email
import email.policy
import ssl
import subprocess

import psycopg
import pytest

from jobwarden import RetryPolicy
from jobwarden.worker.core.notices import NOTIFY_TYPE, TEST, Notice
from jobwarden.worker.core.settings import NotifySettings
from jobwarden.worker.core.signature import SIGNATURE_HEADER, TIMESTAMP_HEADER
from jobwarden.worker.core.targets import Target
from jobwarden.worker.duties import delivery
from jobwarden.worker.duties.delivery import register_notify_job
from jobwarden.worker.jobs.notifications import all_targets, record
from jobwarden.worker.ops.notify_targets import add_target
from tests.helpers import running_worker
from tests.notify_support import (
    SECRET,
    finish,
    free_port,
    registry,
    smtp_server,
    wait_for,
    webhook_receiver,
)

ADMIN = {"actor": "ada", "role": "admin", "reason": "on call"}
FAST = RetryPolicy(base=0.2, cap=0.4, jitter=0)


def jobs(url: str) -> list[dict]:
    with psycopg.connect(url) as conn:
        cur = conn.execute("SELECT j.id, j.status, j.attempts, j.last_error_code, "
                           "j.last_error, d.sent_at FROM background_jobs j "
                           "JOIN job_notify_deliveries d ON d.job_id = j.id ORDER BY j.id")
        names = [c.name for c in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def a_failed_group(url: str, **env) -> list[int]:
    """A code that started failing, told by the notifier to the environment's targets
    (`env`: the JOBWARDEN_NOTIFY_* values); the messages' ids."""
    from jobwarden.worker.duties import notifier

    settings = NotifySettings.model_validate(env)
    with psycopg.connect(url) as conn:
        finish(conn, "mail.send", 3, code="SMTP_DOWN",
               error="SMTP said no: password=hunter2hunter2")
        ids = notifier.run_once(conn, settings=settings)
        conn.commit()
    return ids or []


def worker_registry():
    reg = registry("app.job")
    register_notify_job(reg, backoff=FAST)  # a down receiver is tried again within a second
    return reg


def test_the_webhook_gets_the_message_signed_and_the_signature_verifies(clean_db, monkeypatch):
    with webhook_receiver() as (url, received):
        env = {"JOBWARDEN_NOTIFY_WEBHOOK_URL": url, "JOBWARDEN_NOTIFY_WEBHOOK_SECRET": SECRET,
               "JOBWARDEN_CONSOLE_URL": "https://ops.example.com/jobs"}
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        [message_id] = a_failed_group(clean_db, **{k.removeprefix("JOBWARDEN_").lower(): v
                                                   for k, v in env.items()})
        with running_worker(worker_registry(), clean_db):
            wait_for(lambda: received.all(), "the webhook's POST")
            wait_for(lambda: jobs(clean_db)[0]["status"] == "completed", "the job's end")
    [post] = received.all()
    assert post["verified"], post["headers"]
    assert post["path"] == "/hooks/t0ken-path"
    assert post["headers"][SIGNATURE_HEADER].startswith("v1=")
    assert post["headers"]["X-Jobwarden-Delivery"] == f"{message_id}:env:webhook"
    body = post["json"]
    assert (body["id"], body["kind"], body["count"], body["error_code"]) == (
        message_id, "failed_group", 3, "SMTP_DOWN")
    assert body["url"] == "https://ops.example.com/jobs/failed/group?code=SMTP_DOWN&type=mail.send"
    assert "hunter2hunter2" not in post["body"].decode() and body["started_at"]
    assert jobs(clean_db)[0]["sent_at"] is not None
    # a body changed on the way, or a stale timestamp, does not verify
    from jobwarden.worker.core.signature import verify
    headers = post["headers"]
    assert not verify(SECRET, headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER],
                      post["body"].replace(b"SMTP_DOWN", b"SMTP_UP__"))
    assert not verify(SECRET, headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER],
                      post["body"], now=int(headers[TIMESTAMP_HEADER]) + 301)
    assert not verify("another secret", headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER],
                      post["body"])


def test_the_slack_preset_posts_an_incoming_webhooks_text(clean_db):
    with webhook_receiver() as (url, received):
        settings = NotifySettings.model_validate({
            "notify_webhook_url": url, "notify_webhook_format": "slack",
            "console_url": "https://ops.example.com/jobs"})
        message = Notice("failed_group", "mail.send", "SMTP_DOWN", 3, 3,
                         sample="<@channel> & more").message(settings.console_url)
        delivery.deliver(all_targets_of(clean_db, settings)[0], message, 7, settings)
    [post] = received.all()
    assert post["json"] == {"text": (
        "*New failed group: SMTP_DOWN on mail.send*\n"
        "3 job(s) failed with SMTP_DOWN since an unknown time.\n"
        "Sample: `&lt;@channel&gt; &amp; more`\n"
        "<https://ops.example.com/jobs/failed/group?code=SMTP_DOWN&type=mail.send"
        "|Open in the console>")}
    assert SIGNATURE_HEADER not in post["headers"]  # no secret given: unsigned


def all_targets_of(url: str, settings: NotifySettings) -> list[Target]:
    with psycopg.connect(url) as conn:
        return all_targets(conn, settings)


def test_mail_goes_through_a_real_smtp_server_with_no_header_to_spare(clean_db):
    with smtp_server() as (port, got):
        settings = NotifySettings.model_validate({
            "notify_smtp_host": "127.0.0.1", "notify_smtp_port": port,
            "notify_smtp_starttls": False, "notify_email_from": "jobs@example.com",
            "notify_email_to": "ops@example.com, oncall@example.com",
            "console_url": "https://ops.example.com/jobs"})
        # A code and a sample that try to end the Subject header and add a recipient.
        hostile = Notice("failed_group", "mail.send", "BAD\r\nBcc: thief@evil.example", 2, 2,
                         sample="line one\r\n\r\nBcc: thief@evil.example\n" + "y" * 50_000)
        delivery.deliver(all_targets_of(clean_db, settings)[0],
                         hostile.message(settings.console_url), 9, settings)
    [envelope] = got
    assert envelope.mail_from == "jobs@example.com"
    assert envelope.rcpt_tos == ["ops@example.com", "oncall@example.com"]
    mail = email.message_from_bytes(envelope.content, policy=email.policy.default)
    # the hostile text stayed inside the Subject, on its one line: no header was added
    assert sorted(mail.keys()) == ["Content-Transfer-Encoding", "Content-Type", "From",
                                   "MIME-Version", "Subject", "To"]
    assert mail["Subject"].strip() == ("[Jobwarden] New failed group: BAD Bcc: thief@evil.example "
                               "on mail.send")
    body = mail.get_content()
    assert "Open: https://ops.example.com/jobs/failed/group?code=BAD" in body
    assert len(body) < 3_000  # the 50 kB sample is capped


def _certificate(tmp_path) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 (openssl), and its key."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return str(cert), str(key)


def test_starttls_then_the_login_and_none_without_it(clean_db, tmp_path, monkeypatch):
    cert, key = _certificate(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", cert)  # the worker trusts this server's certificate
    logins = []

    def authenticate(server, session, envelope, mechanism, auth_data):
        from aiosmtpd.smtp import AuthResult
        logins.append((auth_data.login, auth_data.password, session.ssl is not None))
        return AuthResult(success=auth_data.password == b"s3cr3t-pw")

    base = {"notify_smtp_host": "127.0.0.1", "notify_email_from": "jobs@example.com",
            "notify_email_to": "ops@example.com", "notify_smtp_user": "jobs",
            "notify_smtp_password": "s3cr3t-pw"}
    message = Notice(TEST).message(None)
    from aiosmtpd.controller import Controller

    with smtp_server() as (plain_port, plain_got):  # offers no STARTTLS
        settings = NotifySettings.model_validate({**base, "notify_smtp_port": plain_port})
        with pytest.raises(delivery.RetryableError) as refused:
            delivery.deliver(all_targets_of(clean_db, settings)[0], message, 1, settings)
        assert refused.value.code == delivery.REFUSED and "no STARTTLS" in refused.value.message
        assert plain_got == []

    got = []

    class Keep:
        async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's)
            got.append(envelope)
            return "250 OK"

    controller = Controller(Keep(), hostname="127.0.0.1", port=free_port(),
                            tls_context=context, require_starttls=True,
                            authenticator=authenticate, auth_required=True)
    controller.start()
    try:
        settings = NotifySettings.model_validate({**base, "notify_smtp_port": controller.port})
        delivery.deliver(all_targets_of(clean_db, settings)[0], message, 2, settings)
    finally:
        controller.stop()
    assert logins == [(b"jobs", b"s3cr3t-pw", True)]  # the password crossed inside TLS
    assert [e.rcpt_tos for e in got] == [["ops@example.com"]]


def test_a_receiver_down_then_up_loses_nothing(clean_db, monkeypatch):
    port = free_port()
    url = f"http://127.0.0.1:{port}/hooks/t0ken-path"
    monkeypatch.setenv("JOBWARDEN_NOTIFY_WEBHOOK_URL", url)
    monkeypatch.setenv("JOBWARDEN_NOTIFY_WEBHOOK_SECRET", SECRET)
    settings = NotifySettings.current()
    with psycopg.connect(clean_db) as conn:
        ids = [record(conn, Notice(TEST), all_targets(conn, settings), settings)
               for _ in range(3)]
        conn.commit()
    with running_worker(worker_registry(), clean_db):
        # nobody listens: every sending fails, and comes back
        wait_for(lambda: all(j["attempts"] >= 2 and j["status"] == "pending"
                             for j in jobs(clean_db)), "attempts against a closed port")
        assert {j["last_error_code"] for j in jobs(clean_db)} == {delivery.UNREACHABLE}
        assert all("t0ken-path" not in (j["last_error"] or "") for j in jobs(clean_db))
        with webhook_receiver(port=port) as (_url, received):
            wait_for(lambda: all(j["status"] == "completed" for j in jobs(clean_db)),
                     "the messages sent once the receiver is up")
            posts = received.all()
    assert sorted(p["json"]["id"] for p in posts) == ids
    assert all(p["verified"] for p in posts)
    assert all(j["sent_at"] is not None for j in jobs(clean_db))


def test_a_console_target_may_not_reach_this_machine_unless_allowed(clean_db, monkeypatch):
    """The address policy holds when the message is sent, on the address the name
    resolves to then (a target stored while allowed, or written by hand)."""
    with webhook_receiver() as (url, received):
        localhost = url.replace("127.0.0.1", "localhost")
        allowed = NotifySettings.model_validate({"notify_allow_private": True})
        with psycopg.connect(clean_db) as conn:
            add_target(conn, Target("", "team hook", "webhook", True, url=localhost,
                                    secret=SECRET), settings=allowed, **ADMIN)
            target = all_targets(conn, allowed)[0]
            record(conn, Notice(TEST), [target], allowed)
            conn.commit()
        monkeypatch.delenv("JOBWARDEN_NOTIFY_ALLOW_PRIVATE", raising=False)
        with running_worker(worker_registry(), clean_db):
            wait_for(lambda: jobs(clean_db)[0]["last_error_code"] == delivery.FORBIDDEN,
                     "a refused attempt")
            assert received.all() == []
            assert "t0ken-path" not in jobs(clean_db)[0]["last_error"]
            # the deployment allows private addresses: the next attempt goes
            monkeypatch.setenv("JOBWARDEN_NOTIFY_ALLOW_PRIVATE", "1")
            wait_for(lambda: jobs(clean_db)[0]["status"] == "completed", "the message sent")
        assert len(received.all()) == 1 and received.all()[0]["verified"]


def test_a_target_removed_before_its_message_went_ends_the_job_unsent(clean_db):
    with psycopg.connect(clean_db) as conn:
        allowed = NotifySettings.model_validate({"notify_allow_private": True})
        add_target(conn, Target("", "old hook", "webhook", True,
                                url="http://127.0.0.1:9/x"), settings=allowed, **ADMIN)
        target = all_targets(conn, allowed)[0]
        record(conn, Notice(TEST), [target], allowed)
        conn.execute("DELETE FROM job_notify_targets")
        conn.commit()
    with running_worker(worker_registry(), clean_db):
        wait_for(lambda: jobs(clean_db)[0]["status"] == "completed", "the job's end")
    assert jobs(clean_db)[0]["sent_at"] is None
    with psycopg.connect(clean_db) as conn:
        result = conn.execute("SELECT result FROM background_jobs WHERE type = %s",
                              [NOTIFY_TYPE]).fetchone()[0]
    assert result == {"sent": False, "why": "the target was removed"}


def test_a_worker_tells_the_webhook_when_a_code_starts_failing(clean_db, monkeypatch):
    """End to end: handlers fail, the worker's own notifier duty sees the group and its
    own `jobwarden.notify` job posts it, signed."""
    from jobwarden import PermanentError, Registry, enqueue, job

    reg = Registry()

    @job("card.charge", registry=reg, max_attempts=1)
    def charge(ctx, payload):
        raise PermanentError("CARD_DECLINED", f"card {payload['n']} declined, cvv=123")

    register_notify_job(reg, backoff=FAST)
    with webhook_receiver() as (url, received):
        for name, value in {"JOBWARDEN_NOTIFY_WEBHOOK_URL": url,
                            "JOBWARDEN_NOTIFY_WEBHOOK_SECRET": SECRET,
                            "JOBWARDEN_CONSOLE_URL": "https://ops.example.com",
                            "JOBWARDEN_DUTY_INTERVAL": "0.2"}.items():
            monkeypatch.setenv(name, value)
        with psycopg.connect(clean_db) as conn:
            for n in range(3):
                enqueue(conn, "card.charge", {"n": n}, registry=reg)
            conn.commit()
        with running_worker(reg, clean_db):
            wait_for(lambda: received.all(), "the notifier's message")
    post = received.all()[0]
    assert post["verified"]
    body = post["json"]
    assert (body["kind"], body["job_type"], body["error_code"]) == (
        "failed_group", "card.charge", "CARD_DECLINED")
    assert body["url"] == "https://ops.example.com/failed/group?code=CARD_DECLINED&type=card.charge"
    assert "cvv=123" not in body["sample"] and "declined" in body["sample"]


def test_only_a_worker_serving_the_notify_queue_runs_the_notifier():
    from jobwarden.worker.duties.periodic import Duties

    reg = registry("app.job")
    names = {serves: [name for name, _, _ in Duties(reg, worker_id="w", serves=serves)._duties]
             for serves in (lambda q: q == "default", lambda q: q == "email")}
    assert ["notify" in n for n in names.values()] == [True, False]


def test_a_name_that_resolves_to_this_machine_when_sent_is_refused_and_the_check_pinned(
        clean_db, monkeypatch):
    """DNS answering differently at send time (rebinding): the name passed when saved,
    and resolves to 127.0.0.1 now: refused. Allowed, the connection goes to the address
    checked, although the name's next answer (127.0.0.2, where nothing listens) differs."""
    import socket

    real = socket.getaddrinfo
    answers: list[str] = []

    def rebinding(host, port, *args, **kwargs):
        if host != "rebind.example.test":
            return real(host, port, *args, **kwargs)
        if kwargs.get("flags", 0) & socket.AI_NUMERICHOST:
            raise socket.gaierror(socket.EAI_NONAME, "not a number")
        answers.append("127.0.0.1" if not answers else "127.0.0.2")
        return real(answers[-1], port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    with webhook_receiver() as (url, received):
        named = url.replace("127.0.0.1", "rebind.example.test")
        target = Target("1", "rebinding", "webhook", True, url=named, secret=SECRET)
        closed = NotifySettings.model_validate({})
        with pytest.raises(delivery.RetryableError) as refused:
            delivery.deliver(target, Notice(TEST).message(None), 1, closed)
        assert refused.value.code == delivery.FORBIDDEN and received.all() == []
        assert "t0ken-path" not in refused.value.message
        answers.clear()
        opened = NotifySettings.model_validate({"notify_allow_private": True})
        delivery.deliver(target, Notice(TEST).message(None), 2, opened)
    [post] = received.all()
    assert post["verified"] and post["headers"]["Host"].startswith("rebind.example.test")


@pytest.mark.parametrize("target", [
    # a name that does not resolve
    Target("7", "PagerDuty-prod-escalation", "webhook", True,
           url="https://events.internal-pd.invalid/hook/abc"),
    # an address the policy refuses, by name and by number
    Target("7", "PagerDuty-prod-escalation", "webhook", True,
           url="http://localhost:9/hook/abc"),
    Target("7", "PagerDuty-prod-escalation", "webhook", True, url="http://127.0.0.1:9/h"),
    # nothing listening (allowed to reach this machine)
    Target("7", "PagerDuty-prod-escalation", "webhook", False,
           url="http://127.0.0.1:9/hook/abc"),
    Target("7", "PagerDuty-prod-escalation", "email", True,
           smtp_host="smtp.internal-pd.invalid", email_from="jobs@internal-pd.invalid",
           email_to=("oncall@internal-pd.invalid",)),
    Target("7", "PagerDuty-prod-escalation", "email", False, smtp_host="127.0.0.1",
           smtp_port=9, email_from="jobs@internal-pd.invalid",
           email_to=("oncall@internal-pd.invalid",)),
], ids=["unresolved", "localhost", "loopback", "closed-port", "mail-unresolved",
        "mail-closed-port"])
def test_a_sending_jobs_error_names_the_target_by_its_key_alone(target):
    """A sending job's error is shown on every role's pages (the job, Failed); a target's
    name and where it points are an admin's (the Notifications page): the error says
    `target 7` and what went wrong, never the name, host, address or recipients."""
    with pytest.raises(delivery.RetryableError) as failed:
        delivery.deliver(target, Notice(TEST).message(None), 1, NotifySettings.model_validate({}))
    said = failed.value.message
    assert said.startswith("target 7: "), said
    for secret in ("PagerDuty", "internal-pd", "localhost", "127.0.0.1", "oncall", "hook/abc"):
        assert secret not in said, (secret, said)


def test_a_recipient_refused_is_logged_naming_the_target_by_its_key_alone(caplog):
    """The sending job's attempt log keeps its log lines, and every role reads them on
    the job's page: a refused recipient is logged by the target's key, without its name,
    host or recipients."""
    from aiosmtpd.controller import Controller

    class RefuseOne:
        async def handle_RCPT(self, server, session, envelope, address, options):  # noqa: N802
            if address.startswith("gone@"):
                return "550 no such mailbox"
            envelope.rcpt_tos.append(address)
            return "250 OK"

        async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's)
            return "250 OK"

    controller = Controller(RefuseOne(), hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        target = Target("7", "PagerDuty-prod-escalation", "email", False,
                        smtp_host="127.0.0.1", smtp_port=controller.port, starttls=False,
                        email_from="jobs@internal-pd.invalid",
                        email_to=("oncall@internal-pd.invalid", "gone@internal-pd.invalid"))
        settings = NotifySettings.model_validate({"notify_smtp_starttls": False,
                                                  "notify_allow_private": True})
        with caplog.at_level("WARNING", logger="jobwarden.notify"):
            delivery.deliver(target, Notice(TEST).message(None), 1, settings)
    finally:
        controller.stop()
    [line] = [r.getMessage() for r in caplog.records if r.name == "jobwarden.notify"]
    assert line == "notification mail refused for 1 recipient(s) by target 7"
