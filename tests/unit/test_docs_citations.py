"""The code's design citations point at a document in this repository, at sections it has."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITATION = re.compile(r"docs/architecture\.md §(\d+)")
SOURCES = ("worker", "console", "templates", "migrations", "tests")


def source_files():
    for folder in SOURCES:
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".sql", ".html") and path.is_file():
                yield path


def test_every_citation_names_a_section_of_the_architecture_doc():
    sections = set(re.findall(r"^## (\d+)\. ", (ROOT / "docs/architecture.md").read_text(),
                              re.MULTILINE))
    cited = {(str(p.relative_to(ROOT)), n) for p in source_files()
             for n in CITATION.findall(p.read_text())}
    assert len(cited) >= 5  # the scan found the citations
    assert [c for c in cited if c[1] not in sections] == []


def test_nothing_cites_a_design_document_outside_the_repository():
    outside = [str(p.relative_to(ROOT)) for p in source_files()
               if p.name != "test_docs_citations.py" and "DESIGN §" in p.read_text()]
    assert outside == []


def test_the_architecture_doc_names_every_file_of_the_databases_code():
    # The page lists worker/store/sql/schema/'s concern files by name: one added without
    # a line there is code a reader of the page does not know exists.
    page = (ROOT / "docs/architecture.md").read_text()
    files = sorted(p.name for p in (ROOT / "worker/store/sql/schema").glob("*.sql"))
    assert len(files) >= 9  # the glob found them
    assert [f for f in files if f"`{f}`" not in page] == []
