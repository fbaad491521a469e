"""A point-to-point link with a fixed one-way delay: two TUN devices and this process
between them, holding every packet `--delay-ms` before passing it on.

It stands in for `tc qdisc ... netem delay`, which needs the kernel's sch_netem: a
kernel built without it (CONFIG_NET_SCH_NETEM unset) refuses the qdisc. The harness
starts one delay line per delayed link: this process makes the two devices (`--host`
stays in the host's namespace, `--ns` is moved into the worker's), prints `ready`, and
from then on copies raw IP packets from one device to the other, each after the delay,
in the order they came; half the round trip each way, so a round trip costs twice the
delay. With `--delay-ms 0` packets are passed on at once: the same path without delay,
the control.

It runs at real-time priority where allowed (a link's delay does not grow when the
machine's cores are busy, and this process needs little CPU). Commands on stdin, one a
line: `stats` prints a JSON line of counters (packets and bytes each way, how late
packets left compared with their due time: the sum since the start, the largest since
the last `stats`); end of input (the harness gone) ends it, and
the devices go with it.
"""

from __future__ import annotations

import argparse
import ctypes
import fcntl
import json
import os
import select
import struct
import sys
import time
from collections import deque

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
PR_SET_TIMERSLACK = 29
#: A packet may leave this much before its due time rather than wait another wake-up.
EARLY_OK = 20e-6


def open_tun(name: str) -> int:
    """A new TUN device (raw IP packets, no packet-info header) and its file descriptor;
    the device lives as long as the descriptor."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def realtime() -> str:
    """Real-time priority and a 1 µs timer slack for this process, where allowed."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
        return "SCHED_FIFO 10"
    except (OSError, AttributeError):
        return "normal"


class Direction:
    """One way of the link: packets read from `src`, written to `dst` when due."""

    def __init__(self, src: int, dst: int, delay: float):
        self.src, self.dst, self.delay = src, dst, delay
        self.queue: deque[tuple[float, bytes]] = deque()
        self.packets = self.bytes = 0
        self.late_sum = self.late_max = 0.0

    def read(self, now: float) -> None:
        while True:
            try:
                packet = os.read(self.src, 65536)
            except BlockingIOError:
                return
            self.packets += 1
            self.bytes += len(packet)
            if self.delay:
                self.queue.append((now + self.delay, packet))
            else:
                os.write(self.dst, packet)

    def flush(self, now: float) -> None:
        while self.queue and self.queue[0][0] <= now + EARLY_OK:
            due, packet = self.queue.popleft()
            os.write(self.dst, packet)
            late = now - due  # below 0: left up to EARLY_OK early
            self.late_sum += late
            self.late_max = max(self.late_max, late)

    def next_due(self) -> float | None:
        return self.queue[0][0] if self.queue else None

    def stats(self) -> dict:
        """Counters since the start; the largest lateness since the last call."""
        out = {"packets": self.packets, "bytes": self.bytes,
               "late_sum_us": round(self.late_sum * 1e6, 1),
               "late_max_us": round(self.late_max * 1e6, 1)}
        self.late_max = 0.0
        return out


def serve(host_fd: int, ns_fd: int, delay: float, priority: str) -> None:
    # client -> server is what the namespace sends (it arrives on the namespace's device);
    # server -> client what the host sends to the namespace.
    up = Direction(ns_fd, host_fd, delay)
    down = Direction(host_fd, ns_fd, delay)
    stdin = sys.stdin.fileno()
    readers = [host_fd, ns_fd, stdin]
    # A wake-up comes some tens of µs after the time asked for: ask that much earlier
    # (a running average of how late the last wake-ups were), so packets leave on time.
    wake_late = 0.0
    while True:
        dues = [d for d in (up.next_due(), down.next_due()) if d is not None]
        target = min(dues) - wake_late if dues else None
        timeout = max(0.0, target - time.monotonic()) if target is not None else None
        ready, _, _ = select.select(readers, [], [], timeout)
        now = time.monotonic()
        if not ready and target is not None:
            wake_late = min(0.9 * wake_late + 0.1 * max(0.0, now - target), 500e-6)
        if ns_fd in ready:
            up.read(now)
        if host_fd in ready:
            down.read(now)
        if stdin in ready:
            line = sys.stdin.readline()
            if not line:
                return  # the harness is gone
            if line.strip() == "stats":
                print(json.dumps({"up": up.stats(), "down": down.stats(),
                                  "delay_ms": delay * 1000, "priority": priority}),
                      flush=True)
        now = time.monotonic()
        up.flush(now)
        down.flush(now)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.netem.delayline", description=__doc__)
    ap.add_argument("--host", required=True, help="name of the device left in this namespace")
    ap.add_argument("--ns", required=True, help="name of the device the harness moves away")
    ap.add_argument("--delay-ms", type=float, required=True, help="one-way delay")
    args = ap.parse_args(argv)
    host_fd, ns_fd = open_tun(args.host), open_tun(args.ns)
    priority = realtime()
    print("ready", flush=True)
    try:
        serve(host_fd, ns_fd, args.delay_ms / 1000, priority)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
