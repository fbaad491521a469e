"""The operator actions' names have one list, jobwarden.worker.ops.operations': the console derives its
choices from it instead of repeating the names (a new action appears everywhere at once)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from jobwarden.console.data.schema import SELECTION_ACTIONS
from jobwarden.worker.ops import operations

ROOT = Path(__file__).resolve().parents[2]
NAMES = set(operations.AUDITED_ACTIONS)


def repeated_lists(source: str, where: str) -> list[str]:
    """Tuple, list and set literals naming two or more operator actions."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            named = [e.value for e in node.elts
                     if isinstance(e, ast.Constant) and e.value in NAMES]
            if len(named) >= 2:
                found.append(f"{where}:{node.lineno} {named}")
    return found


def test_no_console_module_repeats_the_list_of_action_names():
    found = [hit for path in sorted((ROOT / "console").rglob("*.py"))
             for hit in repeated_lists(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == []


def test_the_scan_sees_a_repeated_list():
    assert len(repeated_lists("A = ('retry', 'cancel', 'skip')\nif a in ['skip', 'retry']: 0",
                              "probe")) == 2


def test_no_template_writes_out_an_action_menu():
    options = re.compile(r'<option value="(\w+)"')
    found = {path.name: hits for path in sorted((ROOT / "templates").glob("*.html"))
             if (hits := [h for h in options.findall(path.read_text()) if h in NAMES])}
    assert found == {}


def test_a_selection_may_take_exactly_the_runtimes_selection_actions():
    assert tuple(SELECTION_ACTIONS) == tuple(operations.SELECTION_FROM)
