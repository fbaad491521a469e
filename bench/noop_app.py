"""A no-op job type for the backlog benchmark: measures the queue, not the work."""

from jobwarden import job


@job("noop", lease=30)
def noop(ctx, payload):
    pass
