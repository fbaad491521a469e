"""The runtime's import rules (docs/architecture.md §1): worker/ never imports the console
(an application can run jobs without it); its sub-packages are layers, each importing only
the layers below it; no import circles; an import inside a function says why."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.unit import import_rules
from tests.unit.import_rules import circles

ROOT = Path(__file__).resolve().parents[2]

#: The runtime's layers, lowest first: a module imports only modules of its own layer or
#: of a lower one. duties and ops share a rank and never import each other. The front
#: door (`jobwarden.worker`, the public API) sits above the engine; demo_jobs is an application of it.
LAYERS = {
    "jobwarden.worker.core": 0,
    "jobwarden.worker.store": 1,
    "jobwarden.worker.jobs": 2,
    "jobwarden.worker.engine": 3,
    "jobwarden.worker.duties": 4,
    "jobwarden.worker.ops": 4,
    "jobwarden.worker": 5,
    "jobwarden.worker.process": 5,
    "jobwarden.worker.demo_jobs": 6,
    "jobwarden.worker.cli": 6,
}


def layer_of(module: str) -> str:
    return import_rules.layer_of(module, LAYERS)


def against_the_layers(edges: dict[str, set[str]]) -> list[str]:
    return import_rules.against_the_layers(edges, LAYERS)


def console_imports(path: Path) -> list[str]:
    """Every import of the console (`jobwarden.console`, or a bare `console`) in one file,
    as 'file:line name'."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", ""))
              in ("import_module", "__import__") and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names = [node.args[0].value]
        found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                  if n.split(".")[0] == "console" or n == "jobwarden.console"
                  or n.startswith("jobwarden.console.")]
    return found


def test_no_module_under_worker_imports_the_console():
    modules = sorted((ROOT / "worker").rglob("*.py"))
    assert len(modules) > 10  # the scan really looked at the runtime
    assert [hit for path in modules for hit in console_imports(path)] == []


def test_the_scan_sees_every_form_of_import(tmp_path):
    sample = ROOT / "worker" / "_boundary_probe.py"
    try:
        sample.write_text("import jobwarden.console\nfrom jobwarden.console.auth import x\n"
                          "import importlib\nimportlib.import_module('jobwarden.console.views')\n"
                          "from console import y\n")
        assert len(console_imports(sample)) == 4
    finally:
        sample.unlink()


def test_importing_every_runtime_module_leaves_the_console_unloaded():
    names = sorted(name for name in import_rules.known_modules("worker")
                   if not name.endswith("__main__"))
    code = (f"import sys\nfor n in {names!r}: __import__(n)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'console'\n"
            "             or m == 'jobwarden.console' or m.startswith('jobwarden.console.')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def _console_loaded_after_parsing(argv: list[str]) -> bool:
    code = ("import sys\nfrom jobwarden.worker.cli import commands as cli\n"
            f"argv = {argv!r}\n"
            "cli.parser_for(argv).parse_args(argv)\n"
            "print('jobwarden.console' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip() == "True"


def test_a_worker_command_line_never_loads_the_console():
    assert not _console_loaded_after_parsing(["worker", "--app", "bench.noop_app"])
    assert not _console_loaded_after_parsing(["--log-level", "WARNING", "migrate"])


def test_the_console_commands_still_parse_through_the_same_entry_point():
    assert _console_loaded_after_parsing(["user", "add", "alice", "--role", "viewer"])


def test_every_runtime_module_is_in_a_layer():
    modules = import_rules.known_modules("worker")
    assert len(modules) > 30  # the scan really looked at the runtime
    for name in modules:
        layer_of(name)


def test_each_layer_imports_only_the_layers_below_it():
    """Annotations count too: a layer that names another's types depends on it."""
    assert against_the_layers(import_rules.graph("worker", type_checking=True)) == []


def test_the_layer_check_sees_an_import_that_runs_upwards():
    edges = {"jobwarden.worker.core.states": {"jobwarden.worker.engine.runner"},
             "jobwarden.worker.duties.recovery": {"jobwarden.worker.ops.operations"},
             "jobwarden.worker.engine.runner": {"jobwarden.worker.core.states", "jobwarden.worker.engine.context"}}
    assert against_the_layers(edges) == ["jobwarden.worker.core.states -> jobwarden.worker.engine.runner",
                                         "jobwarden.worker.duties.recovery -> jobwarden.worker.ops.operations"]


def test_the_runtime_imports_itself_by_absolute_name():
    """`from .x import` would hide a module's layer from a reader (and from this scan)."""
    assert import_rules.relative_imports("worker") == []


def test_there_is_no_import_circle_inside_the_runtime():
    assert circles(import_rules.graph("worker", type_checking=True)) == []


def test_a_runtime_import_inside_a_function_says_why():
    assert import_rules.silent_function_imports("worker") == []

