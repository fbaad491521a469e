"""The console's SQL goes through one module, console/data/database.py (its store): every
query in console/data/sql is used, call sites name queries by attribute (`CQ.console_jobs_page`,
never a string), and no other console module runs SQL."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from jobwarden.console.data import database
from jobwarden.console.data.database import CQ, Reader
from jobwarden.worker.store.queries import load_queries

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "console"
#: The console's store: the one module that runs SQL.
STORE = "console/data/database.py"
#: Modules that may hold SQL machinery without being the store, and why.
EXEMPT = {
    "console/data/schema.py": "SQLAlchemy table definitions: text() only for server defaults, "
                         "it runs nothing",
    "console/data/sample_data.py": "seeds rows for tests, screenshots and the benchmark; no page "
                              "or command of the console calls it",
}
#: Calls that run SQL on a connection, and names that build or open one.
RUNS_SQL = frozenset({"execute", "exec_driver_sql", "executemany", "executescript", "cursor"})
SQL_NAMES = {"sqlalchemy": {"text", "select", "insert", "update", "delete", "create_engine"},
             "psycopg": {"connect"}, "jobwarden.worker.store.db": {"connect"}, "jobwarden.worker.store.queries": {"Q", "execute"}}
#: The store's methods (and helper) that take a query as their first argument.
QUERY_TAKERS = frozenset({"all", "one", "run", "rows"})


def console_modules() -> list[Path]:
    return sorted(p for p in CONSOLE.rglob("*.py") if "__pycache__" not in p.parts)


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def sql_outside_the_store(source: str, where: str) -> list[str]:
    """Each place in `source` that runs SQL or reaches for SQL machinery, as 'where:line what'."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr in RUNS_SQL):
            found.append(f"{where}:{node.lineno} .{node.func.attr}()")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            banned = SQL_NAMES.get(node.module, set()) & {a.name for a in node.names}
            found += [f"{where}:{node.lineno} from {node.module} import {n}" for n in sorted(banned)]
        elif isinstance(node, ast.Import):
            found += [f"{where}:{node.lineno} import {a.name}" for a in node.names
                      if a.name in ("psycopg", "sqlalchemy")]
    return found


def string_query_names(source: str, where: str) -> list[str]:
    """Calls that pass a query by its name as a string: `reader.all("console_jobs_page")`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
            node.func, "id", None)
        args = node.args[1:] if name == "rows" else node.args  # rows(conn, query, params)
        if name in QUERY_TAKERS and args and isinstance(args[0], ast.Constant) and isinstance(
                args[0].value, str):
            found.append(f"{where}:{node.lineno} {name}({args[0].value!r})")
        if isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) > 1 \
                and isinstance(node.args[0], ast.Name) and node.args[0].id == "CQ":
            found.append(f"{where}:{node.lineno} getattr(CQ, …)")
    return found


def cq_names(source: str) -> set[str]:
    """Every `CQ.<name>` a module reads."""
    return {node.attr for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "CQ"}


def test_no_console_module_but_the_store_runs_sql():
    modules = console_modules()
    assert len(modules) > 20  # the scan really looked at the console
    found = [hit for path in modules if rel(path) not in (STORE, *EXEMPT)
             for hit in sql_outside_the_store(path.read_text(), rel(path))]
    assert found == []


def test_the_sql_scan_sees_each_way_of_running_sql():
    probe = ("from sqlalchemy import text\nfrom jobwarden.worker.store.db import connect\nimport psycopg\n"
             "conn.execute('SELECT 1')\nconn.exec_driver_sql(sql)\n"
             "from jobwarden.worker.store.queries import Q\n")
    assert len(sql_outside_the_store(probe, "probe")) == 6


def test_no_call_site_names_a_query_by_a_string():
    found = [hit for path in console_modules()
             for hit in string_query_names(path.read_text(), rel(path))]
    assert found == []


def test_the_string_scan_sees_each_way_of_naming_a_query():
    probe = ("reader.all('a')\nget_db().one('b', x=1)\nrows(conn, 'c', {})\n"
             "tx.run('d')\ngetattr(CQ, name)\nreader.all(CQ.ok)\n")
    assert len(string_query_names(probe, "probe")) == 5


def test_every_query_a_console_module_names_exists():
    named = {name: rel(path) for path in console_modules() for name in cq_names(path.read_text())}
    assert named, "no module reads CQ: the scan is looking in the wrong place"
    assert {name: where for name, where in named.items() if not hasattr(CQ, name)} == {}


def test_every_query_in_console_sql_is_used():
    own = load_queries(CONSOLE / "data" / "sql")
    used = {name for path in console_modules() for name in cq_names(path.read_text())}
    assert sorted(set(own) - used) == []


def test_a_query_named_wrongly_fails_before_any_sql_runs():
    with pytest.raises(AttributeError, match="console_no_such_query"):
        CQ.console_no_such_query  # noqa: B018


def test_the_store_refuses_a_query_given_as_a_string():
    # No connection is touched: the check comes first.
    with pytest.raises(TypeError, match="CQ"):
        Reader(None).all("console_jobs_page")
    with pytest.raises(TypeError, match="CQ"):
        Reader(None).one("console_jobs_page")


def test_each_query_carries_its_name_for_logs():
    assert CQ.console_jobs_page.name == "console_jobs_page"
    assert "background_jobs" in CQ.console_jobs_page.sql
    assert database.query_names()["console_jobs_page"] is CQ.console_jobs_page
