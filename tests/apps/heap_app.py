"""A handler that returns its worker's collector settings (worker/engine/heap.py): what
the `jobwarden` command leaves them at once it runs jobs, and whether the collector ran
while the app was imported (the command holds it until the worker settles)."""

import gc

from jobwarden import job

RUNNING_AT_IMPORT = gc.isenabled()


@job("heap.report")
def report(ctx, payload):
    return {"frozen": gc.get_freeze_count(), "threshold": list(gc.get_threshold()),
            "running": gc.isenabled(), "running_at_import": RUNNING_AT_IMPORT}
