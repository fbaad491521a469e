"""Every Python sample in README.md and docs/ runs in this suite (tests/docs_samples.py says
how each kind is run)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import psycopg
import pytest

from tests.docs_samples import ROOT, excerpt_missing, samples, script
from tests.integration.test_installed_wheel import flask_guide_files, guide_files, readme_app_module
from tests.integration.test_readme_example import readme_example

ALL = samples()


def by_kind(kind):
    return [pytest.param(s, id=s.name) for s in ALL if s.kind == kind]


def files_run_by_integration_tests() -> set[str]:
    """The files the wheel and README tests save and run whole, as their pages print them."""
    return {readme_example(), readme_app_module(), *guide_files().values(),
            *flask_guide_files().values()}


def test_the_docs_hold_samples_of_every_kind():
    # The extractor finds what the pages hold: a page's samples cannot vanish from the
    # suite by a change of fence or marker that the patterns stop matching.
    kinds = {s.kind for s in ALL}
    assert kinds == {"given", "excerpt", "file"}, kinds
    assert len(ALL) >= 25, [s.name for s in ALL]


def test_every_file_sample_is_one_an_integration_test_runs_whole():
    run_whole = files_run_by_integration_tests()
    for sample in ALL:
        if sample.kind == "file":
            assert sample.code in run_whole, (
                f"{sample.name} is marked `file` but no integration test saves and runs it")
    # ...and every file those tests run is still on a page as a `file` sample.
    marked = {s.code for s in ALL if s.kind == "file"}
    assert run_whole <= marked, "a file the integration tests run lost its `file` marker"


@pytest.mark.parametrize("sample", by_kind("excerpt"))
def test_an_excerpt_is_cut_from_a_file_the_suite_runs(sample):
    source = ROOT / sample.arg
    assert source.is_file(), f"{sample.name}: no file {sample.arg}"
    missing = excerpt_missing(sample)
    assert missing is None, f"{sample.name}: not in {sample.arg}, in order: {missing!r}"


@pytest.mark.parametrize("sample", by_kind("given"))
def test_a_sample_runs_as_printed(sample, clean_db, tmp_path):
    # A process of its own: samples register job types of the same names as one another.
    env = {**os.environ, "DATABASE_URL": clean_db, "JOBWARDEN_HOME": str(tmp_path)}
    ran = subprocess.run([sys.executable, "-c", script(sample)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, f"{sample.name}:\n{ran.stderr[-3000:]}"
    if re.search(r"\benqueue(_many)?(_async)?\(", sample.code):
        # A sample that enqueues leaves its job behind: the transaction it ran in committed.
        # Its payload holds what the page says, not a null where a value was not yet known.
        with psycopg.connect(clean_db) as conn:
            payloads = [p for (p,) in conn.execute("SELECT payload FROM background_jobs")]
        assert payloads, f"{sample.name} enqueued nothing that committed"
        assert all(None not in p.values() for p in payloads), payloads
