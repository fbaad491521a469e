"""The console's import rules (docs/architecture.md, "Console layers"): no import circles
inside console/, settings from a module that imports nothing of the console, only the
package's front door imports `console.mount`, and an import inside a function says why."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "console"
#: The only modules that may import console.mount: the package's front door (Console,
#: create_app). Views and hooks read the mounted console through console.config.
MOUNT_IMPORTERS = {"console"}
#: The bottom layer: settings and their accessors import nothing of the console.
IMPORTS_NO_CONSOLE = {"console.config", "console.account_policy", "console.live_workers",
                      "console.resources"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def known_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(CONSOLE.rglob("*.py"))
            if "__pycache__" not in p.parts}


def imports(source: str, known: set[str]) -> list[tuple[int, str, bool]]:
    """(line, console module, inside a function) for each import of a console module;
    `from console import auth` names the module console.auth when there is one."""
    found = []

    def visit(node, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                found.extend((child.lineno, a.name, in_function) for a in child.names
                             if a.name.split(".")[0] == "console")
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module and (
                    child.module.split(".")[0] == "console"):
                subs = [f"{child.module}.{a.name}" for a in child.names]
                named = [s for s in subs if s in known]
                if len(named) < len(subs):
                    named.append(child.module)
                found.extend((child.lineno, name, in_function) for name in named)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                continue  # annotations only: never imported at run time
            visit(child, nested)

    visit(ast.parse(source), False)
    return found


def _is_type_checking(test) -> bool:
    return getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING"


def graph() -> dict[str, set[str]]:
    known = known_modules()
    return {name: {target for _line, target, _nested in imports(path.read_text(), set(known))
                   if target != name}
            for name, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Each import circle once, as the modules along it (a depth-first search)."""
    found, done = [], set()

    def walk(node: str, path: list[str]) -> None:
        if node in path:
            cycle = path[path.index(node):]
            if frozenset(cycle) not in done:
                done.add(frozenset(cycle))
                found.append([*cycle, node])
            return
        if node in finished:
            return
        for target in sorted(edges.get(node, ())):
            walk(target, [*path, node])
        finished.add(node)

    finished: set[str] = set()
    for start in sorted(edges):
        walk(start, [])
    return found


def test_there_is_no_import_circle_inside_the_console():
    edges = graph()
    assert len(edges) > 20  # the scan really looked at the console
    assert circles(edges) == []


def test_the_circle_search_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    known = {"console.auth", "console.mount"}
    probe = "from console import auth\ndef f():\n    import console.mount\n"
    assert imports(probe, known) == [(1, "console.auth", False), (3, "console.mount", True)]


def test_only_the_front_door_imports_the_mount():
    importers = {name for name, targets in graph().items() if "console.mount" in targets}
    assert importers - MOUNT_IMPORTERS == set()


def test_the_settings_layer_imports_nothing_of_the_console():
    edges = graph()
    assert {name: edges[name] for name in IMPORTS_NO_CONSOLE if edges[name]} == {}


def test_an_import_inside_a_function_says_why():
    """One that only broke a circle has no reason left to be there; a comment names the
    optional dependency, the start-up cost or the side effect that keeps it there."""
    silent = []
    for path in sorted(CONSOLE.rglob("*.py")):
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    said = "#" in lines[inner.lineno - 1] or (
                        lines[inner.lineno - 2].strip().startswith("#"))
                    if not said:
                        silent.append(f"{path.relative_to(ROOT)}:{inner.lineno}")
    assert silent == []
