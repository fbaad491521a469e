"""The runtime (worker/) never imports the console: an application can run jobs without it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def console_imports(path: Path) -> list[str]:
    """Every import of `console` in one file, as 'file:line name'."""
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
                  if n == "console" or n.startswith("console.")]
    return found


def test_no_module_under_worker_imports_the_console():
    modules = sorted((ROOT / "worker").rglob("*.py"))
    assert len(modules) > 10  # the scan really looked at the runtime
    assert [hit for path in modules for hit in console_imports(path)] == []


def test_the_scan_sees_every_form_of_import(tmp_path):
    sample = ROOT / "worker" / "_boundary_probe.py"
    try:
        sample.write_text("import console\nfrom console.auth import x\n"
                          "import importlib\nimportlib.import_module('console.views')\n")
        assert len(console_imports(sample)) == 3
    finally:
        sample.unlink()


def test_importing_every_runtime_module_leaves_the_console_unloaded():
    names = sorted("worker." + p.stem for p in (ROOT / "worker").glob("*.py")
                   if p.stem not in ("__init__", "__main__"))
    code = (f"import sys\nfor n in {names!r}: __import__(n)\n"
            "print(sorted(m for m in sys.modules if m == 'console' or m.startswith('console.')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def _console_loaded_after_parsing(argv: list[str]) -> bool:
    code = ("import sys\nfrom worker import cli\n"
            f"argv = {argv!r}\n"
            "cli.build_parser(contributed=not cli._runtime_command(argv)).parse_args(argv)\n"
            "print('console' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip() == "True"


def test_a_worker_command_line_never_loads_the_console():
    assert not _console_loaded_after_parsing(["worker", "--app", "bench.noop_app"])
    assert not _console_loaded_after_parsing(["--log-level", "WARNING", "migrate"])


def test_the_console_commands_still_parse_through_the_same_entry_point():
    assert _console_loaded_after_parsing(["user", "add", "alice", "--role", "viewer"])
