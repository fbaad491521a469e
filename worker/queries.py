"""Named SQL queries, loaded from worker/sql/*.sql — the one place SQL lives.

Each query in a .sql file starts with a header line `-- name: query_name` followed by a
one-line comment saying what it does. Parameters use psycopg's `%(name)s` style, which
both psycopg and SQLAlchemy's `exec_driver_sql` accept.
"""

from __future__ import annotations

import re
from pathlib import Path

_HEADER = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def _load(folder: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    for path in sorted(folder.glob("*.sql")):
        text = path.read_text()
        parts = _HEADER.split(text)
        # parts = [preamble, name1, body1, name2, body2, ...]
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in queries:
                raise RuntimeError(f"query {name!r} defined twice (second in {path.name})")
            queries[name] = body.strip()
    return queries


class _Queries(dict):
    def __getattr__(self, name: str) -> str:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no SQL query named {name!r} in worker/sql") from None


#: All named queries: `Q.claim_jobs` or `Q["claim_jobs"]`.
Q = _Queries(_load(Path(__file__).parent / "sql"))
