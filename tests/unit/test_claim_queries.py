"""claim_limited_jobs is claim_jobs plus what rate limits and caps add (a separate text so
the plain claim plans and runs exactly as before), and claim_fair_jobs repeats claim_jobs'
row filter, slots and write. Whatever changes in claim_jobs' walk, slots, UPDATE,
execution rows or answer must change in them too: this fails when they drift."""

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


def _block(lines: list[str], first: str, last: str) -> list[str]:
    """The lines from the one starting with `first` to the next starting with `last`."""
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith(last))
    return lines[start:end + 1]


def test_the_fair_claim_filters_slots_and_writes_as_the_plain_claim_does():
    # claim_fair_jobs repeats claim_jobs' row filter (in each key's pick), its slots and
    # its write; it adds each job's place in the walk (`n`) and its fair key to the answer.
    # (The filter, indented deeper there, may wrap its lines elsewhere.)
    plain = _code(Q.claim_jobs)
    fair = _code(Q.claim_fair_jobs)
    walk = ("AND (SELECT j.type = ANY(", "ELSE j.queue END AS queue) AS q)")
    assert " ".join(_block(fair, *walk)) == " ".join(_block(plain, *walk))
    assert _cte(fair, "free_slots") == _cte(plain, "free_slots")
    write = ("UPDATE background_jobs j", "RETURNING ")
    assert _block(fair, *write) == _block(plain, *write)
    keyed = [line.replace("l.concurrency_key, l.n,", "l.concurrency_key,")
             for line in _cte(fair, "keyed")]
    assert keyed == _cte(plain, "keyed")
