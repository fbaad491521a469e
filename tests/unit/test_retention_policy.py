"""JOBWARDEN_RETENTION's history age: never shorter than the longest age a job is kept
(a job still kept keeps all its attempts), judged whatever order the parts come in."""

from __future__ import annotations

import pytest

from jobwarden.worker.duties.retention import DAY, RetentionPolicy


@pytest.mark.parametrize(("text", "history"), [
    ("executions=90d", 90 * DAY),  # failed jobs' default age, to the second
    ("failed=30d,executions=30d", 30 * DAY),  # then skipped and cancelled's 30 days
    ("executions=30d,failed=30d", 30 * DAY),
    ("completed=120d,executions=120d", 120 * DAY),
    ("failed=180d", 180 * DAY),  # unset: the longest age
])
def test_a_history_at_least_as_long_as_every_job_age_is_accepted(text, history):
    assert RetentionPolicy.parse(text).history_age == history


@pytest.mark.parametrize(("text", "says"), [
    ("executions=89d", "executions=89d is shorter than failed=90d"),
    ("executions=7775999s", "executions=7775999s is shorter than failed=90d"),
    ("executions=30d", "executions=30d is shorter than failed=90d"),
    ("executions=29d,failed=30d", "executions=29d is shorter than skipped=30d"),
    ("completed=120d,executions=100d", "executions=100d is shorter than completed=120d"),
])
def test_a_history_shorter_than_a_job_age_is_refused_in_one_line(text, says):
    with pytest.raises(ValueError, match="^retention: " + says) as refused:
        RetentionPolicy.parse(text)
    assert "\n" not in str(refused.value)


def test_a_status_given_twice_is_refused_not_the_last_one_taken():
    with pytest.raises(ValueError, match=r"^retention: completed is given twice "
                                         r"\(completed=1d and completed=200d\)$"):
        RetentionPolicy.parse("completed=1d,failed=9d,completed=200d")
    assert RetentionPolicy.parse("completed=1d,failed=9d").ages["completed"] == 86_400
