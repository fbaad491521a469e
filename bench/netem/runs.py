"""The two benchmarks, each in its own lab (bridge, namespaces, private cluster):

- `latency`: one worker process in a namespace whose link to the database has a round
  trip of 0, 1 or 5 ms; Jobwarden and pgqueuer (analyzed after the load) drain the same
  no-op backlog, alternating;
- `scale`: 1, 2, 4, 8 Jobwarden worker processes, each in a namespace of its own (veth
  on the bridge, no added delay), against the one private cluster; then the largest
  size through PgBouncer in transaction mode.

Each drain runs in a fresh database and returns the drain's figures (bench/peers
`drain`: database clock, whole drain and steady state) with what it cost (observe.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from glob import glob
from urllib.parse import urlsplit

from bench.netem import cluster as clustermod
from bench.netem import net as netmod
from bench.netem.observe import (
    HARNESS_APP,
    Observer,
    claims,
    close_pooled,
    counters,
    delta,
    reset_statements,
    statements,
)
from bench.peers.dbutil import with_db
from bench.peers.procs import children
from bench.peers.scenarios import drain, install, leave_stats, scenario_database
from bench.peers.systems import ROOT, System


@dataclass
class Lab:
    """What one run measures in: the network, the private cluster, PgBouncer if any."""

    net: netmod.Network
    pg: clustermod.PrivateCluster
    stack: ExitStack
    bouncer_port: int | None = None
    bouncer_pid: int | None = None
    bouncer_pool: int | None = None
    bouncer_version: str = ""
    hosts: list[netmod.Host] = field(default_factory=list)

    @property
    def harness(self) -> str:
        """The cluster for the harness's own sessions (named, so they are told apart)."""
        return f"{self.pg.url}?application_name={HARNESS_APP}"

    def start_bouncer(self, pool_size: int) -> None:
        from tests.pgbouncer import pgbouncer, version

        before = set(children(os.getpid()))
        self.bouncer_port = self.stack.enter_context(
            pgbouncer(self.pg.url, pool_size=pool_size, listen_addr=self.net.host_addr))
        self.bouncer_pool = pool_size
        self.bouncer_version = version()
        started = [p for p in children(os.getpid()) if p not in before]
        self.bouncer_pid = started[0] if started else None


def open_lab(stack: ExitStack) -> Lab:
    """Sweep what killed runs left, then make the bridge and start the private cluster;
    `stack` undoes both (and whatever is added later) in reverse order."""
    netmod.sweep()
    clustermod.sweep()
    net = stack.enter_context(netmod.Network())
    pg = stack.enter_context(clustermod.PrivateCluster(net.host_addr, net.subnets))
    return Lab(net, pg, stack)


