"""The hot path's triggers never compile their statements with JIT (migration 0067).

A trigger statement's plan is made once per session from whatever statistics there are;
without them its cost grew with the execution history until it passed jit_above_cost,
and from then on every claim and outcome batch paid 25-27 ms of LLVM compilation
(bench/README.md@eb7c2f0, "Triggers and JIT"). Here the session lowers every JIT threshold to
0, so any statement it runs is compiled unless its function turns JIT off, and
auto_explain reports each statement's plan, the trigger functions' statements too.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import psycopg
import pytest

from jobwarden import Registry, enqueue, job
from jobwarden.worker.engine.producer import claim
from tests.helpers import explained

MIGRATION = Path(__file__).resolve().parents[2] / "migrations" / "versions" / \
    "0067_triggers_without_jit.py"


def trigger_functions() -> tuple[str, ...]:
    spec = importlib.util.spec_from_file_location("jobwarden_migration_0067", MIGRATION)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FUNCTIONS


#: Trigger functions of background_jobs made after migration 0067, each with `SET jit =
#: off` of its own: the payload's check (migration 0096), whose insert statement reads
#: the new rows.
LATER = ("jobwarden_payload_object()",)


def test_every_trigger_function_of_the_hot_path_turns_jit_off(conn):
    names = [f.removesuffix("()") for f in (*trigger_functions(), *LATER)]
    settings = dict(conn.execute(
        "SELECT proname, proconfig FROM pg_proc WHERE proname = ANY(%s)", [names]).fetchall())
    assert sorted(settings) == sorted(names)
    assert {name: "jit=off" in (config or []) for name, config in settings.items()} == \
        {name: True for name in names}
    # And every function a trigger of background_jobs runs is among them (TRUNCATE's
    # empties two tables and plans nothing worth compiling either way).
    fired = {r[0] for r in conn.execute(
        "SELECT DISTINCT p.proname FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid "
        "WHERE t.tgrelid = 'background_jobs'::regclass AND NOT t.tgisinternal").fetchall()}
    assert fired - set(names) == {"jobwarden_rollup_truncate"}


def test_a_claim_compiled_with_jit_runs_its_triggers_without(explain_db):
    reg = Registry()

    @job("jit.noop", registry=reg)
    def noop(ctx, payload):
        pass

    with psycopg.connect(explain_db, autocommit=True) as conn:
        if not conn.execute("SELECT pg_jit_available()").fetchone()[0]:
            pytest.skip("this server has no JIT provider: nothing to turn off")
        enqueue(conn, "jit.noop", {}, registry=reg)
        plans = explained(conn, nested=True)
        for setting in ("SET jit = on",
                        "SET jit_above_cost = 0", "SET jit_inline_above_cost = 1e9",
                        "SET jit_optimize_above_cost = 1e9"):
            conn.execute(setting)
        plans.clear()
        (claimed,) = claim(conn, types=["jit.noop"], leases=[30.0], queues=None, limit=1,
                           worker_id="w")
        enqueue(conn, "jit.noop", {}, registry=reg)
    top = [p for p in plans if "jobwarden: claim_jobs" in p]
    counted = [p for p in plans if "job_count_deltas" in p]
    notified = [p for p in plans if "pg_notify" in p]
    assert top and counted and notified, plans
    # The session compiles what it runs (so the check below could fail) ...
    assert all("JIT:" in p for p in top)
    # ... but not what the triggers run: the claim's count deltas, the enqueue's counts
    # and its notification.
    assert [p for p in counted + notified if "JIT:" in p] == []
