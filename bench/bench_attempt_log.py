"""What keeping an attempt's log lines costs (worker/engine/attempt_log.py): per line
logged, in the handler's thread, and per line written, in the completer's transaction.

    .venv/bin/python bench/bench_attempt_log.py --attempts 2000 --lines 100 --rounds 5
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python bench/bench_attempt_log.py --write

Capture: `--attempts` attempts run the way the runner runs one (the current attempt set,
the handler's body, reset, the lines taken as JSON with the outcome), each logging
`--lines` INFO lines through a `logging` logger whose root has a NullHandler (the
application's own output, the same on both sides), with the AttemptLogHandler installed
(`on`) and without it (`off`), alternating, `--rounds` times. The difference of the
medians over the lines logged is the capture's cost per line: redaction, the cap's
count, the JSON. Lines 0 gives the cost for a handler that logs nothing.

Write (`--write`, needs DATABASE_URL): insert_execution_logs for 100 executions of
`--lines` lines each, in scratch database jw_attempt_log_bench (made and dropped here),
against the same transaction with no lines: the database's cost per line.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from jobwarden.worker.engine import attempt_log  # noqa: E402
from jobwarden.worker.engine.attempt_log import CURRENT, AttemptLog  # noqa: E402

handler_log = logging.getLogger("bench.handler")


class Attempt:
    """The runner's side of an attempt, as attempt_log sees it (ExecutionControl's two
    methods, the same code)."""

    _attempt_log: AttemptLog | None = None
    _log_taken = False

    def attempt_log(self) -> AttemptLog | None:
        if self._attempt_log is None and not self._log_taken:
            self._attempt_log = AttemptLog()
        return self._attempt_log

    def take_log(self) -> tuple[str | None, int]:
        self._log_taken = True
        log = self._attempt_log
        return (None, 0) if log is None else log.take()


def run_attempts(attempts: int, lines: int) -> float:
    """Seconds for `attempts` attempts of `lines` lines each."""
    started = time.perf_counter()
    for n in range(attempts):
        attempt = Attempt()
        token = CURRENT.set(attempt)
        try:
            for i in range(lines):
                handler_log.info("order %d: charged %s in %.1f ms", n, "EUR 12.50", i * 0.5)
        finally:
            CURRENT.reset(token)
        attempt.take_log()
    return time.perf_counter() - started


def capture(args: argparse.Namespace) -> dict[str, float]:
    root = logging.getLogger()
    root.handlers[:] = [logging.NullHandler()]
    root.setLevel(logging.INFO)
    times: dict[str, list[float]] = {"off": [], "on": []}
    for _ in range(args.rounds):
        for side in ("off", "on") if _ % 2 == 0 else ("on", "off"):
            installed = attempt_log.install() if side == "on" else None
            times[side].append(run_attempts(args.attempts, args.lines))
            if installed is not None:
                root.removeHandler(installed)
    off, on = (statistics.median(times[s]) for s in ("off", "on"))
    per_attempt = (on - off) / args.attempts * 1e6
    return {"attempts": args.attempts, "lines_per_attempt": args.lines, "rounds": args.rounds,
            "off_us_per_attempt": round(off / args.attempts * 1e6, 2),
            "on_us_per_attempt": round(on / args.attempts * 1e6, 2),
            "capture_us_per_attempt": round(per_attempt, 2),
            "capture_us_per_line": (round(per_attempt / args.lines, 3) if args.lines
                                    else None)}


def write(args: argparse.Namespace) -> dict[str, float]:
    import psycopg

    from jobwarden.worker.store.queries import Q

    url = os.environ["DATABASE_URL"]
    scratch = "jw_attempt_log_bench"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {scratch}")
        admin.execute(f"CREATE DATABASE {scratch}")
    try:
        with psycopg.connect(url.rsplit("/", 1)[0] + "/" + scratch, autocommit=True) as conn:
            conn.execute("""CREATE TABLE job_execution_logs (
                execution_id uuid PRIMARY KEY, job_id bigint NOT NULL,
                finished_at timestamptz NOT NULL, lines jsonb NOT NULL,
                dropped integer NOT NULL DEFAULT 0);
                CREATE INDEX job_execution_logs_finished_idx
                ON job_execution_logs (finished_at)""")
            attempt = Attempt()
            token = CURRENT.set(attempt)
            logging.getLogger().setLevel(logging.INFO)
            installed = attempt_log.install()
            for i in range(args.lines):
                handler_log.info("order %d: charged %s in %.1f ms", 7, "EUR 12.50", i * 0.5)
            CURRENT.reset(token)
            logging.getLogger().removeHandler(installed)
            lines, _ = attempt.take_log()
            times: dict[str, list[float]] = {"none": [], "lines": []}
            for r in range(args.rounds * 4):
                for side in ("none", "lines") if r % 2 == 0 else ("lines", "none"):
                    started = time.perf_counter()
                    with conn.transaction():
                        conn.execute("SELECT 1")  # the outcome's statement stands in
                        if side == "lines":
                            conn.execute(Q.insert_execution_logs, {
                                "execution_ids": [uuid.uuid4() for _ in range(100)],
                                "job_ids": list(range(100)), "lines": [lines] * 100,
                                "dropped": [0] * 100})
                    times[side].append(time.perf_counter() - started)
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {scratch}")
    per_batch = statistics.median(times["lines"]) - statistics.median(times["none"])
    return {"executions_per_batch": 100, "lines_per_execution": args.lines,
            "json_bytes_per_execution": len((lines or "").encode()),
            "write_us_per_execution": round(per_batch / 100 * 1e6, 1),
            "write_us_per_line": round(per_batch / 100 / max(args.lines, 1) * 1e6, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=2000)
    parser.add_argument("--lines", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="the database's side (DATABASE_URL)")
    args = parser.parse_args()
    print(json.dumps(write(args) if args.write else capture(args)))


if __name__ == "__main__":
    main()
