"""The notifications page (admin only): targets added, edited, deleted and tested, each
audited with its reason; their secrets never rendered back; two admins racing on one
target; a viewer and an operator probing; hostile URLs, hosts and addresses refused."""

from __future__ import annotations

import pytest

from jobwarden.worker.core.notices import NOTIFY_TYPE
from tests.console_support import login
from tests.figures.html_tree import parse
from tests.helpers import scalar

PAGE = "/notifications"
HOOK = "https://hooks.example.com/services/T000/B000/s3cr3tpath0123456789"
SIGNING = "whsec-signing-secret-42"
PASSWORD = "smtp-pass-word-77"


@pytest.fixture
def admin(client):
    assert login(client, "ada").status_code == 303
    return client


def add_webhook(client, post_form, name="team hook", url=HOOK, **more):
    return post_form(client, f"{PAGE}/targets", {
        "kind": "webhook", "name": name, "url": url, "secret": SIGNING, "format": "json",
        "reason": "paging the team", "request_id": f"add-{name}", **more}, token_from=PAGE)


def flashes(client) -> str:
    return " ".join(e.text() for e in parse(client.get(PAGE).get_data(as_text=True))
                    .all(lambda e: e.attrs.get("data-testid", "").startswith("flash-")))


def target_row(client, key: str):
    tree = parse(client.get(PAGE).get_data(as_text=True))
    return tree.one(lambda e: e.attrs.get("data-target") == key)


def test_an_admin_adds_a_webhook_and_its_secrets_never_come_back(admin, post_form, clean_db):
    assert add_webhook(admin, post_form).status_code == 303
    assert "Target 'team hook' added." in flashes(admin)
    key = str(scalar(clean_db, "SELECT id FROM job_notify_targets"))
    row = target_row(admin, key)
    assert row.one("target-where").text() == "https://hooks.example.com/[REDACTED]"
    assert row.one("target-secret").text() == "set"
    for page in (PAGE, "/audit", "/jobs"):
        html = admin.get(page).get_data(as_text=True)
        assert "s3cr3tpath" not in html and SIGNING not in html, page
    audit = scalar(clean_db, "SELECT (actor, role, action, reason, details)::text FROM job_audit")
    assert audit.startswith('(ada,admin,add_notify_target,"paging the team",')
    assert "s3cr3tpath" not in audit and SIGNING not in audit and "team hook" in audit
    subject = parse(admin.get("/audit").get_data(as_text=True)).one("audit-subject").text()
    assert subject == "notification target team hook"
    # the same name again is refused, the first kept
    add_webhook(admin, post_form, url="https://other.example.com/x", request_id="again")
    assert "exists already" in flashes(admin)
    assert scalar(clean_db, "SELECT count(*) FROM job_notify_targets") == 1


def test_an_edit_keeps_the_secrets_left_empty_and_names_what_changed(
        admin, post_form, clean_db):
    add_webhook(admin, post_form)
    key, revision = (scalar(clean_db, "SELECT id FROM job_notify_targets"),
                     scalar(clean_db, "SELECT revision FROM job_notify_targets"))
    r = post_form(admin, f"{PAGE}/targets/{key}", {
        "name": "team hook", "url": "", "secret": "", "format": "slack",
        "revision": str(revision), "reason": "slack instead", "request_id": "e1"},
        token_from=PAGE)
    assert r.status_code == 303 and "saved" in flashes(admin)
    assert scalar(clean_db, "SELECT (url, signing_secret, format, revision)::text "
                            "FROM job_notify_targets") == f"({HOOK},{SIGNING},slack,2)"
    assert scalar(clean_db, "SELECT details->'changed' FROM job_audit "
                            "WHERE action = 'edit_notify_target'") == ["format"]
    post_form(admin, f"{PAGE}/targets/{key}", {
        "name": "team hook", "format": "slack", "clear_secret": "y", "revision": "2",
        "url": "https://hooks.example.com/services/T1/B1/newpath", "reason": "rotated",
        "request_id": "e2"}, token_from=PAGE)
    assert scalar(clean_db, "SELECT (signing_secret IS NULL, url LIKE '%newpath')::text "
                            "FROM job_notify_targets") == "(t,t)"
    assert scalar(clean_db, "SELECT details->'changed' FROM job_audit "
                            "WHERE request_id = 'e2'") == ["url", "signing secret"]


