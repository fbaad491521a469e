"""Oban (oban-py): workers for `oban start --queues default:N`, run in its own Python 3.12
virtualenv, and the driver, which inserts with Oban.enqueue_many (one statement per batch).
The schema is installed with `oban install`."""

from __future__ import annotations

import asyncio
import sys

from oban import Oban, worker
from psycopg_pool import AsyncConnectionPool

from bench.peers.apps.common import SLEEP_SECONDS, database_url, driver, write_stamp


@worker(queue="default")
class Noop:
    async def process(self, job):
        return None


@worker(queue="default")
class Sleep:
    async def process(self, job):
        await asyncio.sleep(SLEEP_SECONDS)


@worker(queue="default")
class Stamp:
    async def process(self, job):
        write_stamp(job.args["i"])


WORKERS = {"noop": Noop, "sleep": Sleep, "stamp": Stamp}


def run_driver() -> int:
    loop = asyncio.new_event_loop()

    async def open_oban() -> Oban:
        await pool.open()
        return Oban(pool=pool)  # no queues: this process only inserts

    pool = AsyncConnectionPool(database_url(), min_size=1, max_size=2, open=False)
    oban = loop.run_until_complete(open_oban())

    def enqueue_batch(kind: str, indexes: list[int]) -> None:
        cls = WORKERS[kind]
        loop.run_until_complete(oban.enqueue_many([cls.new({"i": i}) for i in indexes]))

    try:
        return driver(enqueue_batch)
    finally:
        loop.run_until_complete(pool.close())


if __name__ == "__main__":
    # Through the module's own name, not __main__: job paths the worker can import.
    from bench.peers.apps.oban_app import run_driver as _driver

    sys.exit(_driver())
