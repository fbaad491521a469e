"""The `jobwarden` command line: the runtime's commands (docs/architecture.md §7)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import time
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

import psycopg

from jobwarden.worker.cli import args as A
from jobwarden.worker.core.env import LEVELS, SettingsError, load_worker_settings
from jobwarden.worker.core.errors import EnqueueError
from jobwarden.worker.core.logs import FORMATS, configure
from jobwarden.worker.core.rates import describe_rate
from jobwarden.worker.core.states import JobStatus
from jobwarden.worker.core.terminal import printable
from jobwarden.worker.core.version import version
from jobwarden.worker.duties.recovery import mark_gone_workers, recover_stale_running
from jobwarden.worker.duties.retention import count_prunable, prune
from jobwarden.worker.engine import heap, stop_signals
from jobwarden.worker.engine.config import (
    DEFAULT_BUFFER_SIZE,
    DEFAULT_CLAIM_BATCH,
    DEFAULT_CONCURRENCY,
    DEFAULT_FLUSH_BATCH,
    DEFAULT_FLUSH_INTERVAL,
    DEFAULT_FLUSH_WRITERS,
    WorkerConfig,
)
from jobwarden.worker.jobs.enqueue import enqueue
from jobwarden.worker.jobs.registry import registry
from jobwarden.worker.ops.reconcile import reconcilable_types, reconcile
from jobwarden.worker.process import WorkerProcess
from jobwarden.worker.store.db import (
    DatabaseUrlError,
    SchemaOutOfDate,
    check_database_schema,
    code_heads,
    code_revisions,
    connect,
    database_revisions,
    migrate,
)
from jobwarden.worker.store.embedded import stop_embedded
from jobwarden.worker.store.jobstore import JobStore
from jobwarden.worker.store.queries import Q

if TYPE_CHECKING:
    from jobwarden.worker.ops.operations import ActionResult


#: A module's dotted name, as `--app` takes it.
DOTTED_NAME = re.compile(r"[^\W\d]\w*(\.[^\W\d]\w*)*")


def load_app(module: str) -> None:
    """Import the module that registers the job handlers (from the cwd or PYTHONPATH)."""
    if not DOTTED_NAME.fullmatch(module):  # a path or a blank: import_module's own errors
        raise SystemExit(f"jobwarden: {module[:200]!r} is not a module name: give the "
                         "app's dotted name, such as shop or myapp.jobs")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise SystemExit(f"jobwarden: cannot import app module {module!r}: {exc}") from exc


def cmd_migrate(args: argparse.Namespace) -> int:
    with connect(connect_timeout=10) as conn:
        newer = database_revisions(conn) - code_revisions().keys()
    if newer:
        # A rollback's deploy runs the older release's migrate: the schema is ahead of it,
        # which its workers run on with a warning (check_schema), so there is nothing to do.
        print(f"jobwarden: the database is at revision {', '.join(sorted(newer))}, which "
              f"this Jobwarden ({', '.join(sorted(code_heads()))}) does not know: a newer "
              "Jobwarden migrated it; nothing migrated", file=sys.stderr)
        return 0
    from alembic.util import CommandError  # only when migrating, as in db.migrate()

    try:
        migrate()
    except CommandError as exc:
        raise SystemExit(f"jobwarden migrate: {exc}") from None
    print("database migrated to head")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    load_app(args.app)
    try:
        config = WorkerConfig(queues=args.queues, concurrency=args.concurrency,
                              grace=args.grace, poll_interval=args.poll_interval,
                              timeout_grace=args.timeout_grace,
                              max_abandoned=args.max_abandoned, restart_on_abandon=True,
                              settle_heap=True,
                              claim_batch=args.claim_batch, buffer_size=args.buffer,
                              flush_batch=args.flush_batch,
                              flush_writers=args.flush_writers,
                              flush_interval=args.flush_interval / 1000)
        worker = WorkerProcess(registry, config)
    except (DatabaseUrlError, SettingsError):
        raise  # main says it as every command does
    except ValueError as exc:
        raise SystemExit(f"jobwarden worker: {exc}") from None
    return worker.run()


def cmd_enqueue(args: argparse.Namespace) -> int:
    payload = args.payload  # parsed and checked by cli_args.json_object
    if args.app:
        load_app(args.app)
    try:
        with connect() as conn:
            job_id = enqueue(conn, args.type, payload, queue=args.queue,
                             delay=args.delay, priority=args.priority,
                             idempotency_key=args.idempotency_key,
                             max_attempts=args.max_attempts)
    except EnqueueError as exc:
        print(f"jobwarden enqueue: {printable(exc)}", file=sys.stderr)
        return 2
    print(job_id)
    return 0


def cmd_recover(args: argparse.Namespace) -> int:
    if args.app:
        load_app(args.app)
    with connect() as conn:
        counts = recover_stale_running(conn, registry)
        gone = mark_gone_workers(conn, stale_after=args.worker_stale_after)
    print(json.dumps({"recovered": counts, "workers_gone": gone}))
    return 0


RECONCILE_ACTIONS = {"completed": "mark_completed", "failed": "mark_failed",
                     "retry": "retry", "skip": "skip"}


def _actor(args: argparse.Namespace) -> str:
    return args.actor or f"cli:{os.environ.get('USER') or 'unknown'}"


def cmd_reconcile(args: argparse.Namespace) -> int:
    if args.auto:
        return _reconcile_auto(args)
    if args.job is not None:
        if not args.mark or not args.reason:
            print("jobwarden reconcile: give --as and --reason with a job id", file=sys.stderr)
            return 2
        # The operator actions are imported by the commands that take them, not by every
        # command: the worker would load them for nothing (tests/unit/test_worker_imports.py).
        from jobwarden.worker.ops.operations import JOB_ACTIONS

        expected: dict[str, Any] = (
            {"expected_status": "unknown"} if args.mark in ("retry", "skip") else {})
        with connect() as conn:
            state = JobStore(conn).first(Q.operator_job_state, {"job_id": args.job})
            if expected and state is not None and state[1] != "unknown":
                # Said here: the action's own refusal speaks of a status seen on a page.
                print(f"jobwarden reconcile: job #{args.job} is {state[1]}, not unknown: "
                      "reconcile settles unknown jobs only; nothing was changed",
                      file=sys.stderr)
                return 1
            result = JOB_ACTIONS[RECONCILE_ACTIONS[args.mark]](
                conn, args.job, actor=_actor(args), role="admin", reason=args.reason,
                **expected)
        print(printable(result.message))
        return 0 if result.ok else 1
    with connect() as conn:
        rows = JobStore(conn).rows(Q.unknown_jobs, {"limit": args.limit})
    if not rows:
        print("no jobs need reconciliation")
        return 0
    print(f"{len(rows)} job(s) in 'unknown' — check the external system, then retry or skip "
          "each from the console (Needs review) or with `jobwarden reconcile ID --as "
          "completed|failed|retry|skip --reason ...`:")
    for id_, type_, queue, attempts, code, error, worker_id, hb in rows:
        p = printable
        print(f"  #{id_} {p(type_)} queue={p(queue)} attempts={attempts} worker={p(worker_id)} "
              f"last heartbeat={hb} {p(code)}: {p(error)}")
    return 0


def _reconcile_auto(args: argparse.Namespace) -> int:
    if not args.app:
        print("jobwarden reconcile --auto: give --app, the module whose job types declare "
              "reconcilers", file=sys.stderr)
        return 2
    load_app(args.app)
    if not reconcilable_types(registry):
        print(f"jobwarden reconcile --auto: no job type in {args.app} declares a reconciler",
              file=sys.stderr)
        return 2
    with connect() as conn:
        verdicts = reconcile(conn, registry, actor=_actor(args), job_id=args.job,
                             limit=args.limit)
    print(f"reconciled: {len(verdicts['done'])} done (marked completed), "
          f"{len(verdicts['not_done'])} not done (retried), "
          f"{len(verdicts['unknown'])} still unknown")
    return 0


def cmd_queue(args: argparse.Namespace) -> int:
    # Imported here, as in cmd_reconcile: the worker never takes these actions.
    from jobwarden.worker.ops.operations import queue_controls, set_all_queues

    with connect() as conn:
        if args.queue_command == "list":
            controls = queue_controls(conn)
            if not controls:
                print("no queue has been paused")
            for name, row in controls.items():
                state = "paused" if row["paused"] else "active"
                print(f"{printable(name):<20} {state:<7} by {printable(row['changed_by'])} "
                      f"at {row['changed_at']:%F %T}")
            return 0
        if args.all == bool(args.name):
            print(f"jobwarden queue {args.queue_command}: give a queue name or --all",
                  file=sys.stderr)
            return 2
        try:
            if args.all:
                results = set_all_queues(conn, args.queue_command, actor=_actor(args),
                                         role="admin", reason=args.reason)
            else:
                results = [_queue_action(conn, args)]
        except ValueError as exc:
            print(f"jobwarden queue: {printable(exc)}", file=sys.stderr)
            return 2
    for result in results:
        print(printable(result.message))
    if args.all:
        changed = sum(r.ok for r in results)
        print(f"{changed} queue(s) {args.queue_command}d, {len(results) - changed} unchanged")
        return 0
    return 0 if results[0].ok else 1


def cmd_limits(args: argparse.Namespace) -> int:
    """`jobwarden limits list|set|clear`: the live limits of queues and types (audited)."""
    # Imported here, as in cmd_reconcile: the worker never takes these actions.
    from jobwarden.worker.ops.operations import (
        UnknownQueue,
        UnknownType,
        clear_limit,
        live_limits,
        set_limit,
    )

    with connect() as conn:
        if args.limits_command == "list":
            rows = live_limits(conn)
            if not rows:
                print("no live limit is set (declared rate limits hold)")
            for r in rows:
                parts = []
                if r["max_concurrency"] is not None:
                    parts.append(f"max {r['max_concurrency']} at once")
                if r["rate"] is not None:
                    burst = f" burst {r['burst']:g}" if r["burst"] is not None else ""
                    parts.append(f"{describe_rate(r['rate'])}{burst}")
                print(f"{r['scope']:<5} {printable(r['name']):<24} {', '.join(parts):<28} "
                      f"by {printable(r['set_by'])} at {r['set_at']:%F %T}: "
                      f"{printable(r['reason'])}")
            return 0
        scope, name = ("queue", args.queue) if args.queue else ("type", args.type)
        try:
            if args.limits_command == "set":
                result = set_limit(conn, scope, name, actor=_actor(args), role="admin",
                                   reason=args.reason, max_concurrency=args.max_concurrency,
                                   rate=args.rate, burst=args.burst, new=args.new)
            else:
                result = clear_limit(conn, scope, name, actor=_actor(args), role="admin",
                                     reason=args.reason)
        except (UnknownQueue, UnknownType) as exc:  # as `queue pause` refuses it
            print(f"jobwarden limits: {printable(exc)}; nothing was changed (--new limits "
                  "it before its first job)", file=sys.stderr)
            return 1
        except ValueError as exc:
            print(f"jobwarden limits: {printable(exc)}", file=sys.stderr)
            return 2
    print(printable(result.message))
    return 0 if result.ok else 1


def _queue_action(conn: psycopg.Connection, args: argparse.Namespace) -> ActionResult:
    """`jobwarden queue pause|resume NAME`: one queue's action."""
    # Imported here, as in cmd_reconcile: the worker never takes these actions.
    from jobwarden.worker.ops.operations import pause_queue, resume_queue

    if args.queue_command == "pause":
        return pause_queue(conn, args.name, actor=_actor(args), role="admin",
                           reason=args.reason, new=args.new)
    return resume_queue(conn, args.name, actor=_actor(args), role="admin", reason=args.reason)


