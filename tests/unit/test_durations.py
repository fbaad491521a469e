"""One duration notation: what it takes, what it refuses and the line that says why, and
that @job, the command line and the environment read it alike (worker/core/durations.py)."""

from __future__ import annotations

import argparse

import pytest

from jobwarden.worker.cli import args as A
from jobwarden.worker.core.durations import ANY, LONGEST, POSITIVE, DurationRule, parse_duration
from jobwarden.worker.core.settings import SettingsError
from jobwarden.worker.jobs.registry import Registry, job

HINT = "use e.g. 30, 30s, 5m, 2h or 7d"


@pytest.mark.parametrize(("given", "seconds"), [
    (30, 30.0), (2.5, 2.5), ("30", 30.0), ("2.5", 2.5), (".5", 0.5), ("30s", 30.0),
    ("5m", 300.0), ("1h", 3600.0), ("250ms", 0.25), ("7d", 604_800.0), ("1.5h", 5400.0),
    (" 5 m ", 300.0), ("0", 0.0), (0, 0.0), ("3660d", float(LONGEST)),
])
def test_the_accepted_forms_read_as_seconds(given, seconds):
    assert ANY.parse(given) == seconds == parse_duration(given)


@pytest.mark.parametrize(("given", "message"), [
    ("abc", f"'abc' is not a duration: {HINT}"),
    ("soon", f"'soon' is not a duration: {HINT}"),
    ("", f"'' is not a duration: {HINT}"),
    ("5 parsecs", f"'5 parsecs' is not a duration: {HINT}"),
    ("1e3", f"'1e3' is not a duration: {HINT}"),
    ("5s5", f"'5s5' is not a duration: {HINT}"),
    (True, f"'True' is not a duration: {HINT}"),
    ([30], f"'[30]' is not a duration: {HINT}"),
    (float("nan"), f"'nan' is not a duration: {HINT}"),
    ("-5s", "'-5s' is negative: a duration is 0 or more"),
    (-1, "'-1' is negative: a duration is 0 or more"),
    ("3661d", "'3661d' is longer than 3660d"),
    ("9" * 400, f"'{'9' * 37}...' is longer than 3660d"),  # a float of inf
    (10**400, f"'{'1' + '0' * 36}...' is longer than 3660d"),  # past a float's range
    (float("inf"), "'inf' is longer than 3660d"),
])
def test_a_refused_form_says_why_in_one_line(given, message):
    with pytest.raises(ValueError) as refused:
        ANY.parse(given)
    assert str(refused.value) == message


@pytest.mark.parametrize("zero", ["0", "0s", "0.0m", 0, 0.0])
def test_zero_is_refused_where_only_more_than_zero_makes_sense(zero):
    with pytest.raises(ValueError, match="must be more than 0$"):
        POSITIVE.parse(zero)
    assert ANY.parse(zero) == 0


def test_a_rule_may_ask_for_a_unit_and_a_shorter_maximum():
    with pytest.raises(ValueError, match="^'3' needs a unit: e.g. 7d, 12h, 30m or 90s$"):
        DurationRule(unit=True).parse("3")
    with pytest.raises(ValueError, match="^'2h' is longer than 1h$"):
        DurationRule(maximum=3600).parse("2h")
    assert DurationRule(unit=True, maximum=3600).parse("1h") == 3600


def test_none_stays_none_where_a_duration_is_optional():
    assert parse_duration(None) is None


def test_job_the_command_line_and_the_environment_read_durations_alike(monkeypatch):
    """The same text is accepted, or refused with the same words, in all three places."""
    from jobwarden.console.core.config import ConsoleSettings

    registry = Registry()
    declared = job("send_email", sla="1d", timeout="90s", registry=registry)(lambda p: None)
    monkeypatch.setenv("JOBWARDEN_SLA", "send_email=1d")
    monkeypatch.setenv("JOBWARDEN_STALE_AFTER", "90s")
    env = ConsoleSettings.load()
    assert (declared.sla, declared.timeout) == (86_400, 90)
    assert (env.sla, env.stale_after, A.delay("1d")) == ({"send_email": 86_400}, 90, 86_400)

    said = f"'abc' is not a duration: {HINT}"
    with pytest.raises(ValueError) as from_job:
        job("send_sms", timeout="abc", registry=registry)
    with pytest.raises(argparse.ArgumentTypeError) as from_cli:
        A.delay("abc")
    monkeypatch.setenv("JOBWARDEN_STALE_AFTER", "abc")
    with pytest.raises(SettingsError) as from_env:
        ConsoleSettings.load()
    assert str(from_job.value) == f"send_sms: timeout={said}"
    assert str(from_cli.value) == said
    assert str(from_env.value) == f"JOBWARDEN_STALE_AFTER: {said}"
