"""A handler that returns its worker's collector settings (worker/engine/heap.py): what
the `jobwarden worker` command leaves them at once it runs jobs."""

import gc

from jobwarden import job


@job("heap.report")
def report(ctx, payload):
    return {"frozen": gc.get_freeze_count(), "threshold": list(gc.get_threshold())}
