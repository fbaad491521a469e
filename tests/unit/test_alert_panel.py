"""The Alerts panel's xmin-horizon line, over rows shaped as metrics_xmin_horizon returns.

Its firing side needs a transaction open for over 5 minutes, which a test cannot wait
for; the integration tests read the same line from a real held snapshot."""

from __future__ import annotations

from console.views.alerts import evaluate
from console.views.metrics import Recent


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


def failed_rate_line(*executions):
    recent = Recent(executions=[dict(zip(("type", "outcome", "executions"), e, strict=True))
                                for e in executions],
                    runnable=[], stale=[], slas={}, tables=[], horizon=[])
    (line,) = [a for a in evaluate(recent, [], [], {}) if a.name == "JobwardenFailedRateHigh"]
    return line


def test_a_type_failing_under_the_minimum_is_named_as_not_judged_rather_than_fine():
    line = failed_rate_line(("send_email", "failed", 1), ("send_email", "completed", 1),
                            ("report", "completed", 30))
    assert not line.firing
    assert line.detail == ("no type with 20+ executions over 10% in the last 5 minutes; "
                           "under 20 executions, not judged: send_email 1 of 2 failed")


def test_a_type_over_the_rate_with_enough_executions_fires():
    line = failed_rate_line(("send_email", "failed", 5), ("send_email", "completed", 15))
    assert line.firing
    assert line.detail == "send_email 25% of 20"
