"""Child processes of the harness: started in their own process groups, watched for peak
memory, and all of them killed at the end whatever happened."""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import threading
from collections.abc import Sequence

_live: list[subprocess.Popen] = []


def spawn(argv: Sequence[str], env: dict[str, str], cwd: str, log_path: str) -> subprocess.Popen:
    """Start a process in a new session (so its children can be killed with it), its output
    going to `log_path` (read back when it fails)."""
    log = open(log_path, "ab")
    proc = subprocess.Popen(list(argv), env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    _live.append(proc)
    return proc


def stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL it if it has not exited within `grace`."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    # Children left behind in the group (an executor's pool) go too.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc in _live:
        _live.remove(proc)


def stop_all() -> None:
    """Kill every process this harness started and has not stopped yet."""
    for proc in list(_live):
        stop(proc, grace=2.0)


atexit.register(stop_all)


def tail(path: str, lines: int = 5) -> str:
    """The last lines of a log, for a failure's reason."""
    try:
        with open(path, errors="replace") as f:
            text = f.read()[-4000:]
    except OSError:
        return ""
    # Rich tracebacks draw boxes: keep the lines that say something.
    kept = [line.strip() for line in text.strip().splitlines()
            if line.strip() and line.strip()[0] not in "│╭╰┃┏┗"]
    return " | ".join(kept[-lines:])


def children(pid: int) -> list[int]:
    """pid's child processes, from /proc/<pid>/task/*/children (none once it is gone)."""
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out.extend(int(c) for c in f.read().split())
    except OSError:
        pass
    return out


def _tree(pid: int) -> list[int]:
    """pid and all its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children(p))
    return out


def cpu_ticks(pid: int) -> int:
    """utime + stime of `pid` so far, in clock ticks (/proc/<pid>/stat fields 14 and 15;
    the command name, field 2, may hold spaces, so split after its closing paren)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return 0


def _hwm_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class RssWatch:
    """Polls the worker processes and their children: the peak resident set (VmHWM) of each
    process seen, summed over the processes of one worker tree, largest tree reported; and
    the CPU time each has used (the last reading before it stops), summed over all."""

    def __init__(self, procs: Sequence[subprocess.Popen], interval: float = 0.2):
        self.procs = list(procs)
        self.interval = interval
        self.peaks: dict[int, int] = {}  # pid -> VmHWM kB
        self.ticks: dict[int, int] = {}  # pid -> utime + stime, clock ticks
        self.roots: dict[int, set[int]] = {p.pid: set() for p in self.procs}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> RssWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._sample()
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        for root in self.roots:
            for pid in _tree(root):
                kb = _hwm_kb(pid)
                if kb:
                    self.roots[root].add(pid)
                    self.peaks[pid] = max(self.peaks.get(pid, 0), kb)
                self.ticks[pid] = max(self.ticks.get(pid, 0), cpu_ticks(pid))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def cpu_seconds(self) -> float:
        """CPU time (user + system) the worker trees used until the last sample."""
        return round(sum(self.ticks.values()) / os.sysconf("SC_CLK_TCK"), 3)

    def peak_mb(self) -> float:
        """The largest worker tree's summed peak RSS, in MB."""
        sums = [sum(self.peaks.get(p, 0) for p in pids) for pids in self.roots.values()]
        return round(max(sums, default=0) / 1024, 1)