def test_two_admins_racing_on_one_target_the_second_is_refused(
        admin, post_form, clean_db, app):
    add_webhook(admin, post_form)
    key = scalar(clean_db, "SELECT id FROM job_notify_targets")
    other = app.test_client()
    assert login(other, "ada").status_code == 303
    # both opened the page at revision 1; the first saves, the second's form is stale
    post_form(admin, f"{PAGE}/targets/{key}", {
        "name": "renamed", "format": "json", "revision": "1", "reason": "one",
        "request_id": "r1"}, token_from=PAGE)
    post_form(other, f"{PAGE}/targets/{key}", {
        "name": "mine", "format": "slack", "revision": "1", "reason": "two",
        "request_id": "r2"}, token_from=PAGE)
    assert "another admin changed it" in flashes(other)
    post_form(other, f"{PAGE}/targets/{key}/delete", {
        "revision": "1", "reason": "stale delete", "request_id": "r3"}, token_from=PAGE)
    assert "Not deleted" in flashes(other)
    assert scalar(clean_db, "SELECT (name, format, revision)::text FROM job_notify_targets"
                  ) == "(renamed,json,2)"
    post_form(other, f"{PAGE}/targets/{key}/delete", {
        "revision": "2", "reason": "gone", "request_id": "r4"}, token_from=PAGE)
    assert scalar(clean_db, "SELECT count(*) FROM job_notify_targets") == 0
    assert scalar(clean_db, "SELECT string_agg(action, ',' ORDER BY id) FROM job_audit") == (
        "add_notify_target,edit_notify_target,delete_notify_target")


def test_an_email_target_shows_no_password_and_a_test_message_is_queued_once(
        admin, post_form, clean_db):
    r = post_form(admin, f"{PAGE}/targets", {
        "kind": "email", "name": "ops mail", "smtp_host": "smtp.example.com",
        "smtp_port": "587", "smtp_user": "jobs", "smtp_password": PASSWORD, "starttls": "y",
        "email_from": "jobs@example.com", "email_to": "ops@example.com, oncall@example.com",
        "reason": "mail the team", "request_id": "m1"}, token_from=PAGE)
    assert r.status_code == 303
    key = str(scalar(clean_db, "SELECT id FROM job_notify_targets"))
    row = target_row(admin, key)
    assert row.one("target-where").text() == (
        "smtp.example.com:587 to ops@example.com, oncall@example.com (STARTTLS)")
    assert row.one("target-secret").text() == "set"
    assert PASSWORD not in admin.get(PAGE).get_data(as_text=True)
    for says in ("A test message to 'ops mail' is queued", "asked for already"):
        post_form(admin, f"{PAGE}/test", {"target": key, "reason": "does it arrive?",
                                           "request_id": "t1"}, token_from=PAGE)
        assert says in flashes(admin)  # the second: a double click, nothing more sent
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs WHERE type = %s",
                  [NOTIFY_TYPE]) == 1
    assert scalar(clean_db, "SELECT (payload->>'target', queue)::text FROM background_jobs"
                  ) == f"({key},default)"
    assert scalar(clean_db, "SELECT (action, reason, details->>'target')::text FROM job_audit "
                            "WHERE action = 'test_notify_target'") == (
        '(test_notify_target,"does it arrive?","ops mail")')
    messages = parse(admin.get(PAGE).get_data(as_text=True)).all(
        lambda e: e.attrs.get("data-delivery") == key)
    assert [m.attrs["data-state"] for m in messages] == ["waiting"]
    # the sending job's payload names the target, never its secrets (payloads are shown)
    job_id = scalar(clean_db, "SELECT id FROM background_jobs")
    page = admin.get(f"/jobs/{job_id}").get_data(as_text=True)
    assert "notification" in page and "target" in page
    assert PASSWORD not in page and "smtp.example.com" not in page


@pytest.mark.parametrize("who", ["vera", "otto"])
def test_a_viewer_or_an_operator_can_neither_see_nor_change_targets(
        client, post_form, clean_db, admin, who, app):
    add_webhook(admin, post_form)
    key = scalar(clean_db, "SELECT id FROM job_notify_targets")
    probe = app.test_client()
    assert login(probe, who).status_code == 303
    assert probe.get(PAGE).status_code == 403
    nav = [e.text() for e in parse(probe.get("/jobs").get_data(as_text=True)).all(
        lambda e: e.tag == "a" and e.attrs.get("href") == PAGE)]
    assert nav == []
    for url, data in ((f"{PAGE}/targets", {"kind": "webhook", "name": "x", "url": HOOK}),
                      (f"{PAGE}/targets/{key}", {"name": "x", "revision": "1"}),
                      (f"{PAGE}/targets/{key}/delete", {"revision": "1"}),
                      (f"{PAGE}/test", {"target": str(key)}),
                      (f"{PAGE}/test", {"target": "env:webhook"})):
        r = post_form(probe, url, {**data, "reason": "probing", "request_id": "p"},
                      token_from="/jobs")
        assert r.status_code == 403, url
    assert scalar(clean_db, "SELECT count(*) FROM job_audit WHERE actor <> 'ada'") == 0
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0
    assert scalar(clean_db, "SELECT name FROM job_notify_targets") == "team hook"
    # the admin sees the link
    assert PAGE in [e.attrs.get("href") for e in parse(
        admin.get("/jobs").get_data(as_text=True)).all(lambda e: e.tag == "a")]


