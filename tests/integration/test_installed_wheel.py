"""The built distribution works outside the repository, as the guide's *Installing* page
(docs/guide/installing.md) tells a newcomer.

`python -m build` makes an sdist and, from it, a wheel; the wheel goes into a throwaway
virtualenv in a temporary folder (one per test session, pip's cache reused), and the
installed `jobwarden` runs there against a fresh PostgreSQL database: migrate, a job
enqueued inside the application's own transaction (the Installing page's `shop_jobs.py`), a
worker that completes it, and the console serving its login page, a static file and a
signed-in page. The guide's getting-started and Flask pages run there too, with their own
files: the Flask page's app signs a user in, commits an order with its job, a worker runs
the job and the console mounted in that app shows it.

The wheel is one top-level package, `jobwarden`, holding every module and data file of
the repository's worker/, console/, templates/, static/ and migrations/ folders; the
application folder has its own `worker.py` (its job types, the name Procfiles use) and
its own `console/` package, and both kinds of module run there side by side.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

import psycopg
import pytest

from tests.helpers import first_line, start_process, stop_process, wait_for

ROOT = Path(__file__).resolve().parents[2]
INSTALLING = ROOT / "docs" / "guide" / "installing.md"
#: How a page introduces a file to save (tests/docs_samples.py: the `file` marker).
SAVED = r":\n\n<!-- sample: file -->\n```python\n(.*?)```"



def readme_app_module() -> str:
    """The application module the Installing page tells a newcomer to write."""
    match = re.search(r"Save this as `shop_jobs\.py`" + SAVED,
                      INSTALLING.read_text(), re.DOTALL)
    assert match, f"{INSTALLING.relative_to(ROOT)} lost its shop_jobs.py example"
    return match.group(1)


#: The application's own `worker.py`, beside Jobwarden's runtime: its job types (the module
#: a Procfile's `worker: jobwarden worker --app worker` line names) and, run as a script,
#: an enqueue.
APP_WORKER = '''"""The application's own worker module: its job types."""
import sys

import psycopg

from jobwarden import enqueue, job
from jobwarden.worker.store.db import database_url

OWNER = "the app's own worker.py"


@job("tidy_basket")
def tidy_basket(ctx, payload):
    print(f"basket {payload['basket']} tidied by {OWNER}", flush=True)


if __name__ == "__main__":
    with psycopg.connect(database_url()) as conn:
        print(enqueue(conn, "tidy_basket", {"basket": int(sys.argv[1])}))
'''

#: The application's own `console` package (its admin shell, say), beside Jobwarden's.
APP_CONSOLE = '''"""The application's own console package, not Jobwarden's."""
OWNER = "the app's own console package"


def create_app():
    return OWNER
'''

#: Both applications' modules in one process: the app's `worker` and `console`, and
#: Jobwarden's console serving its login page.
SIDE_BY_SIDE = '''
import json, os, sys
import console, worker
import jobwarden, jobwarden.worker
from jobwarden.console import create_app

app = create_app({"TESTING": True, "SECRET_KEY": "side-by-side",
                  "DATABASE_URL": os.environ["DATABASE_URL"]})