def cmd_prune(args: argparse.Namespace) -> int:
    statuses = ["completed", "skipped", "cancelled"] + (["failed"] if args.include_failed else [])
    age = _age_text(args.older_than)
    with connect() as conn:
        counted_at = time.monotonic()
        counts = count_prunable(conn, statuses, args.older_than)
        conn.rollback()  # no transaction stays open while the operator decides
        total = sum(counts.values())
        print(f"finished more than {age} ago: "
              + ", ".join(f"{status}={n}" for status, n in counts.items()), flush=True)
        if not total:
            print("nothing to prune")
            return 0
        if not args.yes:
            if not sys.stdin.isatty():
                print("jobwarden prune: deleting needs confirmation and standard input is "
                      "not a terminal: pass --yes to delete them", file=sys.stderr)
                return 2
            try:
                answer = input(f"delete these {total} job(s)? [y/N] ")
            except EOFError:
                answer = ""
            if answer.strip().lower() not in ("y", "yes"):
                print("nothing deleted")
                return 1
        # The cutoff the operator saw, not one that moved on while they decided.
        deleted = prune(conn, statuses, args.older_than + time.monotonic() - counted_at)
        print(f"pruned {sum(deleted.values())} job(s) in {statuses} older than {age}")
    return 0


def _age_text(seconds: float) -> str:
    """7d, 12h, 30m or 90s: an age as an operator would write it."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def cmd_stats(args: argparse.Namespace) -> int:
    with connect() as conn:
        rows = JobStore(conn).rows(Q.stats_by_status)
        ages = JobStore(conn).rows(Q.oldest_pending_age)
    totals: dict[str, int] = {}
    for status, _q, _t, n in rows:
        totals[status] = totals.get(status, 0) + n
    if args.json:
        print(json.dumps({
            "by_status": totals,
            "by_status_queue_type": [dict(status=s, queue=q, type=t, count=n)
                                     for s, q, t, n in rows],
            "oldest_pending_age_seconds": {q: float(a) for q, a, _n in ages},
        }))
        return 0
    print("status      count")
    for status in JobStatus:
        print(f"{status:<11} {totals.get(status, 0)}")
    print("\nstatus      queue        type                 count")
    for status, queue, type_, n in rows:
        print(f"{status:<11} {printable(queue):<12} {printable(type_):<20} {n}")
    print("\noldest runnable pending job per queue:")
    if not ages:
        print("  none: no job is waiting to run")
    for queue, age, n in ages:
        print(f"  {printable(queue)}: {float(age):.1f}s ({n} runnable)")
    return 0


def cmd_embedded_stop(args: argparse.Namespace) -> int:
    print(stop_embedded())
    return 0


class CommandParser(argparse.ArgumentParser):
    """The `jobwarden` parser, which knows which sub-commands are the runtime's own."""

    runtime_commands: frozenset[str] = frozenset()


