"""The worker process's garbage collector, set once the worker has started.

CPython's cycle collector runs a young pass each time 700 more container objects were
made than freed, an older one every 10 of those, and a full pass over every object when
enough have grown old. A worker's start leaves well over 100,000 objects behind (its
modules, classes, the app's), which every full pass traverses again (18.5-25 ms each),
and a lane of 500 coroutines in flight makes young objects fast: draining 30,000 jobs
that await 50 ms each, the collector made 150-250 young passes, 15-25 older ones and 2
full ones, 0.3-0.5 s in all, one full pass falling in the lane's first 50 ms, before it
had its 500 jobs in flight (`bench/bench_startup.py` counts the passes; docs/benchmarks.md,
"Jobwarden alone"). The `jobwarden` command also holds the collector from its start to
`settle()` (jobwarden/command.py): no pass at all over the objects of the start.

`settle()`, as the worker's run begins (before it registers, and so before its first
claim):
- freezes what the start made (gc.freeze): the collector no longer traverses it, so a
  full pass costs what the objects made since cost. What is frozen is never collected:
  it is the code and the configuration the worker keeps until it exits anyway;
- makes the young pass wait for YOUNG_THRESHOLD more objects, not 700: a fourteenth as
  many passes, each over the young objects still alive then (in a drain, about those of
  the jobs in flight, which every pass traversed again). A cycle left as garbage waits a
  little longer to be freed: at most YOUNG_THRESHOLD young objects more are held for it.

Only a process the worker owns is settled (the `jobwarden worker` command:
WorkerConfig.settle_heap): an application running a WorkerProcess of its own keeps its
collector as it set it.
"""

from __future__ import annotations

import gc

#: The young generation's threshold once the worker has started (CPython's is 700).
YOUNG_THRESHOLD = 10_000

#: The `jobwarden` command stopped the collector before the runtime's modules loaded
#: (jobwarden/command.py): `release` (or `settle`) lets it go.
_held = False


def held_since_start(held: bool) -> None:
    """Told by the `jobwarden` command: it stopped the collector at its start (`held`:
    the collector was running until then)."""
    global _held
    _held = held


def release() -> None:
    """Let the collector go, if the command held it (a command that is not a worker's,
    once its arguments are read; a worker, once settled)."""
    global _held
    if _held:
        _held = False
        gc.enable()


def settle() -> None:
    """Freeze the start's objects and make young passes rarer (module docstring), then
    let the collector go if the command held it. A threshold already higher (set by the
    app) is kept."""
    gc.freeze()
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), older, oldest)
    release()
