"""Pure helpers of the console: redirects, durations, limits, progress shapes."""

from __future__ import annotations

import pytest
import wtforms
from flask import Flask, g
from werkzeug.exceptions import Forbidden

from jobwarden.console.core.config import parse_sla_targets
from jobwarden.console.data.queries import JobFilter, clamp_limit
from jobwarden.console.web.formatting import age, progress_fraction
from jobwarden.console.web.forms import given
from jobwarden.console.web.identity import ConsoleUser, current_user, request_user, signed_in
from jobwarden.console.web.security import safe_next_url


@pytest.mark.parametrize("target", [
    "//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)",
    "evil.example", "/jobs\r\nSet-Cookie: x=1", "",
    # Issue 19: each of these is read as another host by some browser, proxy or framework
    # that decodes or drops what it does not like before following the address.
    "///evil.example/x", "/%09/evil.example/x", "/\\evil.example", "https:evil.example",
    "/%2F/evil.example", "/%2f%2fevil.example", "/%5Cevil.example", "/%5c%5cevil.example",
    "/\t/evil.example", "/%0d%0aSet-Cookie:x=1", "/\u2028/evil.example", "\u3000//evil.example",
    "/%E2%80%A8/evil.example", "http:/evil.example", "//", "\\\\evil.example",
    "/%25252525252F/evil.example",
])
def test_redirects_never_leave_the_site(target):
    assert safe_next_url(target, "/") == "/"


@pytest.mark.parametrize("target", [
    "/jobs?status=failed&queue=a", "/jobs?q=a%2Fb%5Cc", "/jobs/12", "/audit?actor=host%3Asop",
    "/failed/group?code=E%20X",
])
def test_redirects_keep_local_paths_with_their_query(target):
    assert safe_next_url(target) == target


def test_sla_targets_parse_the_registry_notation_and_refuse_the_rest():
    assert parse_sla_targets("send_email=30s, export=2m,nightly=1d") == {
        "send_email": 30.0, "export": 120.0, "nightly": 86_400.0}
    with pytest.raises(ValueError, match="^bad: 'x' is not a duration"):
        parse_sla_targets("send_email=30s,bad=x")
    with pytest.raises(ValueError, match="^'a' is given twice$"):  # not the last one silently
        parse_sla_targets("a=1s,b=2s,a=5m")


def test_limits_are_clamped():
    assert clamp_limit("100000", 50, 200) == 200
    assert clamp_limit("-3", 50, 200) == 1
    assert clamp_limit("x", 50, 200) == 50
    flt = JobFilter.from_args({"status": "exploded", "limit": "9999", "before": "-1"})
    assert flt.status is None and flt.limit == 200 and flt.before is None


def test_filters_survive_into_pager_links():
    flt = JobFilter.from_args({"status": "failed", "queue": "e mail"})
    assert flt.query_string(before=10) == "status=failed&queue=e+mail&before=10"


@pytest.mark.parametrize("progress, expected", [
    (0.5, 0.5), (42, 0.42), ({"done": 3, "total": 4}, 0.75), ({"percent": 10}, 0.1),
    ({"processed": 37, "total": 100}, 0.37),
    ({"current": 5, "total": 0}, None), ("half", None), (None, None), (True, None),
])
def test_progress_is_read_from_the_shapes_handlers_report(progress, expected):
    assert progress_fraction(progress) == expected


def test_ages_are_compact():
    assert [age(0.25), age(5), age(42), age(192), age(7500), age(200000)] == [
        "250ms", "5.0s", "42s", "3m 12s", "2h 05m", "2d 7h"]


def test_signed_in_is_the_request_user_and_refuses_nobody():
    """Views record signed_in().actor: nobody is refused (403), never made an actor."""
    app = Flask(__name__)
    operator = ConsoleUser(username="sop", role="operator", id="7")
    with app.test_request_context():
        with pytest.raises(Forbidden):
            signed_in()
        g.jobwarden_user = operator
        assert signed_in() is operator and request_user() is operator
        assert current_user.actor == "sop"


def test_a_required_field_read_before_its_form_validated_is_a_mistake():
    class Form(wtforms.Form):
        reason = wtforms.StringField()

    assert given(Form(data={"reason": "outage"}).reason) == "outage"
    with pytest.raises(RuntimeError, match="'reason' read before the form validated"):
        given(Form().reason)
