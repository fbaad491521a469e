"""The Alerts panel's xmin-horizon line, over rows shaped as metrics_xmin_horizon returns.

Its firing side needs a transaction open for over 5 minutes, which a test cannot wait
for; the integration tests read the same line from a real held snapshot."""

from __future__ import annotations

from jobwarden.console.views.alerts import evaluate
from jobwarden.console.views.metrics import Recent


def horizon_line(*rows):
    recent = Recent(executions=[], runnable=[], stale=[], slas={}, tables=[],
                    horizon=[dict(zip(("holder", "age_xids", "age_s", "hidden"), r,
                                      strict=True)) for r in rows])
    (line,) = [a for a in evaluate(recent, [], [], {}) if a.name == "JobwardenXminHorizonHeld"]
    return line


def test_a_horizon_held_over_five_minutes_fires_naming_the_oldest_holder_first():
    line = horizon_line(("session", 900, 372.0, 0), ("prepared_transaction", 40, 301.0, 0),
                        ("replication", 5000, None, 0))
    assert line.firing
    assert line.detail == "a session open 6m 12s, a prepared_transaction open 5m 01s"


def test_five_minutes_exactly_does_not_fire_as_the_rule_wants_more():
    assert not horizon_line(("session", 10, 300.0, 0)).firing


def test_sessions_the_role_cannot_time_are_said_not_to_be_cleared():
    line = horizon_line(("session", 10, None, 2), ("prepared_transaction", None, None, 0))
    assert not line.firing
    assert line.detail.endswith("; 2 session(s) the console's role may not time "
                                "(grant pg_monitor)")


def line_of(name, *executions):
    """The panel's line `name` over (type, outcome, executions[, error code]) rows."""
    fields = ("type", "outcome", "executions", "error_code")
    recent = Recent(executions=[dict(zip(fields[:len(e)], e, strict=True)) for e in executions],
                    runnable=[], stale=[], slas={}, tables=[], horizon=[])
    (line,) = [a for a in evaluate(recent, [], [], {}) if a.name == name]
    return line


def failed_rate_line(*executions):
    return line_of("JobwardenFailedRateHigh", *executions)


def test_a_type_failing_under_the_minimum_is_named_as_not_judged_rather_than_fine():
    line = failed_rate_line(("send_email", "failed", 1), ("send_email", "completed", 1),
                            ("report", "completed", 30))
    assert not line.firing
    assert line.detail == ("no type with 20+ executions over 10% in the last 5 minutes; "
                           "under 20 executions, not judged: send_email 1 of 2 failed")


def test_a_type_over_the_rate_with_enough_executions_fires():
    line = failed_rate_line(("send_email", "failed", 5), ("send_email", "completed", 15))
    assert line.firing
    assert line.detail == "send_email 25% of 20 ((no code) 5)"


def test_retries_are_failed_executions_and_each_code_gets_its_link():
    """A storm still retrying fails now: its retries count, by error code, and the row
    links to each code's failed group of that type."""
    line = failed_rate_line(("sync_crm", "retry", 8, "AUTH_FAILED"),
                            ("sync_crm", "failed", 2, "AUTH_FAILED"),
                            ("sync_crm", "timeout", 3, "TIMEOUT"),
                            ("sync_crm", "completed", 17, ""),
                            ("sync_crm", "worker_lost", 1, "WORKER_LOST"))
    assert line.firing
    assert line.detail == "sync_crm 42% of 31 (AUTH_FAILED 10, TIMEOUT 3)"
    assert [(link.endpoint, dict(link.args)) for link in line.links] == [
        ("jobwarden.failed.group", {"code": "AUTH_FAILED", "type": "sync_crm"}),
        ("jobwarden.failed.group", {"code": "TIMEOUT", "type": "sync_crm"})]
    assert "judged on 20 executions or more" in line.condition


def test_a_retry_storm_is_over_half_of_a_types_executions_retried_with_one_code():
    assert not line_of("JobwardenRetryStorm", ("sync_crm", "retry", 19, "AUTH_FAILED"),
                       ("sync_crm", "completed", 1, "")).firing  # too few
    assert not line_of("JobwardenRetryStorm", ("sync_crm", "retry", 50, "AUTH_FAILED"),
                       ("sync_crm", "completed", 50, "")).firing  # half, not over
    storm = line_of("JobwardenRetryStorm", ("sync_crm", "retry", 51, "AUTH_FAILED"),
                    ("sync_crm", "retry", 10, "TIMEOUT"), ("sync_crm", "completed", 39, ""),
                    ("mail", "retry", 30, "SMTP"))
    assert storm.firing
    assert storm.detail == ("sync_crm 51 of 100 retried with AUTH_FAILED, "
                            "mail 30 of 30 retried with SMTP")
    assert [dict(link.args) for link in storm.links] == [
        {"code": "AUTH_FAILED", "type": "sync_crm"}, {"code": "SMTP", "type": "mail"}]
