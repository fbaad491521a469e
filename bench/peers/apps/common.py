"""What every system's app shares: the job kinds, the stamp file and the driver CLI.

Standard library only: the oban app imports this under its own Python 3.12 interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

KINDS = ("noop", "sleep", "stamp", "io", "limited")
#: How long a `sleep` job takes: the 10 ms scenario.
SLEEP_SECONDS = 0.010
#: How long an `io` job awaits (an async handler waiting on a remote API): the I/O-bound
#: scenario, io50ms.
IO_SECONDS = 0.050
#: The `limited` kind of the ratelimit scenario: its limit across every worker process, in
#: jobs per second, and each job's work. Read where the type (or its queue) is declared.
LIMIT_RATE = float(os.environ.get("BENCH_RATE", "200"))
LIMIT_WORK_SECONDS = float(os.environ.get("BENCH_WORK_MS", "5")) / 1000


def database_url() -> str:
    return os.environ["DATABASE_URL"]


def write_stamp(index: int) -> None:
    """Record that the handler of job `index` started, on the machine's monotonic clock
    (CLOCK_MONOTONIC is one clock for every process on the machine)."""
    now = time.monotonic()
    fd = os.open(os.environ["BENCH_STAMP_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{index} {now:.6f}\n".encode())
    finally:
        os.close(fd)


def driver(enqueue_batch: Callable[[str, list[int]], None],
           enqueue_one: Callable[[str, int], None] | None = None,
           install: Callable[[argparse.Namespace], None] | None = None,
           worker: Callable[[argparse.Namespace], None] | None = None) -> int:
    """The driver CLI. `enqueue_batch(kind, indexes)` commits one batch of jobs;
    `enqueue_one(kind, index)` commits one job in its own transaction (default: a batch of
    one). Async systems wrap their calls in a loop of their own. `worker(args)` runs a
    worker until it is told to stop, for a system without a worker CLI of its own."""
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("install")
    i.add_argument("--concurrency", type=int)
    i.add_argument("--rate", type=float, help="declare the rate-limited queue at this rate")
    e = sub.add_parser("enqueue")
    e.add_argument("--jobs", type=int, required=True)
    e.add_argument("--kind", choices=KINDS, default="noop")
    e.add_argument("--batch", type=int, default=5000)
    t = sub.add_parser("trickle")
    t.add_argument("--jobs", type=int, required=True)
    t.add_argument("--rate", type=float, required=True)
    t.add_argument("--out", required=True)
    if worker is not None:
        w = sub.add_parser("worker")
        w.add_argument("--concurrency", type=int, help="jobs in flight (default: the app's)")
    args = ap.parse_args()
    if args.cmd == "worker":
        worker(args)
        return 0
    if args.cmd == "install":
        if install is not None:
            install(args)
        return 0
    if args.cmd == "enqueue":
        start = time.perf_counter()
        for offset in range(0, args.jobs, args.batch):
            enqueue_batch(args.kind, list(range(offset, min(args.jobs, offset + args.batch))))
        print(json.dumps({"seconds": time.perf_counter() - start, "jobs": args.jobs}))
        return 0
    one = enqueue_one or (lambda kind, index: enqueue_batch(kind, [index]))
    with open(args.out, "w") as out:
        start = time.monotonic()
        for index in range(args.jobs):
            # Paced on a schedule, not by sleeping a fixed gap: a slow commit does not drift.
            delay = start + index / args.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            one("stamp", index)
            out.write(f"{index} {time.monotonic():.6f}\n")
    return 0
