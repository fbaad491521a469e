"""`jobwarden worker`, with each claim written down: `python -m bench.netem.jw_worker
[jobwarden options] worker ...` runs the same command line as the `jobwarden` script,
after wrapping the producer's two ways of claiming, claim() (a cursor: limited work, or
through a pooler) and its prepared claim (`PreparedQuery.records`), so that every claim
appends one line to `$BENCH_CLAIM_LOG.<pid>`: start and end (the machine's wall clock),
rows asked, rows returned. Nothing else changes; bench/netem/observe.py `claims()` reads
the lines."""

from __future__ import annotations

import os
import sys
import time

import jobwarden.worker.engine.producer as producer
from jobwarden.worker.cli import main
from jobwarden.worker.store.jobstore import PreparedQuery


def _wrap() -> None:
    log = open(f"{os.environ['BENCH_CLAIM_LOG']}.{os.getpid()}", "a", buffering=1)
    claim = producer.claim

    def counted(conn, *, limit, **kwargs):
        start = time.time()
        jobs = claim(conn, limit=limit, **kwargs)
        log.write(f"{start:.6f} {time.time():.6f} {limit} {len(jobs)}\n")
        return jobs

    producer.claim = counted
    prepared = PreparedQuery.records

    def counted_prepared(self, conn, record, **varying):
        start = time.time()
        jobs = prepared(self, conn, record, **varying)
        log.write(f"{start:.6f} {time.time():.6f} {varying['limit']} {len(jobs)}\n")
        return jobs

    PreparedQuery.records = counted_prepared  # type: ignore[method-assign]


if __name__ == "__main__":
    _wrap()
    sys.exit(main())
