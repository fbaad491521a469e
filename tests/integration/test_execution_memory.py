"""A finished execution is freed by reference counting, not left to the cycle collector.

Each execution's control and the `ctx` it gives the handler used to hold each other
(and a coroutine's cancel hook held the execution and its task), so every finished job
stayed in memory until a full collection walked it: with 500 coroutine handlers in
flight those collections stalled the lane's loop by 30-40 ms at p99 (bench/README.md@eb7c2f0,
"Full collections"). Here the collector is off while a worker runs jobs of each handler
kind; the contexts of the first jobs must be gone once later jobs have gone through the
same slots (the last job of each slot may still be referenced by its thread's locals).
"""

from __future__ import annotations

import gc
import weakref

from jobwarden import enqueue, job
from tests.helpers import job_row, running_worker, wait_for


def run_all(conn, url: str, n: int) -> None:
    ids = [enqueue(conn, "memory.noop", {"i": i}) for i in range(n)]
    conn.commit()
    wait_for(lambda: all(job_row(url, i)["status"] == "completed" for i in ids), timeout=30,
             message=f"{n} jobs to complete")


def test_a_finished_execution_needs_no_cycle_collection(default_registry, conn, clean_db,
                                                        handler_kind):
    contexts: list[weakref.ref] = []

    @job("memory.noop", registry=default_registry)
    @handler_kind
    def noop(ctx, payload):
        contexts.append(weakref.ref(ctx))

    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        with running_worker(default_registry, clean_db, concurrency=2):
            run_all(conn, clean_db, 20)
            first = contexts[:20]
            run_all(conn, clean_db, 20)
            alive = sum(ref() is not None for ref in first)
    finally:
        if was_enabled:
            gc.enable()
    assert len(first) == 20
    assert alive == 0
