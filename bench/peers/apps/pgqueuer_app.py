"""pgqueuer: the factory for `pgq run bench.peers.apps.pgqueuer_app:main` (asyncpg, as its
quick start shows) and the driver, which enqueues with Queries.enqueue (lists of
entrypoints, payloads and priorities: one statement per batch)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.queries import Queries

from bench.peers.apps.common import (
    IO_SECONDS,
    SLEEP_SECONDS,
    database_url,
    driver,
    write_stamp,
)


@asynccontextmanager
async def main() -> AsyncIterator[PgQueuer]:
    # pgqueuer 1.6's `pgq run` wants the factory to be an async context manager.
    connection = await asyncpg.connect(database_url())
    pgq = PgQueuer(AsyncpgDriver(connection))

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        pass

    @pgq.entrypoint("sleep")
    async def sleep(job: Job) -> None:
        await asyncio.sleep(SLEEP_SECONDS)

    @pgq.entrypoint("io")
    async def io(job: Job) -> None:
        await asyncio.sleep(IO_SECONDS)

    @pgq.entrypoint("stamp")
    async def stamp(job: Job) -> None:
        write_stamp(json.loads(job.payload)["i"])

    try:
        yield pgq
    finally:
        await connection.close()


def run_driver() -> int:
    loop = asyncio.new_event_loop()
    connection = loop.run_until_complete(asyncpg.connect(database_url()))
    queries = Queries(AsyncpgDriver(connection))

    def enqueue_batch(kind: str, indexes: list[int]) -> None:
        loop.run_until_complete(queries.enqueue(
            [kind] * len(indexes), [json.dumps({"i": i}).encode() for i in indexes],
            [0] * len(indexes)))

    return driver(enqueue_batch)


if __name__ == "__main__":
    # Through the module's own name, not __main__: job paths the worker can import.
    from bench.peers.apps.pgqueuer_app import run_driver as _driver

    sys.exit(_driver())
