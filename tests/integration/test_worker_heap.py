"""The `jobwarden worker` command holds the cycle collector from its start
(jobwarden/command.py) and settles it before the first claim (worker/engine/heap.py):
the objects of its start are frozen, the young generation waits for YOUNG_THRESHOLD
objects, and the collector runs again. A WorkerProcess in an application's own process
leaves the collector as the application set it; `import jobwarden` loads none of the
runtime, so that the command's entry point runs before it does."""

from __future__ import annotations

import gc
import os
import subprocess
import sys

import psycopg

from jobwarden import Registry, enqueue, job
from jobwarden.worker.engine.heap import YOUNG_THRESHOLD
from tests.helpers import running_worker, scalar, start_process, stop_processes, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


#: What the `jobwarden` script runs (pyproject.toml's [project.scripts]), and the module
#: tests and operators run with `python -m`, which has no collector held at its start.
ENTRY = ["-c", "import sys; from jobwarden.command import main; sys.exit(main())"]
MODULE = ["-m", "jobwarden.worker.cli"]


def _first_job_report(url: str, way: list[str]) -> dict:
    with psycopg.connect(url) as conn:
        enqueue(conn, "heap.report", {})
    env = {**os.environ, "DATABASE_URL": url}
    proc = start_process([sys.executable, *way, "--log-level", "WARNING", "worker",
                          "--app", "tests.apps.heap_app"],
                         cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: scalar(url, "SELECT count(*) FROM background_jobs "
                                     "WHERE status = 'completed'") == 1,
                 timeout=60, message="the job to run")
    finally:
        errors = [err.decode()[-2000:] for _, err in stop_processes([proc])]
    assert proc.returncode == 0, errors
    result: dict = scalar(url, "SELECT result FROM background_jobs")
    return result


def test_the_worker_command_runs_its_first_job_on_a_settled_heap(clean_db):
    result = _first_job_report(clean_db, ENTRY)
    # Held while the runtime and the app loaded; running again once settled.
    assert (result["running_at_import"], result["running"]) == (False, True)
    # Tens of thousands of objects: the interpreter's, Jobwarden's, the app's.
    assert result["frozen"] > 10_000
    assert result["threshold"][0] == YOUNG_THRESHOLD
    assert result["threshold"][1:] == list(gc.get_threshold())[1:]


def test_a_worker_run_as_a_module_settles_its_heap_too(clean_db):
    result = _first_job_report(clean_db, MODULE)
    assert (result["running_at_import"], result["running"]) == (True, True)
    assert result["frozen"] > 10_000 and result["threshold"][0] == YOUNG_THRESHOLD


def test_importing_the_facade_loads_none_of_the_runtime():
    """The `jobwarden` command's entry point imports the package first: a façade that
    loaded the runtime would load it before the collector is held. Each public name is
    loaded at its first use, and is the runtime's own object."""
    code = ("import sys, jobwarden; print(sorted(m for m in sys.modules "
            "if m.startswith('jobwarden.'))); from jobwarden import job, RetryPolicy; "
            "import jobwarden.worker as w; print(job is w.job, RetryPolicy is w.RetryPolicy, "
            "'enqueue' in dir(jobwarden), bool(jobwarden.__version__))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "True True True True"]


def test_settling_keeps_a_higher_threshold_the_app_set():
    """In a fresh interpreter: this one's collector is the test run's."""
    code = ("import gc; from jobwarden.worker.engine.heap import settle; "
            "gc.set_threshold(50_000, 7, 9); settle(); "
            "print(gc.get_threshold(), gc.get_freeze_count() > 0)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["(50000,", "7,", "9)", "True"]


def test_a_worker_in_an_application_process_leaves_its_collector_alone(clean_db):
    registry = Registry()
    ran = []

    @job("heap.inline", registry=registry)
    def inline(ctx, payload):
        ran.append((gc.get_threshold(), gc.get_freeze_count()))

    before = (gc.get_threshold(), gc.get_freeze_count())
    with psycopg.connect(clean_db) as conn:
        enqueue(conn, "heap.inline", {}, registry=registry)
    with running_worker(registry, clean_db):
        wait_for(lambda: ran, timeout=30, message="the job to run")
    assert ran == [before]
