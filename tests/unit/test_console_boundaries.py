"""The console's import rules (docs/architecture.md, "Console layers"): its sub-packages
are layers, each importing only the layers below it; the settings layer imports nothing
of the console; only the package's front door imports `jobwarden.console.mount`; no import
circles, annotations included; no relative imports; an import inside a function says
why."""

from __future__ import annotations

import ast

from jobwarden.console.core.config import MountedConsole
from jobwarden.console.mount import Console
from tests.unit import import_rules
from tests.unit.import_rules import circles

#: The console's layers, lowest first: a module imports only modules of its own layer or
#: of a lower one. The front door (`jobwarden.console`: create_app, Console) sits above the mount,
#: and the commands above it (the server builds the standalone console through it).
LAYERS = {
    "jobwarden.console.core": 0,
    "jobwarden.console.data": 1,
    "jobwarden.console.web": 2,
    "jobwarden.console.views": 3,
    "jobwarden.console.mount": 4,
    "jobwarden.console": 5,
    "jobwarden.console.cli": 6,
}
#: The only modules that may import jobwarden.console.mount: the package's front door (Console,
#: create_app). Views and hooks read the mounted console through jobwarden.console.core.config.
MOUNT_IMPORTERS = {"jobwarden.console"}
#: What the data layer must not read: the request and its session (a command or a
#: benchmark uses the store and the models with no request at all).
REQUEST_NAMES = {"request", "session", "g"}


def graph() -> dict[str, set[str]]:
    """Annotations under TYPE_CHECKING count: a module that names another's types
    depends on it, and a circle through them is a circle all the same."""
    return import_rules.graph("console", type_checking=True)


def against_the_layers(edges: dict[str, set[str]]) -> list[str]:
    return import_rules.against_the_layers(edges, LAYERS)


def test_every_console_module_is_in_a_layer_of_its_own():
    """A new module or sub-package at the top of console/ would fall into the front
    door's layer unseen: it must be given a layer (LAYERS) or put in one."""
    modules = import_rules.known_modules("console")
    assert len(modules) > 30  # the scan really looked at the console
    top = {name for name in modules
           if import_rules.layer_of(name, LAYERS) == "jobwarden.console"}
    assert top == {"jobwarden.console"}


def test_each_layer_imports_only_the_layers_below_it():
    assert against_the_layers(graph()) == []


def test_the_layer_check_sees_an_import_that_runs_upwards():
    edges = {"jobwarden.console.core.config": {"jobwarden.console.mount"},
             "jobwarden.console.data.queries": {"jobwarden.console.web.formatting", "jobwarden.console.data.database"},
             "jobwarden.console.views.alerts": {"jobwarden.console.views.metrics", "jobwarden.console.web.formatting"},
             "jobwarden.console.cli.server": {"jobwarden.console"}}
    assert against_the_layers(edges) == ["jobwarden.console.core.config -> jobwarden.console.mount",
                                         "jobwarden.console.data.queries -> jobwarden.console.web.formatting"]


def test_the_settings_layer_imports_nothing_of_the_console():
    edges = graph()
    core = {name for name in edges if import_rules.layer_of(name, LAYERS) == "jobwarden.console.core"}
    assert len(core) >= 4
    assert {name: edges[name] for name in core if edges[name]} == {}


def test_the_mounted_console_is_read_through_the_settings_layer():
    """config.mounted() is typed by a Protocol declared beside it; a Console is one."""
    members = set(MountedConsole.__annotations__) | {
        name for name in vars(MountedConsole) if not name.startswith("_")}
    assert members == {"settings", "user_loader", "login_view", "own_login", "home_view",
                       "home_label", "logout_view", "url_prefix"}
    console = Console(None, user_loader=lambda: None, login_view="host.login",
                      database_url="postgresql://nowhere/none")
    assert [name for name in sorted(members) if not hasattr(console, name)] == []


def test_only_the_front_door_imports_the_mount():
    importers = {name for name, targets in graph().items() if "jobwarden.console.mount" in targets}
    assert importers - MOUNT_IMPORTERS == set()


def test_the_data_layer_never_reads_the_request():
    found = []
    for name, path in import_rules.known_modules("console").items():
        if import_rules.layer_of(name, LAYERS) != "jobwarden.console.data":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "flask":
                found += [f"{name}:{node.lineno} {a.name}" for a in node.names
                          if a.name in REQUEST_NAMES]
    assert found == []


def test_there_is_no_import_circle_inside_the_console():
    edges = graph()
    assert len(edges) > 30  # the scan really looked at the console
    assert circles(edges) == []


def test_the_circle_search_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    known = {"jobwarden.console.web.auth", "jobwarden.console.mount"}
    probe = "from jobwarden.console.web import auth\ndef f():\n    import jobwarden.console.mount\n"
    assert import_rules.imports(probe, known, "console") == [
        (1, "jobwarden.console.web.auth", False), (3, "jobwarden.console.mount", True)]


def test_an_annotation_only_import_counts_when_asked():
    probe = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
             "    from jobwarden.console.mount import Console\n")
    known = {"jobwarden.console.mount"}
    assert import_rules.imports(probe, known, "console") == []
    assert import_rules.imports(probe, known, "console", type_checking=True) == [
        (3, "jobwarden.console.mount", False)]


def test_the_console_imports_itself_by_absolute_name():
    assert import_rules.relative_imports("console") == []


def test_an_import_inside_a_function_says_why():
    """import_rules.silent_function_imports says what counts as saying why."""
    assert import_rules.silent_function_imports("console") == []
