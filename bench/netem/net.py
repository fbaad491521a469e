"""Worker "hosts" on one machine: network namespaces linked to the host's namespace.

- `Network.host(i)`: a namespace with a veth pair whose host end is on a bridge; the
  bridge carries the address PostgreSQL (and PgBouncer) listen on. No delay.
- `Network.delayed(i, rtt_ms)`: a namespace whose only link to the host is a pair of TUN
  devices with a delay line between them (bench/netem/delayline.py): every packet is held
  half the round trip in each direction. `rtt_ms=0` is the same path without delay.

Nothing is touched outside what this creates: the host's loopback and its other
interfaces keep their settings, and every name carries the creating process's id
(`jwnet-PID-N` namespaces, `jwbPID` bridge, `jwvPIDhN` veths, `jwtPIDhN` TUN devices), so
`sweep()` can remove what a killed run left behind without touching a live run's.
`Network.close()` (also on an exception, SIGINT or SIGTERM, through the caller's
`with`) removes everything it made; a delay line also ends, and its devices with it,
when the harness's end of its stdin closes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field

from bench.peers.systems import ROOT

#: Each run takes the first free X: the bridge's subnet is 10.231.X.0/24 (the host at .1,
#: namespace i's veth at .10+i), its TUN links' 10.232.X.0/24 (link i: .4i+1 on the host,
#: .4i+2 in the namespace); so two runs (a test beside a benchmark) do not collide.
BRIDGE_PREFIX, TUN_PREFIX = "10.231", "10.232"

_NAME = re.compile(r"^jw(?:net-|[bvt])(\d+)")


def ip(*args: str, ns: str | None = None, check: bool = True) -> str:
    argv = ["ip", *(["-n", ns] if ns else []), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


def in_ns(ns: str, argv: list[str]) -> list[str]:
    """`argv` run inside namespace `ns` (`ip netns exec` execs it: same pid)."""
    return ["ip", "netns", "exec", ns, *argv]


def _write(path: str, value: str, ns: str | None = None) -> None:
    """Best effort: a sysctl of one device (absent when IPv6 is off, say)."""
    if ns:
        subprocess.run(in_ns(ns, ["sh", "-c", f"echo {value} > {path}"]),
                       capture_output=True, timeout=10)
        return
    try:
        with open(path, "w") as f:
            f.write(value)
    except OSError:
        pass


def _quiet(dev: str, ns: str | None = None) -> None:
    """No IPv6 on a link of ours: no router solicitations among the counted packets."""
    _write(f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6", "1", ns)


def counters(dev: str) -> dict[str, int]:
    """The host end's kernel counters: rx is what the namespace sent (client to server),
    tx what the host sent it."""
    out = {}
    for key in ("rx_packets", "tx_packets", "rx_bytes", "tx_bytes"):
        with open(f"/sys/class/net/{dev}/statistics/{key}") as f:
            out[key] = int(f.read())
    return out


@dataclass
class Host:
    """One namespace and the device of its link that stays in the host's namespace."""

    ns: str
    addr: str
    host_dev: str
    rtt_ms: float | None = None        # None: a veth on the bridge, no delay line
    relay: subprocess.Popen | None = field(default=None, repr=False)

    def wrap(self, argv: list[str]) -> list[str]:
        return in_ns(self.ns, argv)

    def counters(self) -> dict[str, int]:
        return counters(self.host_dev)

    def relay_stats(self) -> dict | None:
        """The delay line's counters (packets, bytes, lateness), or None for a veth."""
        if self.relay is None or self.relay.poll() is not None:
            return None
        assert self.relay.stdin and self.relay.stdout
        self.relay.stdin.write("stats\n")
        self.relay.stdin.flush()
        return json.loads(self.relay.stdout.readline())


