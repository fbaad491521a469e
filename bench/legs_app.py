"""The latency scenario's worker app (bench/peers/apps/jobwarden_app.py), with a stamp
at each step between a notification and the start of the job it announced: for
bench/bench_start_legs.py only.

Loading it wraps three methods of the runtime in this worker process, each with one
monotonic-clock read:
- `Wakeup.wait` on a connection's socket: when the claim connection became readable
  (the notification reached the worker; worker/engine/producer.py, `_sleep`);
- the producer's prepared `claim_jobs` (`PreparedQuery.records`): when its claim was
  sent and when its jobs were in hand;
- `Executor.begin_in_slot`: when the job was begun on the thread that claimed it.
The handler's own stamp (`write_stamp`) is its first line's. Each job's stamps are one
line of BENCH_LEGS_FILE: `index woke sent back begun`, written while the worker waits
for the next notification (or at exit), never on a job's way to its start. Only the
jobs a producer thread begins itself get a line: an idle worker's, every one.
"""

from __future__ import annotations

import atexit
import os
import time
from typing import Any

from bench.peers.apps.jobwarden_app import stamp  # noqa: F401  (the bench_stamp type)
from jobwarden.worker.engine.executor import Executor
from jobwarden.worker.engine.listener import Wakeup
from jobwarden.worker.store.jobstore import PreparedQuery

#: When the claim connection last became readable (the lease clock's monotonic).
_woke = 0.0
#: job id -> (woke, sent, back) of the claim that took it, until it is begun.
_claimed: dict[int, tuple[float, float, float]] = {}
#: Lines not yet written.
_lines: list[str] = []


def _flush() -> None:
    if _lines:
        with open(os.environ["BENCH_LEGS_FILE"], "a") as f:
            f.write("".join(_lines))
        _lines.clear()


_wait = Wakeup.wait


def _stamped_wait(self: Wakeup, timeout: float, fd: int | None = None) -> bool:
    global _woke
    _flush()  # the worker is idle: nobody waits for this
    woken = _wait(self, timeout, fd)
    if woken and fd is not None:
        _woke = time.monotonic()
    return woken


_records = PreparedQuery.records


def _stamped_records(self: PreparedQuery, conn: Any, record: Any, **varying: Any) -> list:
    if self.name != b"jobwarden_claim_jobs" or not varying.get("limit"):
        return _records(self, conn, record, **varying)
    sent = time.monotonic()
    rows = _records(self, conn, record, **varying)
    back = time.monotonic()
    for job in rows:
        _claimed[job.id] = (_woke, sent, back)
    return rows


_begin_in_slot = Executor.begin_in_slot


def _stamped_begin(self: Executor, job: Any) -> Any:
    ex = _begin_in_slot(self, job)
    begun = time.monotonic()
    legs = _claimed.pop(job.id, None)
    if legs is not None and isinstance(job.payload, dict) and "i" in job.payload:
        woke, sent, back = legs
        _lines.append(f"{job.payload['i']} {woke:.6f} {sent:.6f} {back:.6f} {begun:.6f}\n")
    return ex


Wakeup.wait = _stamped_wait  # type: ignore[method-assign]
PreparedQuery.records = _stamped_records  # type: ignore[method-assign]
Executor.begin_in_slot = _stamped_begin  # type: ignore[method-assign]
atexit.register(_flush)
