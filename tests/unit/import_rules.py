"""Reading a package's imports from its source (the AST, nothing imported), for the tests
of the import rules in docs/architecture.md §1: the runtime's layers
(test_package_boundaries.py) and the console's (test_console_boundaries.py)."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The import namespace the repository's top-level folders are installed under
#: (pyproject.toml's package-dir): worker/core/states.py is jobwarden.worker.core.states.
NAMESPACE = "jobwarden"


def dotted(package: str) -> str:
    """A top-level folder's import name: "worker" -> "jobwarden.worker"."""
    return f"{NAMESPACE}.{package}"


def module_name(path: Path) -> str:
    parts = [NAMESPACE, *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def known_modules(package: str) -> dict[str, Path]:
    """Every module of a top-level folder (worker, console), by its dotted import name."""
    return {module_name(p): p for p in sorted((ROOT / package).rglob("*.py"))
            if "__pycache__" not in p.parts}


def imports(source: str, known: set[str], package: str, *,
            type_checking: bool = False) -> list[tuple[int, str, bool]]:
    """(line, module of `package`, inside a function) for each import of one;
    `from jobwarden.console.web import auth` names the module jobwarden.console.web.auth when there is one.
    Imports under `if TYPE_CHECKING:` are annotations only and left out unless
    `type_checking`."""
    found = []
    prefix = dotted(package)

    def mine(module: str) -> bool:
        return module == prefix or module.startswith(prefix + ".")

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                found.extend((child.lineno, a.name, in_function) for a in child.names
                             if mine(a.name))
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module and (
                    mine(child.module)):
                subs = [f"{child.module}.{a.name}" for a in child.names]
                named = [s for s in subs if s in known]
                if len(named) < len(subs):
                    named.append(child.module)
                found.extend((child.lineno, name, in_function) for name in named)
            elif isinstance(child, ast.ImportFrom) and child.level > 0:
                found.append((child.lineno, "." * child.level + (child.module or ""),
                              in_function))
            elif (isinstance(child, ast.If) and _is_type_checking(child.test)
                  and not type_checking):
                continue
            visit(child, nested)

    visit(ast.parse(source), False)
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING"


def graph(package: str, *, type_checking: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports."""
    known = known_modules(package)
    return {name: {target for _line, target, _nested in imports(
                path.read_text(), set(known), package, type_checking=type_checking)
                   if target != name}
            for name, path in known.items()}


def relative_imports(package: str) -> list[str]:
    """Each `from .x import` in a package, as 'module:line': a relative import hides the
    module's layer from a reader (and from these scans)."""
    return [f"{name}:{line}" for name, path in known_modules(package).items()
            for line, target, _nested in imports(path.read_text(), set(), package,
                                                 type_checking=True)
            if target.startswith(".")]


def layer_of(module: str, layers: Mapping[str, int]) -> str:
    """The layer a module belongs to: the longest entry of `layers` it falls under."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in layers:
            return ".".join(parts[:n])
    raise AssertionError(f"{module} is in no layer of {sorted(layers)}")


def against_the_layers(edges: dict[str, set[str]], layers: Mapping[str, int]) -> list[str]:
    """Every import that runs against the layers, as 'importer -> imported'. `layers` ranks
    each layer, lowest first: a module imports its own layer or a lower-ranked one; two
    layers of the same rank never import each other."""
    wrong = []
    for importer, targets in sorted(edges.items()):
        here = layer_of(importer, layers)
        for target in sorted(targets):
            there = layer_of(target, layers)
            if here != there and layers[there] >= layers[here]:
                wrong.append(f"{importer} -> {target}")
    return wrong


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Each import circle once, as the modules along it (a depth-first search)."""
    found, done = [], set()
    finished: set[str] = set()

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

    for start in sorted(edges):
        walk(start, [])
    return found


def silent_function_imports(package: str) -> list[str]:
    """Imports inside a function with no comment on their line or the line before: one
    that only broke a circle has no reason left to be there; a comment names the optional
    dependency, the start-up cost or the side effect that keeps it there."""
    silent = []
    for path in sorted((ROOT / package).rglob("*.py")):
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
    return sorted(set(silent))
