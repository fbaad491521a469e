"""The worker's own clock for leases: may this process still start a job it claimed?

The database grants a lease: a claim or a heartbeat sets `lease_expires_at = now() +
lease`. The worker notes on its own clock the moment just before it sends that statement
(`granted_at`); the database's lease began no earlier. So while less than `lease × (1 −
MARGIN)` has passed on that clock, the lease has certainly not run out and no recovery can
have taken the job: the worker may start it without asking. Past that (the process was
frozen, or its heartbeats could not reach the database) only the database can say, and the
executor asks it before starting (docs/faults.md, "Starting buffered work"). The absence of
bad news is never taken for a lease: a heartbeat that has not run yet tells nothing.

The clock is CLOCK_BOOTTIME where the system has it: like the monotonic clock it never goes
back and keeps counting while the process is stopped (SIGSTOP, a debugger), and unlike it
it also counts while the machine sleeps (a suspended laptop or a paused VM).
"""

from __future__ import annotations

import time

if hasattr(time, "CLOCK_BOOTTIME"):
    def now() -> float:
        """Seconds on the lease clock (only differences mean anything)."""
        return time.clock_gettime(time.CLOCK_BOOTTIME)
else:  # pragma: no cover - systems without CLOCK_BOOTTIME
    now = time.monotonic

#: The part of a lease the worker never counts on: it covers the moments between the
#: check and the handler's first act, and clocks that run at slightly different rates.
#: The heartbeat renews every third of the shortest lease, so a live worker's buffered
#: jobs are always well inside the rest.
MARGIN = 1 / 3


def vouched(granted_at: float | None, lease: float, at: float | None = None) -> bool:
    """Whether a lease granted at `granted_at` (lease clock) is certainly still held."""
    if granted_at is None:
        return False
    return (now() if at is None else at) - granted_at < lease * (1 - MARGIN)
