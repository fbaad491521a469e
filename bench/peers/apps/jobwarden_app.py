"""Jobwarden: handlers for `jobwarden worker --app bench.peers.apps.jobwarden_app`, and the
driver, which enqueues through the public API (enqueue_many with JobSpec)."""

from __future__ import annotations

import asyncio
import sys
import time

import psycopg

from bench.peers.apps.common import (
    IO_SECONDS,
    SLEEP_SECONDS,
    database_url,
    driver,
    write_stamp,
)
from jobwarden import JobSpec, enqueue_many, job


@job("bench_noop", lease=30)
def noop(ctx, payload):
    pass


@job("bench_sleep", lease=30)
def sleep(ctx, payload):
    time.sleep(SLEEP_SECONDS)


# An async handler, on a queue of its own: the io50ms scenario gives that queue a lane
# (`--queues io=500`), and a lane whose types are all coroutines feeds its event loop
# from one slot thread instead of 500 (worker/engine/executor.py).
@job("bench_io", queue="io", lease=30)
async def io(ctx, payload):
    await asyncio.sleep(IO_SECONDS)


@job("bench_stamp", lease=30)
def stamp(ctx, payload):
    write_stamp(payload["i"])


# The ratelimit scenario's type is in jobwarden_limited_app.py, which only that
# scenario's workers load: a rate-limited type makes every claim of its worker a limited
# one first.


def main() -> int:
    conn = psycopg.connect(database_url())

    def enqueue_batch(kind: str, indexes: list[int]) -> None:
        enqueue_many(conn, [JobSpec(f"bench_{kind}", {"i": i}) for i in indexes])
        conn.commit()

    return driver(enqueue_batch)


if __name__ == "__main__":
    sys.exit(main())
