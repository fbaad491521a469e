"""`python -m bench.netem latency|scale|cleanup`: workers in network namespaces against a
private PostgreSQL cluster (bench/README.md, "Workers on other hosts"). Needs root
(`ip netns`, TUN devices); removes every namespace, link and cluster it made when it
ends, also on an error, SIGINT or SIGTERM, and what killed runs left behind when it
starts (or with `cleanup`)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import sys
import time
from contextlib import ExitStack
from dataclasses import fields

from bench.netem import cluster as clustermod
from bench.netem import net as netmod
from bench.netem.report import latency_tables, scale_tables
from bench.netem.runs import Lab, drain_in, open_lab, probe
from bench.peers import procs
from bench.peers.dbutil import PEER_STATS, machine
from bench.peers.scenarios import drop_templates
from bench.peers.systems import ROOT, PgQueuer, System, SystemFailed, all_systems, prepare


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench.netem", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)
    lat = sub.add_parser("latency", help="one worker process at 0, 1 and 5 ms round trip")
    lat.add_argument("--rtts", default="0,1,5", help="round trips in ms (default 0,1,5; the "
                                                     "first is the control)")
    lat.add_argument("--systems", default="jobwarden,pgqueuer",
                     help="comma-separated (default jobwarden,pgqueuer)")
    lat.add_argument("--jobs", type=int, default=20_000, help="no-op jobs per drain (20,000)")
    lat.add_argument("--pgqueuer-batch", type=int, action="append", default=[],
                     help="also run pgqueuer with `pgq run --batch-size N` (as pgqueuer-bN; "
                          "its default is 10); repeatable")
    lat.add_argument("--peer-stats", choices=PEER_STATS, default="analyzed",
                     help="analyzed (default): the peer's tables ANALYZEd after the load")
    sc = sub.add_parser("scale", help="1, 2, 4, 8 Jobwarden worker processes, one namespace "
                                      "each; the largest also through PgBouncer")
    sc.add_argument("--workers", default="1,2,4,8", help="sizes (default 1,2,4,8)")
    sc.add_argument("--jobs", type=int, default=50_000, help="no-op jobs per drain (50,000)")
    sc.add_argument("--pgbouncer-pool", type=int, default=8,
                    help="PgBouncer's default_pool_size at the largest size (default 8; "
                         "0: no PgBouncer run)")
    sc.add_argument("--plan-cache-modes", default="auto",
                    help="comma-separated plan_cache_mode values for the direct workers' "
                         "sessions, each size run with each (default auto: the server's "
                         "default; force_custom_plan plans every claim afresh, as through a "
                         "transaction pooler)")
    for p in (lat, sc):
        p.add_argument("--rounds", type=int, default=2, help="rounds, order alternating (2)")
        p.add_argument("--drain-timeout", type=float, default=600.0,
                       help="safety timeout of one drain, seconds (600)")
        p.add_argument("--json", help="raw figures (default bench/results/netem-KIND-DATE.json)")
    sub.add_parser("cleanup", help="remove what killed runs left (namespaces, links, clusters)")
    return ap.parse_args(argv)


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def _rtts(text: str) -> list[str]:
    return [f"{float(v):g}" for v in text.split(",") if v.strip()]


class BatchedPgQueuer(PgQueuer):
    """pgqueuer with a larger dequeue batch than its default: what a user facing a long
    round trip would try first. Its own cells (`pgqueuer-bN`); analyzed like the other."""

    def __init__(self, base: System, batch: int):
        super().__init__(**{f.name: getattr(base, f.name) for f in fields(base)})
        self.name, self.batch = f"pgqueuer-b{batch}", batch
        self.settings = f"{base.settings}; --batch-size {batch}"

    def worker_argv(self, url, concurrency):
        return super().worker_argv(url, concurrency) + ["--batch-size", str(self.batch)]


def run_latency(args, lab: Lab) -> dict:
    names = [v.strip() for v in args.systems.split(",") if v.strip()]
    systems = [s for s in all_systems() if s.name in names]
    pgq = next((s for s in all_systems() if s.name == "pgqueuer"), None)
    for batch in args.pgqueuer_batch if pgq else []:
        systems.append(BatchedPgQueuer(pgq, batch))
    for s in systems:
        prepare(s)
    rtts = _rtts(args.rtts)
    hosts = {rtt: lab.net.delayed(i, float(rtt)) for i, rtt in enumerate(rtts)}
    probes = {rtt: probe(h, lab.pg.url) for rtt, h in hosts.items()}
    for rtt, p in probes.items():
        print(f"link {rtt} ms: SELECT 1 round trip from the namespace: median "
              f"{p['median_ms']} ms (p10 {p['p10_ms']}, p90 {p['p90_ms']})", flush=True)
    results: dict[str, dict[str, list[dict]]] = {s.name: {r: [] for r in rtts} for s in systems}
    for r in range(args.rounds):
        for k, rtt in enumerate(rtts if r % 2 == 0 else rtts[::-1]):
            for system in (systems if (r + k) % 2 == 0 else systems[::-1]):
                t = time.monotonic()
                try:
                    fig = drain_in(lab, system, [hosts[rtt]], args.jobs,
                                   f"rtt{rtt.replace('.', '_')}_{system.name}",
                                   peer_stats=args.peer_stats, timeout=args.drain_timeout)
                except SystemFailed as exc:
                    fig = {"failed": str(exc)}
                fig.update(round=r + 1, rtt_ms=float(rtt))
                results[system.name][rtt].append(fig)
                _print(f"round {r + 1} rtt {rtt:>3} ms {system.name:10}", fig, t)
    return {"rtts": rtts, "probes": probes, "systems_measured": [s.name for s in systems],
            "versions": {s.name: s.version for s in systems}, "results": results,
            "table": latency_tables(results, probes, rtts, [s.name for s in systems])}


def run_scale(args, lab: Lab) -> dict:
    jobwarden = next(s for s in all_systems() if s.name == "jobwarden")
    prepare(jobwarden)
    sizes = _ints(args.workers)
    hosts = [lab.net.host(i) for i in range(max(sizes))]
    probes = {"veth": probe(hosts[0], lab.pg.url)}
    print(f"veth link: SELECT 1 round trip from a namespace: median "
          f"{probes['veth']['median_ms']} ms", flush=True)
    modes = [m.strip() for m in args.plan_cache_modes.split(",") if m.strip()]
    configs = [(n, False, mode) for n in sizes for mode in modes]
    if args.pgbouncer_pool:
        lab.start_bouncer(args.pgbouncer_pool)
        configs.append((max(sizes), True, "auto"))
    keys = [f"{n}/{'pgbouncer' if pooled else 'direct'}" + ("" if mode == "auto" else f"/{mode}")
            for n, pooled, mode in configs]
    results: dict[str, list[dict]] = {k: [] for k in keys}
    for r in range(args.rounds):
        order = list(zip(keys, configs, strict=True))
        for key, (n, pooled, mode) in (order if r % 2 == 0 else order[::-1]):
            t = time.monotonic()
            # libpq passes PGOPTIONS to the server at connect: the workers' sessions plan
            # their prepared statements as asked (PgBouncer drops it, and prepares nothing).
            env = {} if mode == "auto" else {"PGOPTIONS": f"-c plan_cache_mode={mode}"}
            try:
                fig = drain_in(lab, jobwarden, hosts[:n], args.jobs,
                               f"scale{n}{'b' if pooled else ''}", pooled=pooled,
                               count_claims=True, timeout=args.drain_timeout, worker_env=env)
            except SystemFailed as exc:
                fig = {"failed": str(exc)}
            fig.update(round=r + 1, key=key)
            results[key].append(fig)
            _print(f"round {r + 1} {key:14}", fig, t)
    if args.pgbouncer_pool:
        results_note = f"PgBouncer {lab.bouncer_version}, pool_mode transaction, " \
                       f"default_pool_size {args.pgbouncer_pool}"
    else:
        results_note = "no PgBouncer run"
    return {"sizes": sizes, "probes": probes, "pgbouncer_pool": args.pgbouncer_pool,
            "pgbouncer": results_note, "plan_cache_modes": modes,
            "results": results, "table": scale_tables(results, keys)}


def _print(label: str, fig: dict, started: float) -> None:
    if "failed" in fig:
        print(f"{label} failed: {fig['failed']}", flush=True)
        return
    cpu = fig["cpu"]
    print(f"{label} {time.monotonic() - started:6.1f}s: {fig['done']} jobs, "
          f"{fig['jobs_per_s']:,.0f} jobs/s (steady {fig['steady_jobs_per_s'] or 0:,.0f}), "
          f"server CPU {fig['server_cpu_ms_per_1000']:.0f} ms/1000 jobs, workers "
          f"{fig['workers_cpu_ms_per_1000']:.0f}, host busy {cpu['host_busy_share']:.0%}, "
          f"other load {cpu['other_cpu_s']:.1f} CPU s, {fig['commits_per_s']:,.0f} commits/s, "
          f"load {fig['loadavg_at_start'][0]}", flush=True)
    if fig.get("timed_out"):
        print(f"WARNING: hit the safety timeout ({fig['timeout_s']} s)", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if os.geteuid() != 0:
        print("needs root: it makes network namespaces and TUN devices", file=sys.stderr)
        return 2
    if args.command == "cleanup":
        removed = netmod.sweep() + clustermod.sweep()
        print("\n".join(removed) or "nothing to remove")
        return 0
    # A background run ignores SIGINT and dies silently on SIGTERM: make both unwind
    # through `finally`, so the namespaces, links and the cluster go.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    host = machine()
    date = dt.datetime.now(dt.UTC)
    with ExitStack() as stack:
        lab = open_lab(stack)  # undone last: the cluster, then the network
        stack.callback(drop_templates)  # after the workers stop, before the cluster goes
        # Each drain stops its workers itself; this catches any left by an interruption.
        stack.callback(procs.stop_all)
        server = lab.pg.server_settings()
        out = run_latency(args, lab) if args.command == "latency" else run_scale(args, lab)
    out.update(kind=args.command, date=date.isoformat(timespec="seconds"), server=server,
               server_extra=clustermod.SETTINGS, machine=host, jobs=args.jobs,
               rounds=args.rounds, wall_seconds=round(time.monotonic() - started, 1),
               loadavg_at_end=[round(x, 2) for x in os.getloadavg()])
    path = args.json or os.path.join(
        ROOT, "bench", "results", f"netem-{args.command}-{date:%Y%m%d-%H%M%S}.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print()
    print(out["table"])
    print()
    print(f"{out['date']}; private PostgreSQL {server['server_version']} (shared_buffers "
          f"{server['shared_buffers']}, fsync {server['fsync']}, synchronous_commit "
          f"{server['synchronous_commit']}, autovacuum {server['autovacuum']}); "
          f"{host['nproc']} cores ({host['cpu']}), {host['memory_gb']} GB; load average at start "
          f"{host['loadavg_at_start']}, at end {out['loadavg_at_end']}; "
          f"{out['wall_seconds']:.0f} s")
    print(f"raw figures: {path}")
    return 0