def probe(host: netmod.Host, url: str) -> dict:
    """The round trip from inside the host's namespace to the cluster (`SELECT 1`)."""
    done = subprocess.run(host.wrap([sys.executable, "-m", "bench.netem.probe", url]),
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT))
    if done.returncode != 0:
        raise RuntimeError(f"probe from {host.ns}: {done.stderr.strip()[-300:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _links(hosts: list[netmod.Host]) -> list[tuple[dict, dict | None]]:
    return [(h.counters(), h.relay_stats()) for h in hosts]


def _link_figures(before, after, done: int) -> dict:
    """Packets and bytes each way per job, from the host ends' kernel counters; the delay
    lines' lateness over the drain."""
    pairs = list(zip(before, after, strict=True))

    def per_job(key: str) -> float:
        return sum(a[0][key] - b[0][key] for b, a in pairs) / done

    out = {"packets_up_per_job": round(per_job("rx_packets"), 3),
           "packets_down_per_job": round(per_job("tx_packets"), 3),
           "bytes_up_per_job": round(per_job("rx_bytes"), 1),
           "bytes_down_per_job": round(per_job("tx_bytes"), 1)}
    late_sum = late_n = late_max = 0.0
    for (_, r0), (_, r1) in pairs:
        if r0 is None or r1 is None:
            continue
        for way in ("up", "down"):
            late_sum += r1[way]["late_sum_us"] - r0[way]["late_sum_us"]
            late_n += r1[way]["packets"] - r0[way]["packets"]
            late_max = max(late_max, r1[way]["late_max_us"])
    if late_n:
        out["delay_line_late_mean_us"] = round(late_sum / late_n, 1)
        out["delay_line_late_max_us"] = round(late_max, 1)
    return out


def drain_in(lab: Lab, system: System, hosts: list[netmod.Host], jobs: int, tag: str, *,
             pooled: bool = False, count_claims: bool = False, peer_stats: str = "analyzed",
             timeout: float = 600.0, poll: float = 0.25,
             worker_env: dict[str, str] | None = None) -> dict:
    """One drain: a fresh database, `jobs` no-op jobs enqueued from the host's namespace,
    the peer analyzed (never Jobwarden), then one worker process in each of `hosts`'
    namespaces, on the system's defaults; through PgBouncer when `pooled`."""
    with scenario_database(system, lab.harness, tag) as url, \
            tempfile.TemporaryDirectory(prefix="jwnetem-claims-") as claim_dir:
        name = urlsplit(url).path.lstrip("/")
        direct = with_db(lab.pg.url, name)
        worker_url = direct
        env: dict[str, str] = dict(worker_env or {})
        if pooled:
            assert lab.bouncer_port is not None, "start_bouncer first"
            worker_url = with_db(f"postgresql://postgres@{lab.net.host_addr}:"
                                 f"{lab.bouncer_port}/postgres", name)
            env.update(JOBWARDEN_POOLER="transaction", JOBWARDEN_LISTEN_URL=direct)
        if count_claims:
            env["BENCH_CLAIM_LOG"] = os.path.join(claim_dir, "claims")

        def launch(i: int) -> tuple[list[str], dict[str, str]]:
            argv = system.worker_argv(worker_url, system.drain_concurrency)
            if count_claims:  # the same command line, through the claim-counting wrapper
                argv = [sys.executable, "-m", "bench.netem.jw_worker", *argv[1:]]
            return hosts[i].wrap(argv), system.env(worker_url, **env)

        install(system, url)
        enqueue_seconds = system.enqueue(url, jobs)
        stats = leave_stats(system, url, peer_stats)
        reset_statements(lab.harness)
        before = counters(url)
        links0 = _links(hosts)
        extra = {f"delay_line_{i}": h.relay.pid for i, h in enumerate(hosts) if h.relay}
        if pooled and lab.bouncer_pid:
            extra["pgbouncer"] = lab.bouncer_pid
        observer = Observer(lab.harness, lab.pg.postmaster_pid(), extra)
        load = [round(x, 2) for x in os.getloadavg()]
        out = drain(system, url, jobs, len(hosts), system.drain_concurrency, timeout, poll,
                    tag, launch=launch, observe=observer)
        out.pop("times"), out.pop("t0")
        observer.sampler.name_relations(url)
        observer.figures["activity"] = observer.sampler.result()
        links1 = _links(hosts)
        if pooled:
            close_pooled(url)
        after = counters(url)
        done = max(out["done"], 1)
        d = delta(before, after)
        cpu = observer.figures
        figures = {
            **out, **stats, "system": system.name, "enqueue_seconds": round(enqueue_seconds, 3),
            "loadavg_at_start": load, "pooled": pooled,
            "namespaces": [h.ns for h in hosts],
            "commits_per_job": round(d["commits"] / done, 4),
            "commits_per_s": round(d["commits"] / out["seconds"], 1),
            "wal_bytes_per_job": round(d["wal_bytes"] / done, 1),
            "wal_syncs_per_s": round(d["wal_sync"] / out["seconds"], 1),
            "commits_per_wal_sync": round(d["commits"] / d["wal_sync"], 2)
            if d["wal_sync"] else None,
            "wal_sync_ms_per_s": round(d["wal_sync_ms"] / out["seconds"], 1),
            "counters": d,
            "server_cpu_ms_per_1000": round(cpu["server_cpu_s"] * 1e6 / done, 1),
            "workload_backends_cpu_ms_per_1000": round(
                cpu["server_cpu_split_s"].get("workload", 0.0) * 1e6 / done, 1),
            "workers_cpu_ms_per_1000": round(cpu["workers_cpu_s"] * 1e6 / done, 1),
            "cpu": cpu,
            **_link_figures(links0, links1, done),
            "statements": statements(lab.harness, name, out["done"]),
        }
        if count_claims:
            figures["claims"] = claims(sorted(glob(os.path.join(claim_dir, "claims.*"))))
        return figures


def latency_round_trips(rate: float, rate0: float, rtt_ms: float, rtt0_ms: float) -> float | None:
    """The round trips a job waits for in sequence, from the rate's fall: the time per
    job added over the 0 ms control, divided by the round trip added."""
    if not rate or not rate0 or rtt_ms <= rtt0_ms:
        return None
    return round((1 / rate - 1 / rate0) / ((rtt_ms - rtt0_ms) / 1000), 4)
