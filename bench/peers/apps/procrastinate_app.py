"""Procrastinate: the app for `procrastinate --app bench.peers.apps.procrastinate_app.app
worker`, and the driver, which defers with Task.batch_defer_async (one statement per
batch).
The schema is applied with `procrastinate schema --apply`."""

from __future__ import annotations

import asyncio
import os
import sys

from procrastinate import App, PsycopgConnector

from bench.peers.apps.common import IO_SECONDS, SLEEP_SECONDS, driver, write_stamp

app = App(connector=PsycopgConnector(conninfo=os.environ.get("DATABASE_URL", "")))


@app.task(name="noop")
async def noop(i: int) -> None:
    pass


@app.task(name="sleep")
async def sleep(i: int) -> None:
    await asyncio.sleep(SLEEP_SECONDS)


@app.task(name="io")
async def io(i: int) -> None:
    await asyncio.sleep(IO_SECONDS)


@app.task(name="stamp")
async def stamp(i: int) -> None:
    write_stamp(i)


TASKS = {"noop": noop, "sleep": sleep, "stamp": stamp, "io": io}


def run_driver() -> int:
    loop = asyncio.new_event_loop()
    loop.run_until_complete(app.open_async())

    def enqueue_batch(kind: str, indexes: list[int]) -> None:
        task = app.tasks[kind]
        loop.run_until_complete(task.batch_defer_async(*({"i": i} for i in indexes)))

    try:
        return driver(enqueue_batch)
    finally:
        loop.run_until_complete(app.close_async())


if __name__ == "__main__":
    # Through the module's own name, not __main__: job paths the worker can import.
    from bench.peers.apps.procrastinate_app import run_driver as _driver

    sys.exit(_driver())
