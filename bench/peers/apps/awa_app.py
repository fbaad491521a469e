"""awa-pg: the driver, and the worker the harness starts (`worker`): awa has no worker CLI,
a script of the application starts `AsyncClient(...).start(queues)` and runs until told
to stop.

`install` migrates, then starts and stops one client: awa 0.6.9's `migrate` leaves a new
database on its older engine (`canonical`), and the first worker start on a database that
never held a job switches it to the queue-storage engine, its fast one. The install
checks `storage_status()` says so, or fails: a peer measured on its slow engine would not
be measured at its best. `enqueue` is the bulk COPY path into queue storage,
`enqueue_many_copy`; `trickle` inserts one job per transaction (`insert`)."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from dataclasses import dataclass

import awa

from bench.peers.apps.common import (
    IO_SECONDS,
    SLEEP_SECONDS,
    database_url,
    driver,
    write_stamp,
)

QUEUE = "default"
#: Jobs in flight in one worker process when the harness does not say
#: (bench/peers/systems.py's AWA_MAX_WORKERS always does).
MAX_WORKERS = 1000


@dataclass
class Args:
    i: int


def register(client: awa.AsyncClient) -> None:
    """The handlers, async (awa runs them on its event loop)."""

    @client.task(Args, kind="noop", queue=QUEUE)
    async def noop(job) -> None:
        pass

    @client.task(Args, kind="sleep", queue=QUEUE)
    async def sleep(job) -> None:
        await asyncio.sleep(SLEEP_SECONDS)

    @client.task(Args, kind="io", queue=QUEUE)
    async def io(job) -> None:
        await asyncio.sleep(IO_SECONDS)

    @client.task(Args, kind="stamp", queue=QUEUE)
    async def stamp(job) -> None:
        write_stamp(job.args.i)


async def install() -> None:
    url = database_url()
    await awa.migrate(url)
    client = awa.AsyncClient(url)
    try:
        register(client)
        await client.start([(QUEUE, 1)])
        await client.shutdown()
        status = json.loads(await client.storage_status())
    finally:
        await client.close()
    if status.get("active_engine") != "queue_storage":
        raise SystemExit(f"awa stayed on its {status.get('active_engine')!r} engine after "
                         f"the first worker start (state {status.get('state')!r})")


async def work(concurrency: int | None) -> None:
    """Run the worker until SIGTERM (the harness's stop), then shut down gracefully."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    client = awa.AsyncClient(database_url())
    register(client)
    await client.start([(QUEUE, concurrency or MAX_WORKERS)])
    try:
        await stop.wait()
    finally:
        await client.shutdown()
        await client.close()


def run_driver() -> int:
    loop = asyncio.new_event_loop()
    clients: list[awa.AsyncClient] = []  # the enqueuing client, made on first use

    def client() -> awa.AsyncClient:
        if not clients:
            clients.append(awa.AsyncClient(database_url()))
        return clients[0]

    def enqueue_batch(kind: str, indexes: list[int]) -> None:
        loop.run_until_complete(
            client().enqueue_many_copy([Args(i) for i in indexes], kind=kind, queue=QUEUE))

    def enqueue_one(kind: str, index: int) -> None:
        loop.run_until_complete(client().insert(Args(index), kind=kind, queue=QUEUE))

    try:
        return driver(enqueue_batch, enqueue_one,
                      install=lambda args: loop.run_until_complete(install()),
                      worker=lambda args: loop.run_until_complete(work(args.concurrency)))
    finally:
        for c in clients:
            loop.run_until_complete(c.close())


if __name__ == "__main__":
    # Through the module's own name, not __main__, as the other peers' drivers do.
    from bench.peers.apps.awa_app import run_driver as _driver

    sys.exit(_driver())
