"""Jobs of batches for the batches' chaos tests (tests/chaos/test_batches.py): members
that complete or fail for good as their payload says, a member that fans out, and a
callback that records each of its runs in the oracle table `batch_callback_runs`."""

import json

from jobwarden import JobSpec, PermanentError, job

#: How many members the fan-out member adds to its batch, in its business transaction.
FAN_OUT = "fan_out"


def create_tables(conn) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS batch_callback_runs (job_id bigint NOT NULL, "
                 "batch_id bigint NOT NULL, event text NOT NULL, payload jsonb NOT NULL, "
                 "at timestamptz NOT NULL DEFAULT clock_timestamp())")
    conn.commit()


# No backoff: a member lost to a kill runs again once its lease lapses, not 5, 10, 20 s
# later (the default backoff's), which the tests would only wait through.
@job("batch.member", lease=2, max_attempts=50, backoff=0)
def member(ctx, payload):
    if payload.get("fail"):
        raise PermanentError("ROW_INVALID", "this row never parses")


@job("batch.fan", lease=2, max_attempts=50, backoff=0)
def fan(ctx, payload):
    # Added in the business transaction: they exist, and count, only if this attempt's
    # completion commits (a killed attempt adds nothing; its retry adds them again).
    with ctx.transaction():
        ctx.add_to_batch([JobSpec("batch.member", {"fanned": n})
                          for n in range(payload[FAN_OUT])])


@job("batch.callback", lease=2, max_attempts=50, backoff=0)
def callback(ctx, payload):
    with ctx.transaction() as conn:
        conn.execute("INSERT INTO batch_callback_runs (job_id, batch_id, event, payload) "
                     "VALUES (%s, %s, %s, %s)",
                     [ctx.job_id, payload["batch"]["id"], payload["batch"]["event"],
                      json.dumps(payload)])
