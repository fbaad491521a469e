"""Two queues for the lane benchmark: slow reports that pile up, and quick emails."""

import time

from jobwarden import job


@job("report", queue="reports", lease=60)
def report(ctx, payload):
    time.sleep(1.0)


@job("email", queue="email", lease=30)
def email(ctx, payload):
    pass