HOSTILE_URLS = [
    ("file:///etc/passwd", "starts with https:// or http://"),
    ("javascript:alert(1)", "starts with https:// or http://"),
    ("gopher://hooks.example.com:70/_s3cr3tpath", "starts with https:// or http://"),
    ("http://169.254.169.254/latest/meta-data/s3cr3tpath", "link-local or metadata"),
    ("http://[fd00:ec2::254]/s3cr3tpath", "link-local or metadata"),
    ("http://localhost:8080/s3cr3tpath", "the host is this machine"),
    ("http://app.localhost/s3cr3tpath", "the host is this machine"),
    ("http://127.1/s3cr3tpath", "127.0.0.1 is a loopback, private or shared"),
    ("http://2130706433/s3cr3tpath", "127.0.0.1 is a loopback, private or shared"),
    ("http://0x7f.0.0.1/s3cr3tpath", "127.0.0.1 is a loopback, private or shared"),
    ("http://[::ffff:127.0.0.1]/s3cr3tpath", "127.0.0.1 is a loopback, private or shared"),
    ("http://10.0.0.5/s3cr3tpath", "10.0.0.5 is a loopback, private or shared"),
    ("http://100.64.1.1/s3cr3tpath", "100.64.1.1 is a loopback, private or shared"),
    ("http://0.0.0.0/s3cr3tpath", "not an address a message can go to"),
    ("https://user:s3cr3tpath@hooks.example.com/x", "may not hold a user or password"),
    ("https://hooks.example.com/s3cr3tpath#frag", "may not hold a #fragment"),
    ("https://hooks.example.com/s3cr3t path", "a space or a control character"),
]


@pytest.mark.parametrize(("url", "says"), HOSTILE_URLS, ids=[u for u, _ in HOSTILE_URLS])
def test_a_hostile_webhook_url_is_refused_without_being_repeated(
        admin, post_form, clean_db, url, says):
    add_webhook(admin, post_form, url=url, request_id="h")
    said = flashes(admin)
    assert says in said and "Nothing was added" in said, said
    assert "s3cr3tpath" not in said and "s3cr3t path" not in said
    assert scalar(clean_db, "SELECT count(*) FROM job_notify_targets") == 0
    assert scalar(clean_db, "SELECT count(*) FROM job_audit") == 0


def test_private_addresses_when_the_deployment_allows_them_but_never_metadata(
        admin, post_form, clean_db, monkeypatch):
    monkeypatch.setenv("JOBWARDEN_NOTIFY_ALLOW_PRIVATE", "true")
    add_webhook(admin, post_form, name="inside", url="http://10.0.0.5/hook")
    add_webhook(admin, post_form, name="meta", url="http://169.254.169.254/latest")
    add_webhook(admin, post_form, name="mapped", url="http://[::ffff:169.254.169.254]/")
    assert scalar(clean_db, "SELECT string_agg(name, ',') FROM job_notify_targets") == "inside"


HOSTILE_MAIL = [
    ({"email_to": "ops@example.com\r\nBcc: thief@evil.example"}, "is not a mail address"),
    ({"email_to": "ops@example.com,Eve <eve@example.com>"}, "is not a mail address"),
    ({"email_to": ", ".join(f"u{n}@example.com" for n in range(21))}, "at most 20"),
    ({"email_to": " , "}, "at least one recipient"),
    ({"email_from": "jobs@example.com\nSubject: pwned"}, "is not a mail address"),
    ({"smtp_host": "smtp.example.com\r\nRCPT TO:<x@evil>"}, "not a host name"),
    ({"smtp_host": "169.254.169.254"}, "link-local or metadata"),
    ({"smtp_host": "127.0.0.1", "smtp_port": "25"}, "loopback, private or shared"),
    ({"starttls": ""}, "a password is sent only over STARTTLS"),
    ({"name": "ops\r\nmail"}, "the name holds a control character"),
]


@pytest.mark.parametrize(("change", "says"), HOSTILE_MAIL,
                         ids=[str(c)[:50] for c, _ in HOSTILE_MAIL])
