"""The runtime's store (worker/store/jobstore.py, docs/architecture.md §1): no module of
worker/ but the JobStore runs a statement, every `Q.<name>` names a query of
worker/store/sql, every query there is named somewhere, and the store refuses SQL that
is not one of them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import Q, Query

ROOT = Path(__file__).resolve().parents[2]
STORE = ROOT / "worker" / "store" / "jobstore.py"
#: The tables' metadata: its text() calls are column defaults and index predicates that
#: the migration test compares, never statements run.
METADATA = ROOT / "worker" / "store" / "schema.py"
#: Calls that run SQL (or open a cursor that would) on a psycopg or SQLAlchemy object.
RUNS_SQL = {"execute", "executemany", "exec_driver_sql", "exec_prepared", "cursor", "copy",
            "stream"}


def statements_run(source: str) -> list[tuple[int, str]]:
    """(line, call) for every call in `source` that runs SQL, or builds it with
    SQLAlchemy's text() or psycopg's sql module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", None))
            if isinstance(node.func, ast.Attribute) and name in RUNS_SQL:
                found.append((node.lineno, name))
            elif name == "text" and isinstance(node.func, ast.Name):
                found.append((node.lineno, name))
        elif isinstance(node, ast.ImportFrom) and node.module in ("psycopg", "psycopg.sql") \
                and any(a.name in ("sql", "SQL") for a in node.names):
            found.append((node.lineno, "psycopg.sql"))
    return found


def runtime_modules() -> list[Path]:
    return sorted(p for p in (ROOT / "worker").rglob("*.py") if "__pycache__" not in p.parts)


def test_only_the_store_runs_sql():
    modules = runtime_modules()
    assert len(modules) > 30  # the scan really looked at the runtime
    elsewhere = [f"{p.relative_to(ROOT)}:{line} .{call}(" for p in modules if p not in (STORE, METADATA)
                 for line, call in statements_run(p.read_text())]
    assert elsewhere == []


def test_the_scan_sees_every_way_of_running_sql():
    probe = ("from psycopg import sql\n"
             "conn.execute('SELECT 1')\ncur = conn.cursor()\ncur.executemany(q, rows)\n"
             "session.connection().exec_driver_sql(q)\nengine.connect().execute(text(q))\n"
             "with cur.copy(q) as c: pass\n")
    assert [call for _line, call in statements_run(probe)] == [
        "psycopg.sql", "execute", "cursor", "executemany", "exec_driver_sql", "execute",
        "text", "copy"]
    assert statements_run(STORE.read_text())  # and it does see the store's own


def named_queries(text: str) -> set[str]:
    return set(re.findall(r"\bC?Q\.([a-z_][a-z0-9_]*)\b", text))


def test_every_query_named_in_the_code_exists():
    used = {name for p in runtime_modules() for name in named_queries(p.read_text())}
    assert len(used) > 30
    assert used - set(Q) == set()


def test_every_runtime_query_is_used():
    """By the runtime itself, or by the console (which runs the operator actions' reads
    through its own store, as CQ.<name>)."""
    places = runtime_modules() + sorted((ROOT / "console").rglob("*.py"))
    used = {name for p in places for name in named_queries(p.read_text())}
    assert set(Q) - used == set()


def test_every_query_carries_its_name():
    assert all(isinstance(q, Query) and q.name == name for name, q in Q.items())


@pytest.mark.parametrize("sql", ["SELECT 1", "LISTEN jobwarden_jobs", str(Q.db_now)])
def test_the_store_refuses_sql_that_is_no_named_query(sql):
    with pytest.raises(TypeError, match="named queries"):
        JobStore(object()).rows(sql)  # type: ignore[arg-type]


def test_a_keyless_enqueue_runs_without_conflict_arbitration():
    # The keyless form is the keyed statement with only its ON CONFLICT clause cut.
    keyed, keyless = Q.enqueue_jobs, Q.enqueue_jobs_keyless
    assert "\nON CONFLICT (" in keyed and "\nON CONFLICT" not in keyless
    assert keyless.rstrip().endswith("RETURNING id, idempotency_key")
    assert keyed.startswith(keyless.split("ORDER BY r.ord")[0] + "ORDER BY r.ord\nON CONFLICT")


def test_a_statement_without_the_clause_is_refused():
    from jobwarden.worker.store.queries import without_conflict_clause
    with pytest.raises(RuntimeError):
        without_conflict_clause("x", "INSERT INTO t SELECT 1 RETURNING id")
