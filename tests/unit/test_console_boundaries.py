"""The console's import rules (docs/architecture.md, "Console layers"): no import circles
inside console/, settings from a module that imports nothing of the console, only the
package's front door imports `console.mount`, and an import inside a function says why."""

from __future__ import annotations

from tests.unit import import_rules
from tests.unit.import_rules import circles

#: The only modules that may import console.mount: the package's front door (Console,
#: create_app). Views and hooks read the mounted console through console.core.config.
MOUNT_IMPORTERS = {"console"}
#: The bottom layer: settings and their accessors import nothing of the console.
IMPORTS_NO_CONSOLE = {"console.core.config", "console.core.account_policy", "console.core.live_workers",
                      "console.core.resources"}


def graph() -> dict[str, set[str]]:
    """Annotations under TYPE_CHECKING count: a module that names another's types
    depends on it, and a circle through them is a circle all the same."""
    return import_rules.graph("console", type_checking=True)


def test_there_is_no_import_circle_inside_the_console():
    edges = graph()
    assert len(edges) > 20  # the scan really looked at the console
    assert circles(edges) == []


def test_the_circle_search_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    known = {"console.web.auth", "console.mount"}
    probe = "from console.web import auth\ndef f():\n    import console.mount\n"
    assert import_rules.imports(probe, known, "console") == [
        (1, "console.web.auth", False), (3, "console.mount", True)]


def test_only_the_front_door_imports_the_mount():
    importers = {name for name, targets in graph().items() if "console.mount" in targets}
    assert importers - MOUNT_IMPORTERS == set()


def test_the_settings_layer_imports_nothing_of_the_console():
    edges = graph()
    assert {name: edges[name] for name in IMPORTS_NO_CONSOLE if edges[name]} == {}


def test_an_import_inside_a_function_says_why():
    """import_rules.silent_function_imports says what counts as saying why."""
    assert import_rules.silent_function_imports("console") == []