page = app.test_client().get("/login")
print(json.dumps({
    "worker": [worker.__file__, worker.OWNER], "console": [console.__file__, console.create_app()],
    "jobwarden": [jobwarden.__file__, jobwarden.worker.__file__, jobwarden.enqueue.__module__],
    "login": [page.status_code, "csrf_token" in page.get_data(as_text=True)],
    "loaded": sorted({m.split(".")[0] for m in sys.modules} & {"worker", "console", "jobwarden"}),
}))
'''


def built_without_warnings() -> dict:
    """The environment `python -m build` runs in: without PYTHONDONTWRITEBYTECODE, under
    which setuptools warns that it skips byte-compiling (a warning about this machine,
    not the package)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    """A virtualenv outside the checkout with the freshly built wheel installed, and an
    application folder with its own `worker.py` and `console/` package."""
    base = tmp_path_factory.mktemp("installed")
    dist = base / "dist"
    build = subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(ROOT)],
                           capture_output=True, text=True, timeout=600,
                           env=built_without_warnings())
    assert build.returncode == 0, build.stderr[-3000:]
    assert "warning" not in (build.stdout + build.stderr).lower(), build.stdout + build.stderr
    wheels = list(dist.glob("jobwarden-*.whl"))
    assert len(wheels) == 1 and list(dist.glob("jobwarden-*.tar.gz")), list(dist.iterdir())
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                          str(wheels[0])], capture_output=True, text=True, timeout=600)
    assert pip.returncode == 0, pip.stderr[-3000:]
    app_dir = base / "app"
    app_dir.mkdir()
    (app_dir / "shop_jobs.py").write_text(readme_app_module())
    (app_dir / "worker.py").write_text(APP_WORKER)
    (app_dir / "console").mkdir()
    (app_dir / "console" / "__init__.py").write_text(APP_CONSOLE)
    return venv, app_dir


def run(venv: Path, app_dir: Path, env: dict, *args: str, input: str | None = None):
    return subprocess.run([str(venv / "bin" / args[0]), *args[1:]], cwd=app_dir, env=env,
                          capture_output=True, text=True, input=input, timeout=120)


def test_the_installed_wheel_migrates_runs_a_job_and_serves_the_console(installed,
                                                                        empty_database):
    venv, app_dir, fresh_database = *installed, empty_database
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JOBWARDEN_APP")}
    env.update(DATABASE_URL=fresh_database, JOBWARDEN_HOME=str(app_dir / ".jobwarden"),
               PATH=f"{venv / 'bin'}:{env.get('PATH', '')}")

    where = run(venv, app_dir, env, "python", "-c",
                "import jobwarden.worker, jobwarden.console; "
                "print(jobwarden.worker.__file__); print(jobwarden.console.__file__)")
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(venv)) for line in where.stdout.split()), where.stdout

    migrated = run(venv, app_dir, env, "jobwarden", "migrate")
    assert migrated.returncode == 0, migrated.stderr
    placed = run(venv, app_dir, env, "python", "shop_jobs.py", "1842")  # as the Installing page says
    assert placed.returncode == 0, placed.stderr
    job_id = int(placed.stdout)

    worker = start_process([str(venv / "bin" / "jobwarden"), "worker", "--app", "shop_jobs",
                            "--poll-interval", "0.2"],
                           cwd=app_dir, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        def status():
            with psycopg.connect(fresh_database) as conn:
                return conn.execute("SELECT status FROM background_jobs WHERE id = %s",
                                    [job_id]).fetchone()[0]
        wait_for(lambda: status() == "completed", timeout=60, message="the job to complete")
    finally:
        out, _ = stop_process(worker, signal.SIGTERM)
    assert worker.returncode == 0, out[-3000:]
    assert "receipt for order 1842 sent" in out

    added = run(venv, app_dir, env, "jobwarden", "user", "add", "ops", "--role", "viewer",
                input="smoke-password\n")
    assert added.returncode == 0, added.stderr
    console = start_process([str(venv / "bin" / "jobwarden"), "console", "--port", "0"],
                            cwd=app_dir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        # empty if the console died or hung on start
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", first_line(console))
        if not match:
            os.killpg(console.pid, signal.SIGKILL)
            pytest.fail(f"the console did not start: {console.communicate()[1][-3000:]}")
        base = f"http://127.0.0.1:{match.group(1)}"
        browser = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

        login_page = browser.open(f"{base}/login", timeout=30)
        assert login_page.status == 200
        token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"',
                          login_page.read().decode()).group(1)
        assert browser.open(f"{base}/static/console.css", timeout=30).status == 200
        signed_in = browser.open(f"{base}/login", data=urllib.parse.urlencode(
            {"username": "ops", "password": "smoke-password", "csrf_token": token}).encode(),
            timeout=30)
        assert signed_in.status == 200 and not signed_in.url.endswith("/login")
        jobs = browser.open(f"{base}/jobs?status=completed", timeout=30)
        assert jobs.status == 200
        assert "send_receipt" in jobs.read().decode()
    finally:
        _, err = stop_process(console, signal.SIGINT)  # Ctrl-C, as the Installing page says
    assert console.returncode == 0, err[-3000:]


def test_the_wheel_is_one_package_holding_every_module_and_data_file(installed):
    wheel = next((installed[0].parent / "dist").glob("jobwarden-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        top_level = archive.read(next(n for n in names if n.endswith(".dist-info/top_level.txt")))
    assert {name.split("/")[0] for name in names if ".dist-info/" not in name} == {"jobwarden"}
    assert top_level.decode().split() == ["jobwarden"]
    # package-dir lists each sub-package by hand: none (and no SQL or template) is missed
    expected = {f"jobwarden/{path.relative_to(ROOT)}" for folder in ("worker", "console")
                for path in (ROOT / folder).rglob("*")
                if path.is_file() and path.suffix in (".py", ".sql")
                and "__pycache__" not in path.parts}
    expected |= {f"jobwarden/{inside}/{path.relative_to(ROOT / folder)}"
                 for folder, inside in (("templates", "console/templates"),
                                        ("static", "console/static"),
                                        ("migrations", "worker/migrations"))
                 for path in (ROOT / folder).rglob("*")
                 if path.is_file() and "__pycache__" not in path.parts}
    # the façade and the command's entry point beside it
    expected |= {f"jobwarden/{path.name}" for path in (ROOT / "jobwarden").glob("*.py")}
    assert len(expected) > 150  # the scan really looked
    assert sorted(expected - names) == []
    assert sorted(n for n in names - expected if ".dist-info/" not in n) == []


def test_an_apps_own_worker_and_console_run_beside_jobwardens(installed, empty_database):
    """The application's `worker.py` holds its job types: `jobwarden worker --app worker`
    runs them; its `console` package and Jobwarden's console load in one process."""
    venv, app_dir = installed
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JOBWARDEN_APP")}
    env.update(DATABASE_URL=empty_database, JOBWARDEN_HOME=str(app_dir / ".jobwarden"))
    assert run(venv, app_dir, env, "jobwarden", "migrate").returncode == 0

    together = run(venv, app_dir, env, "python", "-c", SIDE_BY_SIDE)
    assert together.returncode == 0, together.stderr[-3000:]
    seen = json.loads(together.stdout.strip().splitlines()[-1])
    assert seen["worker"] == [str(app_dir / "worker.py"), "the app's own worker.py"]
    assert seen["console"] == [str(app_dir / "console" / "__init__.py"),
                               "the app's own console package"]
    jobwarden_file, runtime_file, enqueue_module = seen["jobwarden"]
    assert jobwarden_file.startswith(str(venv)) and runtime_file.startswith(str(venv))
    assert Path(runtime_file).parent.parent.name == "jobwarden"
    assert enqueue_module.startswith("jobwarden.worker.")
    assert seen["login"] == [200, True]
    assert seen["loaded"] == ["console", "jobwarden", "worker"]

    placed = run(venv, app_dir, env, "python", "worker.py", "7")  # the app's own module
    assert placed.returncode == 0, placed.stderr
    job_id = int(placed.stdout)
    worker = start_process([str(venv / "bin" / "jobwarden"), "worker", "--app", "worker",
                            "--poll-interval", "0.2"],
                           cwd=app_dir, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: _status(empty_database, job_id) == "completed", timeout=60,
                 message="the app's job to complete")
    finally:
        out, _ = stop_process(worker, signal.SIGTERM)
    assert worker.returncode == 0, out[-3000:]
    assert "basket 7 tidied by the app's own worker.py" in out


def guide_files() -> dict[str, str]:
    """The files docs/guide/getting-started.md tells a newcomer to save, by name."""
    text = (ROOT / "docs" / "guide" / "getting-started.md").read_text()
    files = dict(re.findall(r"Save this as `([\w.]+)`" + SAVED, text, re.DOTALL))
    assert set(files) == {"jobs.py", "signup.py"}, "the getting-started page lost an example"
    return files


def test_the_getting_started_guide_runs_as_written(installed, empty_database, tmp_path):
    venv = installed[0]
    for name, code in guide_files().items():
        (tmp_path / name).write_text(code)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JOBWARDEN_APP")}
    env.update(DATABASE_URL=empty_database, JOBWARDEN_HOME=str(tmp_path / ".jobwarden"))

    assert run(venv, tmp_path, env, "jobwarden", "migrate").returncode == 0
    signed_up = run(venv, tmp_path, env, "python", "signup.py", "ann@example.com")
    assert signed_up.stdout.strip() == "user 1, job 1", signed_up.stderr
    again = run(venv, tmp_path, env, "python", "signup.py", "ann@example.com")
    assert again.returncode != 0 and "already exists" in again.stderr  # no user, no job
    worker = start_process([str(venv / "bin" / "jobwarden"), "worker", "--app", "jobs",
                            "--poll-interval", "0.2"],
                           cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: _status(empty_database, 1) == "completed", timeout=60,
                 message="the guide's job to complete")
    finally:
        out, _ = stop_process(worker, signal.SIGINT)  # the guide says Ctrl-C
    assert worker.returncode == 0, out[-3000:]
    assert "welcome mail to user 1 (attempt 1)" in out
    with psycopg.connect(empty_database) as conn:
        assert conn.execute("SELECT count(*) FROM background_jobs").fetchone()[0] == 1


def _status(url: str, job_id: int) -> str | None:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT status FROM background_jobs WHERE id = %s",
                           [job_id]).fetchone()
    return row[0] if row else None


FLASK_PAGE = ROOT / "docs" / "guide" / "flask.md"


def flask_guide_files() -> dict[str, str]:
    """The files docs/guide/flask.md tells a reader to save, by path."""
    text = FLASK_PAGE.read_text()
    files = dict(re.findall(r"Save this as `([\w./]+)`" + SAVED, text, re.DOTALL))
    assert set(files) == {"myapp/__init__.py", "myapp/models.py", "myapp/auth.py",
                          "myapp/orders.py", "myapp/jobs.py"}, "the Flask page lost a file"
    return files


def flask_guide_packages() -> list[str]:
    """What the Flask page's install line adds to the wheel."""
    match = re.search(r'^\.venv/bin/pip install "\$JOBWARDEN_WHEEL" (.+)$',
                      FLASK_PAGE.read_text(), re.MULTILINE)
    assert match, "the Flask page lost its install line"
    return match.group(1).split()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_flask_guide_runs_as_written_on_one_database(installed, empty_database, tmp_path):
    venv = installed[0]
    page = FLASK_PAGE.read_text()
    # The commands below are the page's own: it must keep telling the reader to run them.
    for command in ("jobwarden migrate", "flask --app myapp add-user ann --console-role operator",
                    "jobwarden worker --app myapp.jobs", "flask --app myapp run"):
        assert command in page, f"the Flask page no longer says `{command}`"
    wheel = next((venv.parent / "dist").glob("jobwarden-*.whl"))
    pip = run(venv, tmp_path, dict(os.environ), "pip", "install", "--quiet", str(wheel),
              *flask_guide_packages())
    assert pip.returncode == 0, pip.stderr[-3000:]
    for name, code in flask_guide_files().items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(code)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "JOBWARDEN_APP")
           and not k.startswith("FLASK_")}
    env.update(DATABASE_URL=empty_database, SECRET_KEY="flask-guide-test-secret",
               JOBWARDEN_HOME=str(tmp_path / ".jobwarden"))

    migrated = run(venv, tmp_path, env, "jobwarden", "migrate")
    assert migrated.returncode == 0, migrated.stderr
    # No terminal (a new session): the password prompt and its confirmation read stdin.
    added = subprocess.run([str(venv / "bin" / "flask"), "--app", "myapp", "add-user", "ann",
                            "--console-role", "operator"], cwd=tmp_path, env=env,
                           input="guide-password\nguide-password\n", capture_output=True,
                           text=True, timeout=120, start_new_session=True)
    assert added.returncode == 0, added.stdout + added.stderr

    port = free_port()
    with open(tmp_path / "worker.log", "w") as worker_log, \
            open(tmp_path / "app.log", "w") as app_log:
        worker = subprocess.Popen([str(venv / "bin" / "jobwarden"), "worker",
                                   "--app", "myapp.jobs", "--poll-interval", "0.2"],
                                  cwd=tmp_path, env=env, stdout=worker_log,
                                  stderr=subprocess.STDOUT)
        app = subprocess.Popen([str(venv / "bin" / "flask"), "--app", "myapp", "run",
                                "--port", str(port)], cwd=tmp_path, env=env,
                               stdout=app_log, stderr=subprocess.STDOUT)
        try:
            _use_the_flask_guide_app(f"http://127.0.0.1:{port}", empty_database, app,
                                     tmp_path / "app.log")
        finally:
            app.send_signal(signal.SIGINT)
            worker.send_signal(signal.SIGINT)
            app.wait(timeout=60)
            worker.wait(timeout=60)
    out = (tmp_path / "worker.log").read_text()
    assert worker.returncode == 0, out[-3000:]
    assert "receipt for order 1 sent to bea@example.com" in out


def _use_the_flask_guide_app(base: str, url: str, app: subprocess.Popen, app_log: Path):
    browser = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))

    def answers():
        assert app.poll() is None, f"the app died: {app_log.read_text()[-3000:]}"
        try:
            return browser.open(f"{base}/login", timeout=5).status == 200
        except OSError:
            return False
    wait_for(answers, timeout=60, message="the guide's app to answer")

    # The console sends a stranger to the app's own login, which sends her back.
    asked = browser.open(f"{base}/ops/jobs/jobs", timeout=30)
    assert urllib.parse.urlsplit(asked.url).path == "/login", asked.url
    signed_in = browser.open(asked.url, data=urllib.parse.urlencode(
        {"username": "ann", "password": "guide-password",
         "csrf_token": _csrf(asked.read().decode())}).encode(), timeout=30)
    assert signed_in.status == 200 and signed_in.url == f"{base}/ops/jobs/jobs"

    form = browser.open(f"{base}/", timeout=30)
    placed = browser.open(f"{base}/orders", data=urllib.parse.urlencode(
        {"email": "bea@example.com", "amount_cents": "1299",
         "csrf_token": _csrf(form.read().decode())}).encode(), timeout=30)
    assert placed.status == 200 and placed.url == f"{base}/orders/1", placed.url
    with psycopg.connect(url) as conn:  # the order and its job, in the app's database
        assert conn.execute("SELECT email, amount_cents FROM orders").fetchall() == [
            ("bea@example.com", 1299)]
        assert conn.execute("SELECT id, type, payload->>'order_id' FROM background_jobs"
                            ).fetchall() == [(1, "send_receipt", "1")]
    wait_for(lambda: _status(url, 1) == "completed", timeout=60,
             message="the guide's job to complete")

    job_page = browser.open(f"{base}/ops/jobs/jobs/1", timeout=30)
    text = job_page.read().decode()
    assert job_page.status == 200 and "send_receipt" in text and "completed" in text


def _csrf(html: str) -> str:
    match = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', html)
    assert match, f"no CSRF token in the page: {html[:500]}"
    return match.group(1)