def build_parser(contributed: bool = True) -> CommandParser:
    """The command line; `contributed=False` leaves out other packages' sub-commands."""
    p = CommandParser(
        prog="jobwarden",
        description="Jobwarden: PostgreSQL background jobs with an operations console. "
                    "DATABASE_URL selects the database; without it, an embedded PostgreSQL "
                    "under JOBWARDEN_HOME (default ./.jobwarden) is used.")
    p.add_argument("--version", action="version", version=f"jobwarden {version()}")
    p.add_argument("--log-level", type=str.upper, choices=LEVELS, metavar="LEVEL",
                   help=f"{', '.join(LEVELS)} (default JOBWARDEN_LOG_LEVEL, else INFO; "
                        "WARNING for the demo)")
    p.add_argument("--log-format", choices=FORMATS,
                   help="text or json: one JSON object per line with a stable `action` "
                        "per lifecycle event (default JOBWARDEN_LOG_FORMAT, else text)")
    # The sub-commands' parsers stay plain ArgumentParsers (only the top one knows them).
    sub = p.add_subparsers(dest="command", required=True,
                           parser_class=argparse.ArgumentParser)

    # A command with `checks_schema` is refused on a database behind the code, before it
    # runs (main); the worker checks when it reaches the database (WorkerProcess.run),
    # the console when its app is made (jobwarden.console.create_app).
    sub.add_parser("migrate", help="apply database migrations").set_defaults(fn=cmd_migrate)

    w = sub.add_parser("worker", help="run a worker process")
    w.add_argument("--app", required=True, help="module that registers the job handlers")
    w.add_argument("--queues", type=A.queue_spec, metavar="QUEUE[=N],...",
                   help="the queues to serve: NAME=N gives a queue N slots of its own that "
                        "no other queue takes; plain names (or *: every queue not given "
                        "=N) share the --concurrency slots (default: every queue), e.g. "
                        "email=4,reports=1,*")
    w.add_argument("--concurrency", type=A.concurrency, default=DEFAULT_CONCURRENCY,
                   help="handler threads shared by every queue, or by the plain --queues "
                        f"names (default {DEFAULT_CONCURRENCY})")
    w.add_argument("--grace", type=A.wait_seconds, default=30.0,
                   help="how long running jobs get to finish after SIGTERM (a duration: 30, "
                        "30s, 2m; default 30s)")
    w.add_argument("--poll-interval", type=A.poll_seconds, default=2.0,
                   help="how long between polls when no notification arrives (default 2s)")
    w.add_argument("--timeout-grace", type=A.wait_seconds, default=5.0,
                   help="how long a timed-out handler gets to stop before it is abandoned "
                        "(at most its own timeout; default 5s)")
    w.add_argument("--max-abandoned", type=A.abandoned, default=None,
                   help="abandoned handler threads tolerated before the worker restarts "
                        "itself (default: the slots of all lanes together)")
    w.add_argument("--claim-batch", type=A.batch, default=DEFAULT_CLAIM_BATCH,
                   help=f"most jobs one claim takes (default {DEFAULT_CLAIM_BATCH})")
    w.add_argument("--buffer", type=A.buffer, default=DEFAULT_BUFFER_SIZE,
                   help="most claimed jobs waiting for a free slot; fewer when jobs are "
                        f"slow (about 0.1 s of work) (default {DEFAULT_BUFFER_SIZE})")
    w.add_argument("--flush-batch", type=A.batch, default=DEFAULT_FLUSH_BATCH,
                   help=f"most outcomes written per statement (default {DEFAULT_FLUSH_BATCH})")
    w.add_argument("--flush-writers", type=A.writers, default=DEFAULT_FLUSH_WRITERS,
                   help="threads writing outcome batches, each on its own connection "
                        f"(default {DEFAULT_FLUSH_WRITERS})")
    w.add_argument("--flush-interval", type=A.flush_ms, default=DEFAULT_FLUSH_INTERVAL * 1000,
                   help="milliseconds an outcome may wait for its batch "
                        f"(default {DEFAULT_FLUSH_INTERVAL * 1000:g})")
    w.set_defaults(fn=cmd_worker, settles_heap=True)

    e = sub.add_parser("enqueue", help="enqueue one job")
    e.add_argument("type")
    e.add_argument("--payload", type=A.json_object, default={}, help="a JSON object")
    e.add_argument("--queue")
    e.add_argument("--delay", type=A.delay, help="e.g. 30, 30s, 5m")
    e.add_argument("--priority", type=A.priority, default=0)
    e.add_argument("--idempotency-key", type=A.key)
    e.add_argument("--max-attempts", type=A.max_attempts)
    e.add_argument("--app", help="module registering handlers, to validate typed payloads "
                                 "(queue and attempts follow the published policy without it)")
    e.set_defaults(fn=cmd_enqueue, checks_schema=True)

    r = sub.add_parser("recover", help="one recovery pass over lost executions")
    r.add_argument("--app", help="module registering handlers (for their retry policies)")
    r.add_argument("--worker-stale-after", type=A.age, default=60.0,
                   help="mark workers without a heartbeat for this long as gone")
    r.set_defaults(fn=cmd_recover, checks_schema=True)

    rc = sub.add_parser("reconcile", help="list jobs whose outcome is unknown, or settle one "
                                          "after checking the external system (audited)")
    rc.add_argument("job", nargs="?", type=A.job_id, help="the unknown job to settle")
    rc.add_argument("--as", dest="mark", choices=sorted(RECONCILE_ACTIONS),
                    help="completed/failed: what the external system shows; retry: run it "
                         "again; skip: no longer needed")
    rc.add_argument("--reason", help="what you checked (goes to the audit log)")
    rc.add_argument("--actor", help="who (default: cli:$USER)")
    rc.add_argument("--limit", type=A.list_limit, default=100)
    rc.add_argument("--auto", action="store_true",
                    help="run the reconcilers the job types of --app declare (audited)")
    rc.add_argument("--app", help="with --auto: the module registering the handlers")
    rc.set_defaults(fn=cmd_reconcile, checks_schema=True)

    qp = sub.add_parser("queue", help="pause, resume and list queues (audited)")
    qp.set_defaults(checks_schema=True)
    qsub = qp.add_subparsers(dest="queue_command", required=True)
    qsub.add_parser("list", help="queues that were paused or resumed").set_defaults(fn=cmd_queue)
    for verb, text in (("pause", "stop claiming the queue's jobs (running ones finish)"),
                       ("resume", "claim the queue's jobs again")):
        q = qsub.add_parser(verb, help=text)
        q.add_argument("name", nargs="?",
                       help="a queue the database knows: one that a job (of any status), a "
                            "published job type, a running worker's --queues or an earlier "
                            "pause names; any other name is refused, as a likely typo")
        q.add_argument("--all", action="store_true",
                       help="every queue the database knows (e.g. after restoring a backup)")
        if verb == "pause":
            q.add_argument("--new", action="store_true",
                           help="pause NAME even though nothing names it yet (e.g. before "
                                "its job type is first deployed)")
        q.add_argument("--reason", required=True, help="why (goes to the audit log)")
        q.add_argument("--actor", help="who (default: cli:$USER)")
        q.set_defaults(fn=cmd_queue)

    lp = sub.add_parser("limits", help="set, clear and list live limits of queues and job "
                                       "types: maximum concurrency and rate (audited)")
    lp.set_defaults(checks_schema=True)
    lsub = lp.add_subparsers(dest="limits_command", required=True)
    lsub.add_parser("list", help="the live limits, who set them, when and why"
                    ).set_defaults(fn=cmd_limits)
    for verb, text in (("set", "set (or replace) a live limit; workers apply it within "
                               "seconds"),
                       ("clear", "clear a live limit: the declared one holds again")):
        lm = lsub.add_parser(verb, help=text)
        target = lm.add_mutually_exclusive_group(required=True)
        target.add_argument("--queue", help="a queue's limit")
        target.add_argument("--type", help="a job type's limit")
        if verb == "set":
            lm.add_argument("--max-concurrency", type=int,
                            help="at most this many of its jobs claimed or running at once "
                                 "across all workers (0 holds them)")
            lm.add_argument("--rate", help="at most this many claims per second or minute "
                                           "across all workers: 100/s, 600/m, 50/h")
            lm.add_argument("--burst", type=int,
                            help="the rate's bucket: most jobs claimed at once after a quiet "
                                 "spell (default: one second's worth)")
            lm.add_argument("--new", action="store_true",
                            help="limit a queue or a job type even though nothing names "
                                 "it yet (e.g. before its job type is first deployed); any "
                                 "other unknown queue or type is refused, as a likely typo")
        lm.add_argument("--reason", required=True, help="why (goes to the audit log)")
        lm.add_argument("--actor", help="who (default: cli:$USER)")
        lm.set_defaults(fn=cmd_limits)

    pr = sub.add_parser("prune", help="delete old finished jobs (retention), after showing "
                                      "how many of each status and asking")
    pr.add_argument("--older-than", type=A.prune_age, default=7 * 86400.0,
                    help="an age with its unit: 7d, 12h, 30m or 90s (a bare number is "
                         "refused; default 7d)")
    pr.add_argument("--include-failed", action="store_true")
    pr.add_argument("--yes", action="store_true",
                    help="delete without asking (needed when standard input is not a "
                         "terminal, e.g. in cron)")
    pr.set_defaults(fn=cmd_prune, checks_schema=True)

    s = sub.add_parser("stats", help="counts by status, queue and type; oldest pending age")
    s.add_argument("--json", action="store_true")
    s.set_defaults(fn=cmd_stats, checks_schema=True)

    em = sub.add_parser("embedded", help="the embedded PostgreSQL under JOBWARDEN_HOME "
                                         "(used when DATABASE_URL is not set)")
    esub = em.add_subparsers(dest="embedded_command", required=True)
    esub.add_parser("stop", help="stop it (it keeps running after every command, the demo "
                                 "included, so the next one starts fast)"
                    ).set_defaults(fn=cmd_embedded_stop)
    p.runtime_commands = frozenset(sub.choices)
    if contributed:
        add_contributed_commands(sub)
    return p


