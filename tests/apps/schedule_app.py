"""A scheduled job type for the multi-process schedule test: yearly, so no natural tick
falls inside the test; the test makes one due by hand."""

from jobwarden import job


@job("tick", schedule="0 0 1 1 *", schedule_tz="Europe/Berlin", lease=30)
def tick(ctx, payload):
    pass
