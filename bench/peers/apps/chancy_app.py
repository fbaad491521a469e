"""Chancy: the app for `chancy --app bench.peers.apps.chancy_app.app worker start`, and the
driver: `install` migrates and declares the queue (AsyncExecutor for these async handlers,
as Chancy's docs advise for I/O-bound async jobs; eager polling for a continuously fed
queue), `enqueue` pushes with push_many (one transaction per batch)."""

from __future__ import annotations

import asyncio
import os
import sys

from chancy import Chancy, Queue, job

from bench.peers.apps.common import IO_SECONDS, SLEEP_SECONDS, driver, write_stamp

QUEUE = "default"

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


FUNCS = {"noop": noop, "sleep": sleep, "stamp": stamp, "io": io}


def run_driver() -> int:
    loop = asyncio.new_event_loop()
    loop.run_until_complete(app.__aenter__())

    async def install(args) -> None:
        await app.migrate()
        await app.declare(Queue(QUEUE, concurrency=args.concurrency,
                                executor="chancy.executors.asyncex.AsyncExecutor",
                                eager_polling=True), upsert=True)

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
