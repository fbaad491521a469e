"""A payment type whose reconciler asks a fake provider's ledger (the table
`provider_charges`) whether a charge went through."""

import psycopg

from jobwarden import job
from jobwarden.worker.ops.reconcile import DONE, NOT_DONE, UNKNOWN
from jobwarden.worker.store.db import database_url


def check_charge(review_job):
    order = review_job.payload["order"]
    if order == "provider-down":
        raise ConnectionError("provider API unreachable")
    with psycopg.connect(database_url()) as conn:
        row = conn.execute("SELECT state FROM provider_charges WHERE order_ref = %s",
                           [order]).fetchone()
    if row is None:
        return UNKNOWN
    return DONE if row[0] == "captured" else NOT_DONE


@job("charge", repeat_safe=False, reconciler=check_charge)
def charge(ctx, payload):
    pass
