"""The worker's tuning options: in-range values parse as given, the rest are refused."""

from __future__ import annotations

import argparse

import pytest

from jobwarden.worker.cli import args as A
from jobwarden.worker.cli.commands import build_parser


def test_in_range_worker_options_parse_to_their_values():
    args = build_parser(contributed=False).parse_args([
        "worker", "--app", "x", "--grace", "0", "--timeout-grace", "2.5",
        "--poll-interval", "0.05", "--claim-batch", "1", "--buffer", "0",
        "--flush-batch", "10000", "--flush-interval", "0", "--max-abandoned", "0"])
    assert (args.grace, args.timeout_grace, args.poll_interval, args.claim_batch, args.buffer,
            args.flush_batch, args.flush_interval, args.max_abandoned) == (
        0.0, 2.5, 0.05, 1, 0, 10_000, 0.0, 0)


@pytest.mark.parametrize("parse, text, message", [
    (A.wait_seconds, "-1", "'-1' is negative: a duration is 0 or more"),
    (A.wait_seconds, "nan", "'nan' is not a duration: use e.g. 30, 30s, 5m, 2h or 7d"),
    (A.wait_seconds, "2d", "'2d' is longer than 1d"),
    (A.poll_seconds, "0", "'0' must be more than 0"),
    (A.poll_seconds, "2h", "'2h' is longer than 1h"),
    (A.flush_ms, "ten", "'ten' is not a number"),
    (A.batch, "0", "'0' is not between 1 and 10000"),
])
def test_out_of_range_values_say_what_is_accepted(parse, text, message):
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        parse(text)
    assert str(refused.value) == message


def test_a_prune_age_takes_a_unit_and_refuses_a_bare_number():
    assert (A.prune_age("3d"), A.prune_age("12h"), A.prune_age("90s")) == (259_200, 43_200, 90)
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        A.prune_age("3")
    assert str(refused.value) == "'3' needs a unit: e.g. 7d, 12h, 30m or 90s"
