"""`--queues` / `WorkerProcess(queues=...)`: which lanes (queues + slots) a spec asks for."""

import pytest

from jobwarden.worker.engine.lanes import Lane, parse_queues


def test_no_queues_is_one_lane_for_every_queue_with_the_concurrency():
    for spec in (None, [], ()):
        assert parse_queues(spec, 10) == [Lane(None, 10, shared=True)]


def test_plain_names_share_the_concurrency_as_before():
    assert parse_queues(["a", "b"], 3) == [Lane(("a", "b"), 3, shared=True)]
    assert parse_queues("a, b", 3) == [Lane(("a", "b"), 3, shared=True)]


def test_capacity_entries_get_lanes_of_their_own_and_plain_names_share_the_rest():
    assert parse_queues("email=4,reports=1,default,billing", 10) == [
        Lane(("email",), 4), Lane(("reports",), 1), Lane(("default", "billing"), 10, shared=True)]


def test_the_string_list_and_dict_forms_agree():
    want = parse_queues("email=4,reports=1,a", 2)
    assert parse_queues(["email=4", "reports=1", "a"], 2) == want
    assert parse_queues({"email": 4, "reports": 1, "a": None}, 2) == want
    assert parse_queues({"email": "4", " reports ": 1, "a": None}, 2) == want


def test_capacity_only_has_no_shared_lane():
    assert parse_queues({"email": 4}, 10) == [Lane(("email",), 4)]


def test_star_is_every_queue_the_capacity_lanes_do_not_name():
    lanes = parse_queues("email=2,reports=1,*", 5)
    assert lanes[-1] == Lane(None, 5, shared=True, excluded=("email", "reports"))
    assert lanes[-1].as_row() == {"queues": ["*"], "slots": 5, "shared": True}
    assert parse_queues("*", 5) == [Lane(None, 5, shared=True)]


@pytest.mark.parametrize("spec, message", [
    ("", "no queue given"),
    ("  ", "no queue given"),
    ("email=4,,reports", "empty queue name"),
    ("email=4,", "empty queue name"),
    ("=3", "empty queue name"),
    ("email=0", "email: slots must be from 1 to 1000, not 0"),
    ("email=-1", "from 1 to 1000"),
    ("email=1001", "from 1 to 1000"),
    ("email=four", "email: slots must be a whole number, not 'four'"),
    ("email=", "whole number"),
    ("email=1.5", "whole number"),
    ("email=4,email=2", "queue 'email' is named twice"),
    ("a,b,a", "queue 'a' is named twice"),
    ("email=4,email", "named twice"),
    ("e mail=4", "invalid queue name"),
    ("email=4=5", "whole number"),
    ("*=3", "give it no '=N'"),
    ("*,default", "'*' already includes 'default'"),
    ({"email": True}, "from 1 to 1000"),
    ({"email": 2.0}, "from 1 to 1000"),
    ([3], "a name or 'name=N'"),
])
def test_bad_specs_say_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=message.replace("*", r"\*").replace("(", r"\(")):
        parse_queues(spec, 10)


def test_plain_names_check_the_concurrency_too():
    with pytest.raises(ValueError, match="--concurrency"):
        parse_queues("a", 0)
    assert parse_queues("email=1", 0) == [Lane(("email",), 1)]  # unused when no plain name


def test_a_notification_wakes_only_the_lanes_serving_its_queue():
    email, shared = parse_queues("email=2,*", 3)
    assert email.serves("email") and not email.serves("reports")
    assert shared.serves("reports") and not shared.serves("email")
    assert parse_queues(None, 3)[0].serves("anything")
