"""The namespace benchmarks (`python -m bench.netem`) at their tiniest: every figure is
produced, a delayed link really delays (a lower bound, which no load can break: a packet
held 1 ms each way cannot come back sooner than 2 ms), and nothing is left behind: no
namespace, link, private cluster or PgBouncer of the run. Needs root, iproute2, TUN
devices and the machine's PostgreSQL binaries; skipped elsewhere."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("ip")
    or not os.path.exists("/dev/net/tun")
    or not glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
    reason="needs root, iproute2, /dev/net/tun and PostgreSQL's binaries")


def _run(*args: str, timeout: float = 240) -> tuple[subprocess.CompletedProcess, int]:
    proc = subprocess.Popen([sys.executable, "-m", "bench.netem", *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, _ = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, ""), proc.pid


def _left_behind(pid: int) -> list[str]:
    """Namespaces, links, clusters and PgBouncer homes that run `pid` made and left."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    left = [n for n in names.split() if n.startswith(f"jwnet-{pid}-")]
    left += [w for w in links.split() if w.rstrip(":").split("@")[0] in
             {f"jwb{pid}", *(f"jw{k}{pid}{s}{i}" for k in "vt" for s in "hn" for i in range(8))}]
    for d in glob.glob(os.path.join(tempfile.gettempdir(), "jwnetem-pg-*")):
        try:
            if open(os.path.join(d, "owner.pid")).read().strip() == str(pid):
                left.append(d)
        except OSError:
            pass
    return left


def test_latency_run_delays_its_link_and_cleans_up(tmp_path):
    out = tmp_path / "latency.json"
    done, pid = _run("latency", "--rtts", "0,2", "--systems", "jobwarden", "--jobs", "200",
                     "--rounds", "1", "--json", str(out))
    assert done.returncode == 0, done.stdout
    report = json.loads(out.read_text())
    assert report["probes"]["2"]["median_ms"] >= 2.0  # held 1 ms each way, at least
    for rtt in ("0", "2"):
        run = report["results"]["jobwarden"][rtt][0]
        assert run["done"] == 200 and not run["timed_out"], run
        # Server CPU is read in whole clock ticks (10 ms): 200 jobs in a few batches can
        # take less than one, so the figure must be there, not necessarily above zero.
        assert run["jobs_per_s"] > 0 and run["server_cpu_ms_per_1000"] >= 0
        assert run["packets_up_per_job"] > 0 and run["commits_per_job"] > 0
        assert run["stats"] == "not analyzed"
    assert report["results"]["jobwarden"]["2"][0]["delay_line_late_mean_us"] is not None
    assert "| 2 ms;" in report["table"]
    assert _left_behind(pid) == []


def test_scale_run_counts_claims_through_pgbouncer_and_cleans_up(tmp_path):
    if not shutil.which("pgbouncer") and not os.path.exists("/usr/sbin/pgbouncer"):
        pytest.skip("pgbouncer is not installed (`make pgbouncer`)")
    out = tmp_path / "scale.json"
    done, pid = _run("scale", "--workers", "1,2", "--jobs", "300", "--rounds", "1",
                     "--pgbouncer-pool", "2", "--json", str(out))
    assert done.returncode == 0, done.stdout
    report = json.loads(out.read_text())
    assert set(report["results"]) == {"1/direct", "2/direct", "2/pgbouncer"}
    for key, runs in report["results"].items():
        run = runs[0]
        assert run["done"] == 300 and not run["timed_out"], (key, run)
        assert run["claims"]["with_rows"] >= 1, (key, run["claims"])
        # The server's CPU over the drain is read in whole clock ticks (10 ms), and 300
        # jobs in 0.26 s took one tick or none; a worker's is read since its start.
        assert run["cpu"]["server_cpu_s"] >= 0 and run["cpu"]["workers_cpu_s"] > 0
        assert len(run["namespaces"]) == int(key[0])
    assert report["results"]["2/pgbouncer"][0]["pooled"] is True
    assert not subprocess.run(["pgrep", "-P", str(pid)], capture_output=True).stdout
    assert _left_behind(pid) == []


def test_cleanup_removes_what_a_killed_run_left_and_nothing_else():
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that no longer runs the harness
    stale, other = f"jwnet-{gone.pid}-0", f"jwnettest-{os.getpid()}"
    for name in (stale, other):
        subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        done, _ = _run("cleanup", timeout=60)
        assert done.returncode == 0, done.stdout
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert stale not in names.split()
        assert other in names.split()
    finally:
        for name in (stale, other):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)
