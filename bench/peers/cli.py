"""`python -m bench.peers`: every scenario for every system, alternating, N rounds; prints
one table and writes every raw figure to JSON."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import statistics
import sys
import time
import traceback

from bench.peers import contention, procs, report, walstats
from bench.peers.dbutil import PEER_STATS, machine, server_settings
from bench.peers.scenarios import (
    BUSY,
    DEFAULT_SCENARIOS,
    SCENARIOS,
    Sizes,
    drop_templates,
    run,
)
from bench.peers.systems import ROOT, NotMeasured, SystemFailed, all_systems, prepare

QUICK = Sizes(jobs=2_000, sleep_jobs=400, io_jobs=3_000, latency_jobs=30, backlog=4_000,
              limit_seconds=5.0, drain_timeout=20.0, backlog_timeout=20.0, poll=0.1)


def parse(argv: list[str] | None) -> argparse.Namespace:
    names = [s.name for s in all_systems()]
    ap = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__)
    ap.add_argument("--quick", action="store_true",
                    help="small sizes, one round (~3 minutes for all systems)")
    ap.add_argument("--rounds", type=int, help="rounds, systems alternating (default 2)")
    ap.add_argument("--jobs", type=int, help="jobs for bulk enqueue and the no-op drains")
    ap.add_argument("--backlog", type=int, help="jobs in the backlog scenario")
    ap.add_argument("--sleep-jobs", type=int, help="jobs in the 10 ms scenario")
    ap.add_argument("--sleep-concurrency", type=int, help="concurrency for the 10 ms jobs")
    ap.add_argument("--io-jobs", type=int, help="jobs in the 50 ms async I/O scenario")
    ap.add_argument("--io-concurrency", type=int,
                    help="jobs in flight in the 50 ms async I/O scenario (default 500)")
    ap.add_argument("--latency-jobs", type=int, help="jobs in the latency scenario")
    ap.add_argument("--latency-rate", type=float, help="jobs per second in the latency scenario")
    ap.add_argument("--limit-rate", type=float,
                    help="the ratelimit scenario's limit, jobs/s across processes (200)")
    ap.add_argument("--limit-seconds", type=float,
                    help="the ratelimit scenario's backlog, in seconds of work at the limit (20)")
    ap.add_argument("--limit-workers", type=int,
                    help="worker processes in the ratelimit scenario (3)")
    ap.add_argument("--drain-timeout", type=float,
                    help="safety timeout of a drain, seconds (default 600)")
    ap.add_argument("--backlog-timeout", type=float,
                    help="safety timeout of the backlog, seconds (default 900)")
    ap.add_argument("--peer-stats", choices=PEER_STATS, default="analyzed",
                    help="analyzed (default): ANALYZE each peer's tables after the load, "
                         "before its workers start, as autovacuum would; none: as shipped, "
                         "never analyzed. Jobwarden's tables are never analyzed")
    ap.add_argument("--only", help=f"comma-separated scenarios: {','.join(SCENARIOS)} "
                                   f"(default: all but wal)")
    ap.add_argument("--systems", help=f"comma-separated systems: {','.join(names)}")
    ap.add_argument("--json", help="where to write the raw figures "
                                   "(default bench/results/peers-DATE.json)")
    args = ap.parse_args(argv)
    args.scenarios = _pick(args.only, SCENARIOS, "scenario") if args.only \
        else list(DEFAULT_SCENARIOS)
    args.system_names = _pick(args.systems, names, "system")
    return args


def _pick(value: str | None, allowed, what: str) -> list[str]:
    if not value:
        return list(allowed)
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in allowed]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)} (known: {', '.join(allowed)})")
    return [v for v in allowed if v in chosen]


def sizes_from(args: argparse.Namespace) -> Sizes:
    sizes = Sizes(**vars(QUICK)) if args.quick else Sizes()
    for name in ("jobs", "backlog", "sleep_jobs", "sleep_concurrency", "io_jobs",
                 "io_concurrency", "latency_jobs", "latency_rate", "limit_rate",
                 "limit_seconds", "limit_workers", "drain_timeout", "backlog_timeout"):
        if getattr(args, name) is not None:
            setattr(sizes, name, getattr(args, name))
    return sizes


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    sizes = sizes_from(args)
    rounds = args.rounds or (1 if args.quick else 2)
    server = os.environ.get("DATABASE_URL")
    if not server:
        print("DATABASE_URL must name the PostgreSQL server to measure on", file=sys.stderr)
        return 2
    # A background run ignores SIGINT and dies silently on SIGTERM: make both unwind
    # through `finally`, so the workers it started are stopped.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    host = machine()  # before the run: its load average is the one the run started in
    systems = [s for s in all_systems() if s.name in args.system_names]
    results: dict[str, dict[str, list[dict]]] = {s.name: {} for s in systems}
    unavailable: dict[str, str] = {}
    for system in systems:
        try:
            prepare(system)
        except SystemFailed as exc:
            unavailable[system.name] = str(exc)
            print(f"{system.name}: failed: {exc}", flush=True)
    try:
        for r in range(rounds):
            # Alternate: each round runs the systems in the opposite order to the last.
            order = systems if r % 2 == 0 else systems[::-1]
            for scenario in args.scenarios:
                for system in order:
                    if scenario == "ceiling" and system.name != "jobwarden":
                        continue
                    runs = results[system.name].setdefault(scenario, [])
                    if scenario == "ratelimit" and system.no_rate_limit:
                        # Not run whether or not the system could run here: say why.
                        runs.append({"not_measured": system.no_rate_limit, "round": r + 1})
                        continue
                    if system.name in unavailable:
                        runs.append({"failed": unavailable[system.name]})
                        continue
                    t = time.monotonic()
                    if scenario == "enqueue" and "drain1" in args.scenarios:
                        continue  # measured as drain1's set-up, in drain1's fresh database
                    try:
                        figures = run(scenario, system, server, sizes, args.peer_stats)
                    except NotMeasured as exc:
                        figures = {"not_measured": str(exc)}
                    except SystemFailed as exc:
                        figures = {"failed": str(exc)}
                    except Exception as exc:  # one system's bug must not end the run
                        figures = {"failed": f"{type(exc).__name__}: {exc}",
                                   "traceback": traceback.format_exc()}
                    figures["round"] = r + 1
                    runs.append(figures)
                    if scenario == "drain1" and "enqueue" in args.scenarios \
                            and "enqueue_seconds" in figures:
                        seconds = figures["enqueue_seconds"]
                        results[system.name].setdefault("enqueue", []).append(
                            {"jobs": sizes.jobs, "seconds": seconds, "round": r + 1,
                             "jobs_per_s": round(sizes.jobs / seconds, 1)})
                    elif scenario == "drain1" and "enqueue" in args.scenarios:
                        results[system.name].setdefault("enqueue", []).append(
                            {"failed": figures.get("failed", "no figure"), "round": r + 1})
                    shown = {k: v for k, v in figures.items()
                             if k != "traceback" and not isinstance(v, dict)}
                    print(f"round {r + 1} {scenario:10} {system.name:14} "
                          f"{time.monotonic() - t:6.1f}s {json.dumps(shown)}", flush=True)
                    if figures.get("timed_out"):
                        print(f"WARNING: {system.name} {scenario} hit the safety timeout "
                              f"({figures.get('timeout_s', '?')} s): its figure is the rate "
                              f"over the {figures.get('done')} jobs done by then", flush=True)
    finally:
        procs.stop_all()
        drop_templates()
    names = [s.name for s in systems]
    text = report.table(results, names, args.scenarios)
    details = [walstats.detail(name, run_) for name in names
               for run_ in results[name].get("wal", []) if "total" in run_]
    out = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "server": server_settings(server),
        "machine": host,
        "sizes": vars(sizes), "rounds": rounds, "scenarios": args.scenarios,
        "peer_stats": args.peer_stats,
        # What "one core busy" was, when a *_busy scenario ran (bench/peers/contention.py).
        "contention_load": contention.describe(contention.busy_cpu())
        if set(BUSY) & set(args.scenarios) else None,
        "systems": {s.name: {"version": s.version, "settings": s.settings,
                             "failed": unavailable.get(s.name)} for s in systems},
        "results": results,
        "table": text,
        "wal_details": details,
        "wall_seconds": round(time.monotonic() - started, 1),
    }
    out["summary"] = _summary(results)
    path = args.json or os.path.join(
        ROOT, "bench", "results", f"peers-{dt.datetime.now():%Y%m%d-%H%M%S}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print()
    print(text)
    for block in details:
        print()
        print(block)
    print()
    for line in _summary_lines(out):
        print(line)
    print(f"raw figures: {path}")
    return 0


def _median(results: dict, system: str, scenario: str, figure: str) -> float | None:
    values = [r[figure] for r in results.get(system, {}).get(scenario, [])
              if r.get(figure) is not None]
    return statistics.median(values) if values else None


def _summary(results: dict) -> dict:
    drain = _median(results, "jobwarden", "drain1", "jobs_per_s")
    top = _median(results, "jobwarden", "ceiling", "jobs_per_s")
    return {"jobwarden_drain1_share_of_ceiling": round(drain / top, 3) if drain and top
            else None}


def _summary_lines(out: dict) -> list[str]:
    s, srv, m = out["summary"], out["server"], out["machine"]
    lines = [f"{out['date']}; PostgreSQL {srv['server_version']}, shared_buffers "
             f"{srv['shared_buffers']}, autovacuum {srv['autovacuum']}, synchronous_commit "
             f"{srv['synchronous_commit']}, fsync {srv['fsync']}; {m['nproc']} cores ({m['cpu']}), "
             f"{m['memory_gb']} GB; {out['rounds']} round(s) in {out['wall_seconds']:.0f}s",
             "peers' tables: " + ("ANALYZEd after the load, before their workers start"
                                  if out["peer_stats"] == "analyzed" else
                                  "never analyzed (as shipped)")
             + "; Jobwarden's: never analyzed"]
    if out["contention_load"]:
        lines.append(f"one core busy: {out['contention_load']}")
    if s["jobwarden_drain1_share_of_ceiling"] is not None:
        lines.append(f"Jobwarden's 1-process drain is {s['jobwarden_drain1_share_of_ceiling']:.1%}"
                     " of the raw SQL ceiling")
    lines.append("ratios are of the medians: above 1 Jobwarden is ahead in jobs/s; in ms and MB"
                 " below 1 Jobwarden is ahead")
    lines.append("* timed out: the drain hit its safety timeout; the figure is the rate over "
                 "the jobs done before it")
    return lines
