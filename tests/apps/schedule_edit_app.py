"""Job types for the console-edit schedule test (tests/integration/
test_console_schedule_edits.py): `edited` declared yearly in code (no natural tick falls
inside the test), `witness` and `added` declared with none; the test schedules them from
the console."""

from jobwarden import job


@job("edited", schedule="0 0 1 1 *", schedule_tz="Europe/Berlin", lease=30)
def edited(ctx, payload):
    pass


@job("witness", lease=30)
def witness(ctx, payload):
    pass


@job("added", lease=30)
def added(ctx, payload):
    pass
