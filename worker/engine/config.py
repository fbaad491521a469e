"""A worker's settings, in one frozen record: what `jobwarden worker`'s options and
`WorkerProcess(...)`'s keywords set (README "Running workers")."""

from __future__ import annotations

from dataclasses import dataclass

from jobwarden.worker.engine.lanes import QueueSpec

#: Defaults that suit typical jobs as well as tiny ones (README "Running workers").
DEFAULT_CONCURRENCY = 10
#: Each claim and each outcome batch is one statement, whose fixed cost (plan nodes,
#: the job table's indexes, the rollup triggers, the commit) its rows share, and a deeper
#: buffer rides out a claim's round trip when the cores are shared: 1000 drains no-op
#: jobs faster than 400, most of all with a core busy, and 1600 or 2500 hardly faster again
#: (docs/benchmarks.md, "Batch sizes"). How far ahead a worker claims still follows its
#: jobs' duration (about 0.1 s of work): only sub-millisecond jobs fill such a buffer, and
#: slow ones are claimed for free slots only.
DEFAULT_CLAIM_BATCH = 1000
DEFAULT_BUFFER_SIZE = 2000
DEFAULT_FLUSH_BATCH = 1000
DEFAULT_FLUSH_INTERVAL = 0.002
#: Two writers: one batch is written while the next is gathered (worker/engine/completer.py).
DEFAULT_FLUSH_WRITERS = 2
MAX_FLUSH_WRITERS = 8  # each holds a connection


@dataclass(frozen=True, kw_only=True)
class WorkerConfig:
    """How one worker process runs. None means "derive it": the URL from DATABASE_URL,
    the heartbeat and recovery intervals from the shortest lease, `max_abandoned` from the
    slots, `worker_id` from host, pid and a random tail."""

    url: str | None = None
    #: Names (sharing `concurrency` slots), "email=4,reports=1,a", or {"email": 4, "a": None}
    #: (worker/engine/lanes.py checks it when the worker is made).
    queues: QueueSpec = None
    concurrency: int = DEFAULT_CONCURRENCY
    grace: float = 30.0  # seconds running jobs get to finish after SIGTERM
    poll_interval: float = 2.0
    heartbeat_interval: float | None = None
    recovery_interval: float | None = None
    timeout_grace: float = 5.0  # seconds a timed-out handler gets to stop
    max_abandoned: int | None = None
    worker_id: str | None = None
    restart_on_abandon: bool = False
    #: The process is the worker's own (the `jobwarden worker` command): as its run begins,
    #: it freezes its start-up objects and collects young ones less often
    #: (worker/engine/heap.py). An application's own process keeps its collector's settings.
    settle_heap: bool = False
    claim_batch: int = DEFAULT_CLAIM_BATCH
    buffer_size: int = DEFAULT_BUFFER_SIZE
    flush_batch: int = DEFAULT_FLUSH_BATCH
    flush_interval: float = DEFAULT_FLUSH_INTERVAL  # seconds
    flush_writers: int = DEFAULT_FLUSH_WRITERS

    def __post_init__(self) -> None:
        if self.claim_batch < 1 or self.flush_batch < 1:
            raise ValueError("claim and flush batches must hold at least 1 job")
        if not 1 <= self.flush_writers <= MAX_FLUSH_WRITERS:
            raise ValueError(f"flush writers must be 1 to {MAX_FLUSH_WRITERS}")
        if self.buffer_size < 0 or self.flush_interval < 0:
            raise ValueError("buffer size and flush interval cannot be negative")
