"""The outcome and status tables of the docs are the code's: rendered from the transitions
table and the states enum (tests/docs_tables.py), and compared with the committed page.

After changing worker/core/transitions.py or worker/core/states.py:

    .venv/bin/python -m tests.docs_tables
"""

from __future__ import annotations

import re

import pytest

from jobwarden.worker.core.states import JobStatus
from jobwarden.worker.core.transitions import TRANSITIONS
from tests import docs_tables
from tests.unit.test_cli_reference import REFERENCE


@pytest.mark.parametrize("name,render", docs_tables.TABLES, ids=[n for n, _ in docs_tables.TABLES])
def test_the_pages_table_is_the_one_the_code_renders(name, render):
    page = docs_tables.OUTCOMES_PAGE.read_text()
    assert docs_tables.section(name, page) == docs_tables.rendered(name, render), (
        f"{docs_tables.OUTCOMES_PAGE.name}'s {name} table differs from the code: "
        "run python -m tests.docs_tables")


def test_every_outcome_and_status_has_its_row():
    page = docs_tables.OUTCOMES_PAGE.read_text()
    outcomes = docs_tables.section("outcomes", page)
    statuses = docs_tables.section("statuses", page)
    assert {o.value for o in TRANSITIONS} == set(re.findall(r"^\| `(\w+)` \|", outcomes, re.M))
    assert {s.value for s in JobStatus} == set(re.findall(r"^\| `(\w+)` \|", statuses, re.M))


def test_the_references_hand_written_status_table_names_every_status_once():
    """The reference's table says what each status means in words; its rows are the enum's."""
    text = REFERENCE.read_text()
    table = text[text.index("## Job statuses"):text.index("## Schedules")]
    listed = re.findall(r"^\| `(\w+)` \|", table, re.M)
    assert sorted(listed) == sorted(s.value for s in JobStatus)
