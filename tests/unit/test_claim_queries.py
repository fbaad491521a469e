"""claim_limited_jobs is claim_jobs plus what rate limits and caps add (a separate text so
the plain claim plans and runs exactly as before). Whatever changes in claim_jobs' walk,
slots, UPDATE, execution rows or answer must change in both: this fails when they drift."""

from __future__ import annotations

import re

from jobwarden.worker.store.queries import Q


def _code(sql: str) -> list[str]:
    """The statement's lines without comments or blank lines."""
    lines = (re.sub(r"--.*$", "", line).rstrip() for line in sql.splitlines())
    return [line for line in lines if line.strip()]


def _cte(lines: list[str], name: str) -> list[str]:
    start = next(i for i, line in enumerate(lines)
                 if re.match(rf"^(WITH |\), ){name} AS \($", line))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("), "))
    return lines[start + 1:end]


def test_the_limited_claim_walks_as_the_plain_claim_does_and_then_filters_more():
    plain = _cte(_code(Q.claim_jobs), "locked")
    limited = iter(_cte(_code(Q.claim_limited_jobs), "locked"))
    # Every line of the plain walk, in order, is in the limited one (which adds lines).
    missing = [line for line in plain if not any(line == other for other in limited)]
    assert missing == []


def test_the_slots_the_update_the_executions_and_the_answer_are_the_same_text():
    plain = _code(Q.claim_jobs)
    limited = _code(Q.claim_limited_jobs)
    tail = plain[plain.index("), free_slots AS ("):]
    ltail = limited[limited.index("), free_slots AS ("):]
    spent = ltail.index("), spent AS (")
    answer = ltail.index(")", spent)  # the line that closes `spent`
    ltail = ltail[:spent] + ltail[answer:]
    # The limited claim takes its keyless and keyed jobs from `admitted`, not `locked`, and
    # dates its executions by the buckets' clock rather than the transaction's start (the
    # history row copies the job row's started_at when the execution ends).
    ltail = [line.replace("FROM admitted", "FROM locked")
             .replace("started_at = (SELECT t FROM clock),", "started_at = now(),")
             for line in ltail]
    assert ltail == tail
    keyed = _cte(plain, "keyed")
    lkeyed = [line.replace("FROM admitted", "FROM locked") for line in _cte(limited, "keyed")]
    assert lkeyed == keyed
