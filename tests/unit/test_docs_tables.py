"""The outcome and status tables of the docs are the code's: rendered from the transitions
table and the states enum (tests/docs_tables.py), and compared with the committed page;
so is the metrics table, rendered from the console's Prometheus collector.

After changing worker/core/transitions.py, worker/core/states.py or
console/views/metrics.py:

    .venv/bin/python -m tests.docs_tables
"""

from __future__ import annotations

import re

import pytest

from jobwarden.worker.core.states import JobStatus
from jobwarden.worker.core.transitions import TRANSITIONS
from tests import docs_tables
from tests.unit.test_cli_reference import REFERENCE


@pytest.mark.parametrize("page,name,render", docs_tables.TABLES,
                         ids=[name for _, name, _ in docs_tables.TABLES])
def test_the_pages_table_is_the_one_the_code_renders(page, name, render):
    assert docs_tables.section(name, page.read_text()) == docs_tables.rendered(name, render), (
        f"{page.name}'s {name} section differs from the code: run python -m tests.docs_tables")


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


def test_the_metrics_table_lists_every_family_the_console_exposes():
    """Each family the collector yields has its row (with a counter's _total suffix)."""
    table = docs_tables.section("metrics", docs_tables.OPERATIONS_PAGE.read_text())
    listed = re.findall(r"^\| `(jobwarden_\w+)` \|", table, re.M)
    assert len(listed) == len(set(listed)) >= 20
    assert {"jobwarden_jobs", "jobwarden_recovered_total", "jobwarden_workers"} <= set(listed)


def test_the_api_page_renders_every_name_of_the_public_api():
    """docs/reference/api.md is mkdocstrings directives: one per public name, so a name
    added to jobwarden.__all__ (or the console's) without its entry fails here."""
    import jobwarden
    import jobwarden.console

    page = (docs_tables.ROOT / "docs" / "reference" / "api.md").read_text()
    rendered = set(re.findall(r"^::: (jobwarden(?:\.console)?\.\w+)$", page, re.M))
    public = {f"jobwarden.{name}" for name in jobwarden.__all__}
    public |= {f"jobwarden.console.{name}" for name in jobwarden.console.__all__}
    assert public - rendered == set(), "public names missing from the API page"
    assert rendered - public == set(), "API page entries that are not public"
