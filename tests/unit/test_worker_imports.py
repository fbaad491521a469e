"""What a worker process loads before it reaches the database: not the modules that only
other commands or optional features use. Each was milliseconds of every worker's start,
which a drain counts (bench/bench_startup.py measures the start stage by stage).

A fresh interpreter goes the worker's way up to its first connection: it imports the
command line, parses a worker's arguments, loads an app and makes the WorkerProcess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Modules the worker's start leaves unloaded, and who imports them instead.
UNLOADED = {
    # The operator actions: the queue, limits and reconcile commands, and the console.
    "jobwarden.worker.ops.operations": "worker/cli/commands.py, worker/ops/reconcile.py",
    # JSON log lines (--log-format json).
    "pythonjsonlogger": "worker/core/logs.py json_formatter",
    # Tracing: once the application itself has imported the API.
    "opentelemetry.trace": "worker/core/tracing.py in_use",
}

WORKER_START = """
import json, sys
from jobwarden.worker.cli import commands
args = commands.parser_for(sys.argv[1:]).parse_args(sys.argv[1:])
commands.load_app(args.app)
from jobwarden.worker.engine.config import WorkerConfig
from jobwarden.worker.process import WorkerProcess
# A URL that nothing connects to: making the worker opens no connection.
WorkerProcess(commands.registry, WorkerConfig(url="postgresql://nobody@127.0.0.1:1/none",
                                              queues=args.queues))
from jobwarden.worker.core import sanitize
out = {"loaded": sorted(m for m in %r if m in sys.modules),
       "compiled_at_start": sanitize._compiled.cache_info().currsize > 0}
out["redacted"] = sanitize.redact("Authorization: Bearer abc.def")
out["compiled_at_first_use"] = sanitize._compiled.cache_info().currsize > 0
print(json.dumps(out))
"""


def _worker_start(*argv: str) -> dict:
    done = subprocess.run([sys.executable, "-c", WORKER_START % (sorted(UNLOADED),), *argv],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out: dict = json.loads(done.stdout.splitlines()[-1])
    return out


def test_a_worker_start_leaves_other_commands_and_optional_features_unloaded():
    out = _worker_start("--log-level", "WARNING", "worker", "--app", "bench.noop_app")
    assert out["loaded"] == []


def test_an_async_app_in_a_lane_of_its_own_too():
    """The io50ms benchmark's worker: the app imports the public API's enqueue as well."""
    out = _worker_start("worker", "--app", "bench.peers.apps.jobwarden_app",
                        "--queues", "io=500")
    assert out["loaded"] == []


def test_the_redaction_patterns_are_compiled_at_their_first_use_not_at_import():
    out = _worker_start("worker", "--app", "bench.noop_app")
    assert (out["compiled_at_start"], out["compiled_at_first_use"]) == (False, True)
    assert out["redacted"] == "Authorization: [REDACTED]"