class Network:
    """The bridge and the namespaces of one run; `with Network() as net:`."""

    def __init__(self) -> None:
        self.tag = str(os.getpid())
        self.bridge = f"jwb{self.tag}"
        self.hosts: list[Host] = []
        self._links: list[str] = []
        self._made_bridge = False
        self.bridge_net = self.tun_net = self.host_addr = ""

    @property
    def subnets(self) -> list[str]:
        return [f"{self.bridge_net}.0/24", f"{self.tun_net}.0/24"]

    # -- life cycle -----------------------------------------------------------------------
    def __enter__(self) -> Network:
        sweep()
        taken = ip("-4", "-o", "addr") + ip("-4", "route")
        for x in range(256):
            nets = (f"{BRIDGE_PREFIX}.{x}", f"{TUN_PREFIX}.{x}")
            if not any(re.search(rf"(^|\s){re.escape(n)}\.", taken, re.M) for n in nets):
                self.bridge_net, self.tun_net = nets
                break
        else:
            raise RuntimeError(f"no free {BRIDGE_PREFIX}.X.0/24 and {TUN_PREFIX}.X.0/24")
        self.host_addr = f"{self.bridge_net}.1"
        try:
            ip("link", "add", self.bridge, "type", "bridge")
            self._made_bridge = True
            _quiet(self.bridge)
            ip("addr", "add", f"{self.host_addr}/24", "dev", self.bridge)
            ip("link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Remove everything this run made; every step is tried whatever failed before."""
        for host in self.hosts:
            if host.relay is not None:
                _end(host.relay)
        for host in self.hosts:
            ip("netns", "delete", host.ns, check=False)
        for dev in self._links:
            ip("link", "delete", dev, check=False)
        if self._made_bridge:
            ip("link", "delete", self.bridge, check=False)
        self.hosts, self._links, self._made_bridge = [], [], False

    # -- namespaces -----------------------------------------------------------------------
    def _namespace(self, i: int) -> str:
        ns = f"jwnet-{self.tag}-{i}"
        ip("netns", "add", ns)
        ip("link", "set", "lo", "up", ns=ns)
        return ns

    def host(self, i: int) -> Host:
        """Namespace i on the bridge by a veth pair, address 10.231.X.(10+i)."""
        ns = self._namespace(i)
        h, n = f"jwv{self.tag}h{i}", f"jwv{self.tag}n{i}"
        ip("link", "add", h, "type", "veth", "peer", "name", n)
        self._links.append(h)
        host = Host(ns, f"{self.bridge_net}.{10 + i}", h)
        self.hosts.append(host)
        _quiet(h)
        ip("link", "set", n, "netns", ns)
        _quiet(n, ns)
        ip("link", "set", h, "master", self.bridge)
        ip("link", "set", h, "up")
        ip("addr", "add", f"{host.addr}/24", "dev", n, ns=ns)
        ip("link", "set", n, "up", ns=ns)
        return host

    def delayed(self, i: int, rtt_ms: float) -> Host:
        """Namespace i whose link to the host is a delay line of `rtt_ms` round trip."""
        ns = self._namespace(i)
        h, n = f"jwt{self.tag}h{i}", f"jwt{self.tag}n{i}"
        relay = subprocess.Popen(
            [sys.executable, "-m", "bench.netem.delayline", "--host", h, "--ns", n,
             "--delay-ms", str(rtt_ms / 2)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
            env=dict(os.environ, PYTHONPATH=ROOT), start_new_session=True)
        host = Host(ns, f"{self.tun_net}.{4 * i + 2}", h, rtt_ms, relay)
        self.hosts.append(host)
        assert relay.stdout
        if relay.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the delay line for {ns} did not start")
        peer = f"{self.tun_net}.{4 * i + 1}"
        _quiet(h)
        ip("addr", "add", peer, "peer", host.addr, "dev", h)
        ip("link", "set", h, "up")
        ip("link", "set", n, "netns", ns)
        _quiet(n, ns)
        ip("addr", "add", host.addr, "peer", peer, "dev", n, ns=ns)
        ip("link", "set", n, "up", ns=ns)
        ip("route", "add", "default", "dev", n, ns=ns)
        return host


def _end(proc: subprocess.Popen) -> None:
    try:
        if proc.stdin:
            proc.stdin.close()  # the delay line ends on end of input
        proc.wait(timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()


def stale(pid: int) -> bool:
    """True unless `pid` is a live run of this harness."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"bench.netem" not in f.read()
    except OSError:
        return True


def sweep() -> list[str]:
    """Remove namespaces and links that a killed run of this harness left behind (their
    creator's pid no longer runs it); what was removed."""
    removed = []
    for line in ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        m = _NAME.match(name)
        if m and name.startswith("jwnet-") and stale(int(m.group(1))):
            ip("netns", "delete", name, check=False)
            removed.append(name)
    for line in ip("-o", "link", "show", check=False).splitlines():
        parts = line.split(":")
        if len(parts) < 2:
            continue
        name = parts[1].strip().split("@")[0]
        m = _NAME.match(name)
        if m and stale(int(m.group(1))):
            ip("link", "delete", name, check=False)
            removed.append(name)
    return removed
