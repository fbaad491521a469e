"""The `jobwarden` command's entry point (pyproject.toml's [project.scripts]).

It holds the cycle collector before the runtime's modules load: they, the app's and the
worker's own objects are made once and kept until the process exits, and the collector
made some 90 passes over them during a worker's start, 25-35 ms of it, for nothing to
free. A worker lets the collector go when it settles its heap, before its first claim
(worker/engine/heap.py, which freezes those objects first, so no pass ever traverses
them); every other command lets it go once its arguments are read. `import jobwarden`
loads none of the runtime (jobwarden/__init__.py), so this runs first.
"""

from __future__ import annotations

import gc


def main() -> int:
    held = gc.isenabled()
    gc.disable()
    # SIGTERM and SIGINT are recorded, not fatal, until the command knows what it is
    # (worker/engine/stop_signals.py): a worker stopped while it loads exits 0.
    from jobwarden.worker.engine import stop_signals

    stop_signals.hold()
    try:
        from jobwarden.worker.cli.commands import main as command
        from jobwarden.worker.engine import heap

        heap.held_since_start(held)
        return command()
    finally:
        if held and not gc.isenabled():  # the command ended before the collector was let go
            gc.enable()
