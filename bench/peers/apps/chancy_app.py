"""Chancy: the app for `chancy --app bench.peers.apps.chancy_app.app worker start`, and the
driver: `install` migrates and declares the queue (AsyncExecutor for these async handlers,
as Chancy's docs advise for I/O-bound async jobs; eager polling for a continuously fed
queue), `enqueue` pushes with push_many (one transaction per batch)."""

from __future__ import annotations

import asyncio
import os
import sys

from chancy import Chancy, Queue, job

from bench.peers.apps.common import (
    IO_SECONDS,
    LIMIT_WORK_SECONDS,
    SLEEP_SECONDS,
    driver,
    write_stamp,
)

QUEUE = "default"
#: The ratelimit scenario's queue: Chancy's rate limits are per queue (Queue.rate_limit,
#: rate_limit_window), counted in its queue_rate_limits table for every worker.
LIMITED = "limited"

app = Chancy(os.environ.get("DATABASE_URL", ""))


@job(queue=QUEUE)
async def noop(i: int) -> None:
    pass


@job(queue=QUEUE)
async def sleep(i: int) -> None:
    await asyncio.sleep(SLEEP_SECONDS)


@job(queue=QUEUE)
async def io(i: int) -> None:
    await asyncio.sleep(IO_SECONDS)


@job(queue=QUEUE)
async def stamp(i: int) -> None:
    write_stamp(i)


@job(queue=LIMITED)
async def limited(i: int) -> None:
    write_stamp(i)
    await asyncio.sleep(LIMIT_WORK_SECONDS)


FUNCS = {"noop": noop, "sleep": sleep, "stamp": stamp, "io": io, "limited": limited}


def run_driver() -> int:
    loop = asyncio.new_event_loop()
    loop.run_until_complete(app.__aenter__())

    async def install(args) -> None:
        await app.migrate()
        if args.rate is None:
            await app.declare(Queue(QUEUE, concurrency=args.concurrency,
                                    executor="chancy.executors.asyncex.AsyncExecutor",
                                    eager_polling=True), upsert=True)
            return
        # A fixed window of one second (rate_limit_window is whole seconds); a worker that
        # finds the window spent polls again after polling_interval, an integer column:
        # 1 s is the shortest it takes.
        await app.declare(Queue(LIMITED, concurrency=args.concurrency,
                                executor="chancy.executors.asyncex.AsyncExecutor",
                                eager_polling=True, polling_interval=1,
                                rate_limit=int(args.rate), rate_limit_window=1), upsert=True)

    async def push(kind: str, indexes: list[int]) -> None:
        template = FUNCS[kind].job
        async for _ in app.push_many([template.with_kwargs(i=i) for i in indexes],
                                     batch_size=len(indexes)):
            pass

    try:
        return driver(lambda kind, indexes: loop.run_until_complete(push(kind, indexes)),
                      install=lambda args: loop.run_until_complete(install(args)))
    finally:
        loop.run_until_complete(app.__aexit__(None, None, None))


if __name__ == "__main__":
    # Through the module's own name, not __main__: job paths the worker can import.
    from bench.peers.apps.chancy_app import run_driver as _driver

    sys.exit(_driver())
