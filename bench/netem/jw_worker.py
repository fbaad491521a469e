"""`jobwarden worker`, with each claim written down: `python -m bench.netem.jw_worker
[jobwarden options] worker ...` runs the same command line as the `jobwarden` script,
after wrapping the producer's claim() so that every call appends one line to
`$BENCH_CLAIM_LOG.<pid>`: start and end (the machine's wall clock), rows asked, rows
returned. Nothing else changes; bench/netem/observe.py `claims()` reads the lines."""

from __future__ import annotations

import os
import sys
import time

import worker.engine.producer as producer
from worker.cli import main


def _wrap() -> None:
    log = open(f"{os.environ['BENCH_CLAIM_LOG']}.{os.getpid()}", "a", buffering=1)
    claim = producer.claim

    def counted(conn, *, limit, **kwargs):
        start = time.time()
        jobs = claim(conn, limit=limit, **kwargs)
        log.write(f"{start:.6f} {time.time():.6f} {limit} {len(jobs)}\n")
        return jobs

    producer.claim = counted


if __name__ == "__main__":
    _wrap()
    sys.exit(main())
