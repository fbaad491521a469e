"""When the console's pages may read the standby (console/data/replica.py `judge`), from
the two readings: each reason on both sides of its boundary."""

from __future__ import annotations

import pytest

from jobwarden.console.data.replica import Why, judge, mismatch, refusal

PRIMARY = {"system_id": "7001", "dbname": "jobs"}
GOOD = {"system_id": "7001", "dbname": "jobs", "standby": True, "lag_s": 2.0,
        "behind_bytes": 120, "shows_written": True}


def test_a_standby_of_this_database_within_the_lag_and_past_the_users_action_is_read():
    assert judge(PRIMARY, GOOD, max_lag_s=2.0) is None  # the bound itself is allowed


@pytest.mark.parametrize(("change", "why"), [
    ({"system_id": "7002"}, Why.OTHER_CLUSTER),
    ({"dbname": "jobs_staging"}, Why.OTHER_DATABASE),
    ({"standby": False, "lag_s": None, "behind_bytes": None}, Why.NOT_STANDBY),
])
def test_a_server_that_is_not_a_standby_of_this_database_is_never_read(change, why):
    verdict = judge(PRIMARY, {**GOOD, **change}, max_lag_s=30.0)
    assert isinstance(verdict, tuple) and verdict[0] is why
    assert mismatch(PRIMARY, {**GOOD, **change}) == verdict


@pytest.mark.parametrize(("change", "max_lag_s", "why"), [
    ({"lag_s": None}, 30.0, Why.LAG_UNKNOWN),
    ({"lag_s": 2.001}, 2.0, Why.TOO_FAR_BEHIND),
    ({"lag_s": 3 * 3600.0}, 30.0, Why.TOO_FAR_BEHIND),
    ({"shows_written": False}, 30.0, Why.BEFORE_YOUR_ACTION),
])
def test_a_standby_behind_is_read_only_within_the_lag_and_past_the_users_action(
        change, max_lag_s, why):
    assert judge(PRIMARY, {**GOOD, **change}, max_lag_s=max_lag_s) is why


def test_the_refusal_is_one_line_naming_the_setting_and_both_sides():
    line = refusal("replica:5432/jobs", "db:5432/jobs", Why.OTHER_DATABASE,
                   "jobs_staging", "jobs")
    assert line == ("JOBWARDEN_CONSOLE_READ_URL (replica:5432/jobs) is not a standby of "
                    "DATABASE_URL's database (db:5432/jobs): database 'jobs_staging' where "
                    "the primary's is 'jobs'")
