"""One import namespace, `jobwarden` (pyproject.toml's package-dir): nothing imports the
repository's folders by their bare names, `worker` and `console`.

With the repository on sys.path (pytest puts it there; so does `python` run from it),
`import worker` would still find the folder and load each runtime module a second time
under another name: a second registry, a second set of exception classes that `except`
tells apart from the first. So the scan below reads every Python file, Markdown page and
process file of the repository for a bare import or module path, and a real application
(the console serving a page, a worker running a job, in one process started from the
repository) ends with no top-level `worker` or `console` module loaded.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BARE = ("worker", "console")
PYTHON_FOLDERS = ("jobwarden", "worker", "console", "migrations", "tests", "bench",
                  "examples", "deploy", "docs")
TEXT_FILES = ("README.md", "Procfile", "Makefile", "alembic.ini", "pyproject.toml")


def _is_module(dotted: str) -> bool:
    """A dotted name that is a module or package of the repository's worker/ or console/
    (so "worker.log", a file name, is not one)."""
    parts = dotted.split(".")
    base = ROOT.joinpath(*parts)
    return parts[0] in BARE and (base.with_suffix(".py").is_file() or base.is_dir())


def bare_python_imports(path: Path) -> list[str]:
    """Each import of a bare `worker`/`console` module in one Python file, and each string
    naming one as a module path (`-m worker.cli`, `--app worker.demo_jobs`,
    `import_module("console.views")`, monkeypatch targets), as 'file:line name'. The
    runtime and the console never import the `jobwarden` façade either: it imports them."""
    found = []
    inside = path.relative_to(ROOT).parts[0] in BARE
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names
                     if a.name.split(".")[0] in BARE or (inside and a.name == "jobwarden")]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in BARE or (inside and node.module == "jobwarden"):
                names = [node.module]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [m for m in re.findall(r"(?<![\w.])((?:worker|console)(?:\.\w+)+)",
                                           node.value) if _is_module(m)]
            names += re.findall(r"(?<![\w.])((?:worker|console):\w+)\(", node.value)
        found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names]
    return found


def bare_text_references(path: Path) -> list[str]:
    """The same in a page or process file: an import line, `python -m`, `--app`, or a
    gunicorn `module:app`."""
    found = []
    pattern = re.compile(r"^\s*(?:from|import) ((?:worker|console)\b[\w.]*)"
                         r"|(?:-m|--app)\s+((?:worker|console)\.[\w.]+)"
                         r"|(?<![\w.])((?:worker|console):\w+)\(")
    for number, line in enumerate(path.read_text().splitlines(), 1):
        for match in pattern.finditer(line):
            found.append(f"{path.relative_to(ROOT)}:{number} {next(filter(None, match.groups()))}")
    return found


def repository_files() -> tuple[list[Path], list[Path]]:
    python = sorted(p for folder in PYTHON_FOLDERS for p in (ROOT / folder).rglob("*.py")
                    if "__pycache__" not in p.parts and p != Path(__file__)  # its probes
                    and p.resolve().is_relative_to(ROOT / folder))
    text = sorted([*(ROOT / "docs").rglob("*.md"), *(ROOT / "bench").rglob("*.md"),
                   *(ROOT / "examples").rglob("*.md"), *(ROOT / "deploy").rglob("*.md"),
                   *(ROOT / name for name in TEXT_FILES)])
    return python, text


def test_nothing_imports_the_bare_folder_names():
    python, text = repository_files()
    assert len(python) > 200 and len(text) > 10  # the scan really looked
    found = [hit for path in python for hit in bare_python_imports(path)]
    found += [hit for path in text for hit in bare_text_references(path)]
    assert found == []


def test_the_scans_see_every_form_of_a_bare_name(tmp_path):
    probe = ROOT / "tests" / "_namespace_probe.py"
    try:
        probe.write_text("import worker\nfrom console.web import auth\n"
                         "import jobwarden.worker.core\n"
                         "args = ['-m', 'worker.cli', '--app', 'worker.demo_jobs']\n"
                         "log = 'worker.log'\ntarget = 'console:create_app()'\n")
        assert sorted(hit.split(" ", 1)[1] for hit in bare_python_imports(probe)) == [
            "console.web", "console:create_app", "worker", "worker.cli", "worker.demo_jobs"]
    finally:
        probe.unlink()
    page = ROOT / "tests" / "_namespace_probe.md"
    try:
        page.write_text("```python\nfrom worker import job\n```\n"
                        "Run `jobwarden worker --app worker.demo_jobs` or "
                        "`python -m console.cli`; a worker.log, a worker process.\n"
                        "web: gunicorn 'console:create_app()'\n")
        assert [hit.split(" ", 1)[1] for hit in bare_text_references(page)] == [
            "worker", "worker.demo_jobs", "console.cli", "console:create_app"]
    finally:
        page.unlink()


APPLICATION = '''
import json, sys, threading, time

import psycopg

from jobwarden import Registry, enqueue, job
from jobwarden.console import create_app
from jobwarden.worker.process import WorkerProcess

url = sys.argv[1]
app = create_app({"TESTING": True, "SECRET_KEY": "namespace-test", "DATABASE_URL": url})
assert app.test_client().get("/login").status_code == 200

registry = Registry()
done = []

@job("namespace_probe", registry=registry)
def probe(ctx, payload):
    done.append(payload["n"])

with psycopg.connect(url) as conn:
    job_id = enqueue(conn, "namespace_probe", {"n": 7}, registry=registry)
worker = WorkerProcess(registry, url=url, concurrency=1, poll_interval=0.1, grace=5.0)
thread = threading.Thread(target=worker.run, daemon=True)
thread.start()
deadline = time.monotonic() + 60
while not done and time.monotonic() < deadline:
    time.sleep(0.05)
worker.request_stop()
thread.join(timeout=30)
print(json.dumps({
    "done": done,
    "bare": sorted(m for m in sys.modules if m.split(".")[0] in ("worker", "console")),
    "runtime": sorted(m for m in sys.modules if m.startswith("jobwarden.worker.")),
    "console": sorted(m for m in sys.modules if m.startswith("jobwarden.console.")),
}))
'''


def test_an_application_run_from_the_repository_loads_each_module_once(clean_db):
    """The repository's folder on sys.path first, as under pytest: the console serves a
    page and a worker runs a job, and no module was loaded under a bare name."""
    result = subprocess.run([sys.executable, "-c", APPLICATION, clean_db], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["done"] == [7]
    assert len(seen["runtime"]) > 20 and len(seen["console"]) > 20  # both really loaded
    assert seen["bare"] == []
    # and this test process, which has imported whatever the tests before it imported
    assert [m for m in sys.modules if m.split(".")[0] in BARE] == []


def test_the_facade_exports_the_runtimes_public_api_itself():
    """`from jobwarden import job` and `from jobwarden.worker import job` are one object:
    the façade re-exports, it never wraps (a second registry would split the job types)."""
    import jobwarden
    import jobwarden.worker

    assert jobwarden.__all__ == jobwarden.worker.__all__
    assert [n for n in jobwarden.__all__
            if getattr(jobwarden, n) is not getattr(jobwarden.worker, n)] == []
