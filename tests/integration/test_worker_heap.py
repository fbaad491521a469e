"""The `jobwarden worker` command settles its collector before the first claim
(worker/engine/heap.py): the objects of its start are frozen, and the young generation
waits for YOUNG_THRESHOLD objects. A WorkerProcess in an application's own process
leaves the collector as the application set it."""

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


def test_the_worker_command_runs_its_first_job_on_a_settled_heap(clean_db):
    with psycopg.connect(clean_db) as conn:
        enqueue(conn, "heap.report", {})
    env = {**os.environ, "DATABASE_URL": clean_db}
    proc = start_process([sys.executable, "-m", "jobwarden.worker.cli", "--log-level",
                          "WARNING", "worker", "--app", "tests.apps.heap_app"],
                         cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: scalar(clean_db, "SELECT count(*) FROM background_jobs "
                                          "WHERE status = 'completed'") == 1,
                 timeout=60, message="the job to run")
    finally:
        errors = [err.decode()[-2000:] for _, err in stop_processes([proc])]
    assert proc.returncode == 0, errors
    result = scalar(clean_db, "SELECT result FROM background_jobs")
    # Tens of thousands of objects: the interpreter's, Jobwarden's, the app's.
    assert result["frozen"] > 10_000
    assert result["threshold"][0] == YOUNG_THRESHOLD
    assert result["threshold"][1:] == list(gc.get_threshold())[1:]


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