def test_hostile_mail_settings_are_refused(admin, post_form, clean_db, change, says):
    form = {"kind": "email", "name": "ops mail", "smtp_host": "smtp.example.com",
            "smtp_port": "587", "smtp_user": "jobs", "smtp_password": PASSWORD,
            "starttls": "y", "email_from": "jobs@example.com", "email_to": "ops@example.com",
            "reason": "mail", "request_id": "m"}
    post_form(admin, f"{PAGE}/targets", {**form, **change}, token_from=PAGE)
    said = flashes(admin)
    assert says in said, said
    assert PASSWORD not in said
    assert scalar(clean_db, "SELECT count(*) FROM job_notify_targets") == 0


def test_a_huge_field_is_refused_before_anything_runs(admin, post_form, clean_db):
    add_webhook(admin, post_form, url="https://hooks.example.com/" + "a" * 3000)
    assert "check url" in flashes(admin)
    assert scalar(clean_db, "SELECT count(*) FROM job_notify_targets") == 0


def test_a_reason_is_required_for_every_change(admin, post_form, clean_db):
    add_webhook(admin, post_form, reason="")
    assert "A reason is required" in flashes(admin)
    assert scalar(clean_db, "SELECT count(*) FROM job_notify_targets") == 0


def _digits(text: str, zero: int) -> str:
    """`text`'s ASCII digits written with another script's (zero: that script's 0)."""
    return "".join(chr(zero + int(d)) for d in text)


def test_a_target_or_revision_that_is_no_bigint_in_ascii_digits_names_nothing(
        admin, post_form, clean_db):
    """A test message's target and a form's revision are ids in ASCII digits within
    bigint: past bigint, or in Arabic-Indic or fullwidth digits (which Python's int()
    reads), they name no target (the flash a deleted target gets), never a 500, and
    nothing is sent or changed."""
    add_webhook(admin, post_form)
    key = str(scalar(clean_db, "SELECT id FROM job_notify_targets"))
    for n, target in enumerate(["99999999999999999999", "9223372036854775808",
                                _digits(key, 0x0660), _digits(key, 0xFF10), f"+{key}"]):
        response = post_form(admin, f"{PAGE}/test", {"target": target, "reason": "probe",
                                                     "request_id": f"t{n}"}, token_from=PAGE)
        assert response.status_code == 303, target
        assert "That target is gone." in flashes(admin), target
    assert scalar(clean_db, "SELECT count(*) FROM background_jobs") == 0
    for n, revision in enumerate(["99999999999999999999", _digits("1", 0x0660)]):
        for path in (f"{PAGE}/targets/{key}", f"{PAGE}/targets/{key}/delete"):
            response = post_form(admin, path, {
                "name": "renamed", "format": "json", "revision": revision,
                "reason": "probe", "request_id": f"r{n}{path[-3:]}"}, token_from=PAGE)
            assert response.status_code == 303, (path, revision)
            said = flashes(admin)
            assert "The form was incomplete" in said or "check revision" in said, said
    assert scalar(clean_db, "SELECT (name, revision)::text FROM job_notify_targets"
                  ) == "(\"team hook\",1)"
    # a route's id in another script's digits names nothing either
    assert post_form(admin, f"{PAGE}/targets/{_digits(key, 0x0660)}/delete", {
        "revision": "1", "reason": "probe", "request_id": "d1"},
        token_from=PAGE).status_code == 404
    assert scalar(clean_db, "SELECT count(*) FROM job_notify_targets") == 1


@pytest.mark.parametrize("who", ["vera", "otto"])
def test_the_audit_log_tells_a_viewer_or_an_operator_no_targets_name_or_reason(
        admin, post_form, clean_db, app, who):
    """Targets are an admin's business: their audit lines say a notification target was
    added, edited, tested or deleted, by whom and when, but not its name nor the admin's
    reason (which may well name it), on /audit and /audit/actions; an admin reads both."""
    add_webhook(admin, post_form, name="PagerDuty-prod-escalation",
                url="https://events.internal-pd.example.com/hook/abc",
                reason="page via events.internal-pd for escalations", request_id="a1")
    key = str(scalar(clean_db, "SELECT id FROM job_notify_targets"))
    post_form(admin, f"{PAGE}/test", {"target": key, "reason": "does PagerDuty answer?",
                                       "request_id": "t1"}, token_from=PAGE)
    other = app.test_client()
    assert login(other, who).status_code == 303
    for page in ("/audit", "/audit/actions", "/audit?action=add_notify_target"):
        html = other.get(page).get_data(as_text=True)
        assert "add_notify_target" in html and "test_notify_target" in html, page
        for secret in ("PagerDuty", "internal-pd", "escalation"):
            assert secret not in html, (page, secret)
    for page in ("/audit", "/audit/actions"):
        shown = admin.get(page).get_data(as_text=True)
        assert "does PagerDuty answer?" in shown and "page via events.internal-pd" in shown
