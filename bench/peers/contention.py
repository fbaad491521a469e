"""The contention load of the `*_busy` scenarios: one process spinning a fixed busy loop,
pinned to one core, started by the harness before the system's workers and stopped after
them, the same for every system. Production hosts are not idle: the workers share cores
with the web app, and the database with everything else.

`python -m bench.peers.contention CPU` is the spinner itself."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

from bench.peers import procs
from bench.peers.systems import ROOT


def describe(cpu: int) -> str:
    return (f"one process spinning a pure-Python busy loop (no I/O, no allocation), pinned "
            f"to CPU {cpu}, started before the workers and stopped after them")


def busy_cpu() -> int:
    """The core the loop is pinned to: the last this harness may run on."""
    return max(os.sched_getaffinity(0))


@contextmanager
def cpu_load(cpu: int | None = None) -> Iterator[dict]:
    """Spin one core while the block runs. The dict yielded is filled on exit with what the
    load was and the share of its core it got (its CPU time over the wall time): a figure
    well below 1 means the machine, not the loop, decided how busy the core was."""
    cpu = busy_cpu() if cpu is None else cpu
    fd, log = tempfile.mkstemp(prefix="jwbench-load-", suffix=".log")
    os.close(fd)
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = procs.spawn([sys.executable, "-m", "bench.peers.contention", str(cpu)], env, ROOT,
                       log)
    figures: dict = {"load": describe(cpu), "load_cpu": cpu}
    try:
        # Running and spinning before the workers start: its first tick of CPU time.
        deadline = time.monotonic() + 5
        while procs.cpu_ticks(proc.pid) == 0:
            if proc.poll() is not None:
                raise RuntimeError(f"the busy loop exited ({proc.returncode}): "
                                   f"{procs.tail(log)}")
            if time.monotonic() > deadline:
                raise RuntimeError("the busy loop did not start spinning within 5 s")
            time.sleep(0.01)
        start, ticks0 = time.monotonic(), procs.cpu_ticks(proc.pid)
        yield figures
        if proc.poll() is not None:
            raise RuntimeError(f"the busy loop exited ({proc.returncode}) during the "
                               f"measurement: {procs.tail(log)}")
        used = (procs.cpu_ticks(proc.pid) - ticks0) / os.sysconf("SC_CLK_TCK")
        figures["load_core_share"] = round(used / max(time.monotonic() - start, 1e-6), 3)
    finally:
        procs.stop(proc, grace=2.0)
        figures["load_exit"] = proc.poll()  # the signal that stopped it, negated


def spin(cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})
    while True:
        pass


if __name__ == "__main__":
    spin(int(sys.argv[1]))
