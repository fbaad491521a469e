"""Jobwarden: handlers for `jobwarden worker --app bench.peers.apps.jobwarden_app`, and the
driver, which enqueues through the public API (enqueue_many with JobSpec)."""

from __future__ import annotations

import sys
import time

import psycopg

from bench.peers.apps.common import SLEEP_SECONDS, database_url, driver, write_stamp
from worker import JobSpec, enqueue_many, job


@job("bench_noop", lease=30)
def noop(ctx, payload):
    pass


@job("bench_sleep", lease=30)
def sleep(ctx, payload):
    time.sleep(SLEEP_SECONDS)


@job("bench_stamp", lease=30)
def stamp(ctx, payload):
    write_stamp(payload["i"])


def main() -> int:
    conn = psycopg.connect(database_url())

    def enqueue_batch(kind: str, indexes: list[int]) -> None:
        enqueue_many(conn, [JobSpec(f"bench_{kind}", {"i": i}) for i in indexes])
        conn.commit()

    return driver(enqueue_batch)


if __name__ == "__main__":
    sys.exit(main())
