"""The README's example runs as printed: its Flask view commits an order and its job in one
transaction, and `jobwarden worker --app shop` runs the job.

The example is read from README.md and saved as `shop.py` in a folder of its own, as a
newcomer would. The `orders` table's email is unique with a deferred check, so a second
order for the same address fails at COMMIT, after `enqueue` ran: the rollback must take
the job with it (the README's "a rollback would have left no job").
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import psycopg

from tests.helpers import scalar, start_process, stop_process, wait_for

ROOT = Path(__file__).resolve().parents[2]

POST = """
from shop import app
client = app.test_client()
for email in ("ada@example.com", "ada@example.com"):
    print(client.post("/orders", data={"email": email}).status_code)
"""


def readme_example() -> str:
    match = re.search(r"```python\n(# shop\.py.*?)```", (ROOT / "README.md").read_text(),
                      re.DOTALL)
    assert match, "README.md lost its shop.py example"
    return match.group(1)


def test_the_readme_example_commits_an_order_with_its_job_and_a_worker_runs_it(
        clean_db, tmp_path):
    (tmp_path / "shop.py").write_text(readme_example())
    with psycopg.connect(clean_db) as conn:
        conn.execute("CREATE TABLE orders (id serial PRIMARY KEY, email text,"
                     " UNIQUE (email) DEFERRABLE INITIALLY DEFERRED)")
    env = {**os.environ, "DATABASE_URL": clean_db}

    posted = subprocess.run([sys.executable, "-c", POST], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    # The first order commits with its job; the second fails at COMMIT and leaves neither.
    assert posted.stdout.split() == ["201", "500"], posted.stdout + posted.stderr
    assert scalar(clean_db, "SELECT array_agg(email) FROM orders") == ["ada@example.com"]
    order_id = scalar(clean_db, "SELECT id FROM orders")
    assert scalar(clean_db, "SELECT array_agg(idempotency_key) FROM background_jobs") == [
        f"order:{order_id}:receipt"]

    worker = start_process([sys.executable, "-m", "jobwarden.worker.cli", "worker",
                            "--app", "shop"], cwd=tmp_path, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: scalar(clean_db, "SELECT status FROM background_jobs") == "completed",
                 timeout=60)
    finally:
        out, _ = stop_process(worker)
    assert worker.returncode == 0, out
    assert f"receipt for order {order_id} sent" in out
    assert scalar(clean_db, "SELECT queue FROM background_jobs") == "email"