#: Entry-point group through which other packages add sub-commands: each entry point is a
#: function taking argparse's sub-parsers (the console adds `console`, `user`, `demo`).
COMMANDS_GROUP = "jobwarden.commands"


def add_contributed_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Let installed packages add their sub-commands, so the runtime never imports them."""
    for entry in sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        try:
            register = entry.load()
        except Exception as exc:  # noqa: BLE001  (a broken package, whatever it raises)
            # Said, not skipped in silence: its commands would vanish from --help with
            # nothing to tell why. The runtime's own commands and the others still work.
            print(f"jobwarden: the sub-commands of entry point {entry.name!r} "
                  f"({entry.value}) are left out: {type(exc).__name__}: "
                  f"{' '.join(str(exc).split())}", file=sys.stderr)
            continue
        register(sub)


def parser_for(argv: list[str]) -> CommandParser:
    """The parser that reads argv. One of the runtime's own commands is parsed without
    the contributed ones: loading the console's would import Flask and its web stack into
    every worker process (about 20 MB more resident memory, for nothing). The runtime's
    parser, built to tell, is the one returned then (building it takes milliseconds of
    a worker's start)."""
    runtime = build_parser(contributed=False)
    top = argparse.ArgumentParser(add_help=False)
    top.add_argument("--log-level")
    top.add_argument("--log-format")
    top.add_argument("command", nargs="?")
    command = top.parse_known_args(argv)[0].command
    return runtime if command in runtime.runtime_commands else build_parser()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser_for(argv).parse_args(argv)
    if not getattr(args, "settles_heap", False):
        # The collector the `jobwarden` command held while the modules loaded
        # (jobwarden/command.py) runs again: only a worker holds it until it settles.
        # So do SIGTERM and SIGINT: only a worker takes a stop recorded while it loaded.
        heap.release()
        stop_signals.release()
    try:
        # Every JOBWARDEN_* variable, checked before the command does anything.
        settings = load_worker_settings()
    except SettingsError as exc:
        print(f"jobwarden: {exc}", file=sys.stderr)
        return 2
    # A command may choose a quieter default (the demo prints its own story).
    level: str = (args.log_level or settings.log_level
                  or str(getattr(args, "default_log_level", "INFO")))
    configure(level, args.log_format or settings.log_format)
    try:
        if getattr(args, "checks_schema", False):
            # Once, at the command's start: behind the code, SchemaOutOfDate refuses it.
            newer = check_database_schema()
            if newer:
                print(f"jobwarden: {newer}", file=sys.stderr)
        code: int = args.fn(args)  # the sub-command's exit status
        sys.stdout.flush()  # here, where a reader gone is caught below, not at exit
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`jobwarden stats | head`): stop quietly, as `cat` does.
        # stdout is pointed at /dev/null so the interpreter's own flush at exit cannot
        # raise the same error again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, what a shell reports for a writer the pipe ended
    except (DatabaseUrlError, SettingsError) as exc:  # raised before anything connected
        print(f"jobwarden: {exc}", file=sys.stderr)
        return 2
    except SchemaOutOfDate as exc:  # raised before anything was written
        print(f"jobwarden: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # a clear one-line error, not a traceback, for operators
        cause: BaseException | None = exc
        # SQLAlchemy (under `migrate`'s Alembic), user_add and friends wrap the driver's
        # error: the driver's own is the one that says what happened.
        while cause is not None:
            if isinstance(cause, psycopg.OperationalError):
                # libpq adds a tab-indented hint on a line of its own: one line, for logs.
                print(f"jobwarden: cannot reach the database: {' '.join(str(cause).split())}",
                      file=sys.stderr)
                return 1
            if isinstance(cause, psycopg.errors.InsufficientPrivilege):
                print(f"jobwarden: the database refused it: {str(cause).splitlines()[0]}",
                      file=sys.stderr)
                return 1
            if isinstance(cause, psycopg.errors.UndefinedTable):
                print("jobwarden: the database has no Jobwarden tables yet: run "
                      "`jobwarden migrate` first", file=sys.stderr)
                return 1
            cause = cause.__cause__
        raise


if __name__ == "__main__":
    sys.exit(main())
