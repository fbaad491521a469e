"""Every Python sample in README.md and docs/ says how a test runs it.

A sample is a ```python block. The line before it (blank lines aside) may be a marker
comment, invisible on the rendered page:

- ``<!-- sample: given conn user_id job -->``: run it in a process of its own against a
  migrated database, after a prelude that defines the names listed (see GIVEN; a name of
  the public API, such as ``job``, is imported from ``jobwarden``). A sample with no marker
  is run the same way with nothing given.
- ``<!-- sample: excerpt examples/shop/shop/jobs.py -->``: lines cut from a file the suite
  runs; every line of the block (``...`` lines aside) appears in that file, in order.
- ``<!-- sample: file -->``: a file the page tells the reader to save, run whole by an
  integration test (tests/integration/test_docs_samples.py lists which).

Why an extractor of our own rather than pytest-examples or sybil: the three kinds above
are the whole grammar, and the "file" kind must be tied to the tests that already run
those files in a fresh install; the libraries model one runner per block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
MARKER = re.compile(r"<!-- sample: (given|excerpt|file)\b ?(.*?) -->\n(?:[ \t]*\n)*\Z")

#: What a "given" name stands for: the lines the prelude runs to define it. ``conn`` is a
#: connection to the test's database (committed when the sample ends, as a request's
#: transaction would be); the rest stand for an application's own objects.
GIVEN = {
    "conn": "import psycopg as _psycopg\nconn = _psycopg.connect(_os.environ['DATABASE_URL'])",
    "DATABASE_URL": "DATABASE_URL = _os.environ['DATABASE_URL']",
    "user_id": "user_id = 52",
    "app": "from flask import Flask as _Flask\napp = _Flask('app')\n"
           "app.config['SECRET_KEY'] = 'docs-sample'",
    "url": "url = _os.environ['DATABASE_URL']",
    "current_user": "from flask_login import current_user",
    # An application's own table for a sample's business write.
    "projects": "import psycopg as _psycopg\n"
                "with _psycopg.connect(_os.environ['DATABASE_URL']) as _c:\n"
                "    _c.execute('CREATE TABLE projects (id serial PRIMARY KEY, name text)')",
    # A SQLAlchemy async engine on the test's database, and an unsaved order of the app's.
    "AsyncSession": "from sqlalchemy.ext.asyncio import AsyncSession",
    "engine": "from sqlalchemy.ext.asyncio import create_async_engine as _engine\n"
              "from jobwarden.worker.store.db import sqlalchemy_url as _sa_url\n"
              "engine = _engine(_sa_url(_os.environ['DATABASE_URL']))",
    "order": "from sqlalchemy.orm import DeclarativeBase as _Base, Mapped, mapped_column\n"
             "class _Model(_Base): pass\n"
             "class Order(_Model):\n"
             "    __tablename__ = 'orders'\n"
             "    id: Mapped[int] = mapped_column(primary_key=True)\n"
             "import psycopg as _psycopg\n"
             "with _psycopg.connect(_os.environ['DATABASE_URL']) as _c:\n"
             "    _c.execute('CREATE TABLE orders (id serial PRIMARY KEY)')\n"
             "order = Order()",
}

#: The sample is compiled as printed; a top-level ``await`` or ``async with`` (allowed on
#: the pages, as in an async REPL) makes it a coroutine, which is run to its end.
RUN = """
import ast as _ast, asyncio as _asyncio
_code = compile(_SAMPLE, "<sample>", "exec", flags=_ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
_ran = eval(_code, globals())
if _ran is not None:
    _asyncio.run(_ran)
if 'conn' in globals() and not conn.closed:
    conn.commit()
    conn.close()
"""


@dataclass(frozen=True)
class Sample:
    page: str      # relative to the repository
    line: int      # the line of the opening fence
    kind: str      # "given", "excerpt" or "file"
    arg: str       # the names given, or the excerpt's source file
    code: str

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def samples() -> list[Sample]:
    found = []
    for page in pages():
        text = page.read_text()
        for block in BLOCK.finditer(text):
            before = text[:block.start()]
            marker = MARKER.search(before[-300:])
            kind, arg = marker.groups() if marker else ("given", "")
            found.append(Sample(str(page.relative_to(ROOT)), before.count("\n") + 1, kind,
                                arg.strip(), block.group(1)))
    return found


def script(sample: Sample) -> str:
    """The program a "given" sample runs as: prelude, the sample as printed, epilogue."""
    import jobwarden

    lines = ["import os as _os"]
    for name in sample.arg.split():
        if name in GIVEN:
            lines.append(GIVEN[name])
        elif name in jobwarden.__all__:
            lines.append(f"from jobwarden import {name}")
        else:
            raise ValueError(f"{sample.name}: no such given name {name!r}")
    return "\n".join(lines) + f"\n_SAMPLE = {sample.code!r}\n" + RUN


def excerpt_missing(sample: Sample) -> str | None:
    """The first line of an excerpt not found (in order) in its source, or None."""
    source = (ROOT / sample.arg).read_text().splitlines()
    at = 0
    for line in sample.code.splitlines():
        wanted = line.strip()
        if not wanted or wanted == "...":
            continue
        while at < len(source) and source[at].strip() != wanted:
            at += 1
        if at == len(source):
            return line
        at += 1
    return None
