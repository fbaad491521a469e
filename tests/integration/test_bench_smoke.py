"""The side-by-side benchmark harness, Jobwarden's side, at its tiniest: it must keep
producing every figure (so it cannot rot unnoticed), and a peer that cannot run must be
reported in its cell while the run goes on. Needs no peer installed."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys

import psycopg
import pytest

from bench.peers.scenarios import Finishes
from bench.peers.systems import System

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FIGURES = {
    "enqueue": ["jobs_per_s"],
    "drain1": ["jobs_per_s", "peak_rss_mb"],
    "drain2": ["jobs_per_s", "peak_rss_mb"],
    "drain1_busy": ["jobs_per_s", "peak_rss_mb", "load_core_share"],
    "drain2_busy": ["jobs_per_s", "peak_rss_mb", "load_core_share"],
    "sleep10ms": ["jobs_per_s", "ideal_jobs_per_s"],
    "io50ms": ["jobs_per_s", "bound_jobs_per_s", "peak_rss_mb"],
    "latency": ["p50_ms", "p99_ms"],
    "backlog": ["first_tenth_jobs_per_s", "last_tenth_jobs_per_s"],
    "ratelimit": ["steady_median", "busiest_sliding", "limit_plus_burst"],
    "ceiling": ["jobs_per_s"],
}


def bench(script: str, *args: str, url: str | None = None, timeout: float = 180) -> str:
    """Run bench/`script` with `args` (on `url`'s server when given): its output, once it
    has exited 0."""
    env = dict(os.environ) if url is None else dict(os.environ, DATABASE_URL=url)
    done = subprocess.run([sys.executable, f"bench/{script}", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_harness_reports_every_jobwarden_figure_and_a_peer_that_cannot_run(server_url, tmp_path):
    out = tmp_path / "peers.json"
    env = dict(os.environ, DATABASE_URL=server_url,
               BENCH_OBAN_VENV=str(tmp_path / "no-venv"), BENCH_PYTHON312="/nonexistent/python3.12")
    done = subprocess.run(
        [sys.executable, "-m", "bench.peers", "--quick", "--systems", "jobwarden,oban",
         "--jobs", "60", "--backlog", "100", "--sleep-jobs", "40", "--io-jobs", "200",
         "--io-concurrency", "50", "--latency-jobs", "5",
         "--latency-rate", "50", "--limit-rate", "20", "--limit-seconds", "5",
         "--limit-workers", "2", "--json", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text())

    jw = report["results"]["jobwarden"]
    for scenario, figures in FIGURES.items():
        run = jw[scenario][0]
        assert "failed" not in run, (scenario, run)
        for figure in figures:
            if scenario == "latency":
                # Stamped after the enqueue's COMMIT returns, a handler woken by that
                # commit may start first: a few jobs' latency is below zero, and so may
                # the median of the smoke run's five be (seen under load). The figure
                # must be there, a number.
                assert math.isfinite(run[figure]), (scenario, figure, run)
            else:
                assert run[figure] > 0, (scenario, figure, run)
    for scenario in ("drain1", "drain2", "drain1_busy", "drain2_busy", "sleep10ms", "io50ms",
                     "backlog"):
        assert jw[scenario][0]["done"] == jw[scenario][0]["jobs"]
        assert not jw[scenario][0]["timed_out"]
    # The contention load: one busy loop pinned to the harness's last core, running through
    # each busy drain (its share of that core is what the machine left it), stopped after.
    busy_cpu = max(os.sched_getaffinity(0))
    for scenario, workers in (("drain1_busy", 1), ("drain2_busy", 2)):
        run = jw[scenario][0]
        assert run["workers"] == workers and run["load_cpu"] == busy_cpu
        assert 0 < run["load_core_share"] <= 1.1, run
        assert f"pinned to CPU {busy_cpu}" in run["load"]
        # Stopped as its drain ended (the harness kills whatever is left at exit anyway).
        assert run["load_exit"] is not None, "the busy loop outlived its drain"
    assert report["contention_load"] == jw["drain1_busy"][0]["load"]
    assert f"one core busy: {report['contention_load']}" in done.stdout
    assert "| no-op drain, 2 processes, one core busy, jobs/s |" in report["table"]
    assert "| one core busy, 1 process: the loop's share of its core |" in report["table"]
    # The rate limit: 20/s across 2 processes, 100 jobs; each started once, no second
    # (sliding or whole) above the limit + its burst of one second's worth, and at least
    # one second while work waited (so the steady figures are the limit's, not empty).
    # Starts are the handlers' stamps, a few ms after their claims: a start or two may
    # cross into the next second (docs/benchmarks.md), so 2 of slack; without the limit all
    # 100 start in the first second.
    limited = jw["ratelimit"][0]
    assert (limited["jobs"], limited["workers"], limited["limit_plus_burst"]) == (100, 2, 40)
    assert limited["starts"] == limited["distinct_started"] == sum(limited["windows"]) == 100
    assert limited["busiest_sliding"] <= 40 + 2 and max(limited["windows"]) <= 40 + 2
    assert limited["steady_windows"] >= 1 and 10 <= limited["steady_median"] <= 22
    assert jw["ceiling"][0]["cas_mismatches"] == 0
    assert jw["ceiling"][0]["jobs"] == 60
    assert jw["io50ms"][0]["bound_jobs_per_s"] == 50 / 0.05  # 50 in flight, 50 ms each

    oban = report["systems"]["oban"]
    assert "needs Python 3.12" in oban["failed"]
    assert report["results"]["oban"]["drain1"][0]["failed"] == oban["failed"]
    assert "failed: needs Python 3.12" in done.stdout  # in the printed table
    assert "no rate limit in oban-py" in report["results"]["oban"]["ratelimit"][0]["not_measured"]

    assert {"server_version", "shared_buffers", "autovacuum", "synchronous_commit",
            "fsync"} <= set(report["server"])
    assert report["machine"]["nproc"] >= 1 and report["machine"]["memory_gb"] > 0
    # The CPU is named in the raw figures and the printed summary (drains differ twofold
    # between CPUs of one kind of machine).
    assert report["machine"]["cpu"] and f"cores ({report['machine']['cpu']})" in done.stdout
    assert "| no-op drain, 1 process, jobs/s |" in report["table"]
    # Jobwarden's cell holds a figure (the median of one round: 20 give or take a start).
    assert re.search(r"\| rate limit across processes: median starts/s while work waited "
                     r"\| \d+\.\d \|", report["table"])


def test_the_lane_latency_benchmark_times_every_email_it_sends(server_url):
    figures = json.loads(bench("bench_lane_latency.py", "--backlog", "300", "--emails", "3",
                               url=server_url))
    assert figures["backlog"] == 300
    assert figures["email_done_ms"]["n"] == 3
    assert 0 < figures["email_done_ms"]["p50"] < figures["email_done_ms"]["p95"] + 1
    assert figures["email_claim_ms"]["p50"] > 0


def test_the_trigger_jit_benchmark_drains_every_job_both_ways(server_url):
    out = bench("bench_trigger_jit.py", "--executions", "1000", "--jobs", "200",
                "--rounds", "1", url=server_url)
    drains = re.findall(r"round 1: triggers (without|with) JIT .*: ([\d,]+) of 200 jobs, "
                        r"([\d,]+) jobs/s", out)
    assert [(kind, n) for kind, n, _ in drains] == [("without", "200"), ("with", "200")], out
    assert all(int(rate.replace(",", "")) > 0 for _, _, rate in drains)


def test_the_loop_timer_benchmark_times_every_sleep_on_both_loops():
    out = bench("bench_loop_timers.py", "--jobs", "400", "--in-flight", "40", "--sleep-ms",
                "5", "--rounds", "1", timeout=120)
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["loop"], r["sleeps"], r["bound_per_s"]) for r in rows] == [
        ("asyncio", 400, 8000), ("precise", 400, 8000)]
    # A sleep never ends before it is due, on either loop.
    assert all(0 <= r["late_ms_median"] <= r["late_ms_p99"] for r in rows), rows
    assert all(0 < r["per_s"] <= r["bound_per_s"] for r in rows), rows


def test_the_idle_claim_benchmark_times_each_way_of_claiming(server_url):
    out = bench("bench_idle_claim.py", "--claims", "6", "--gap-ms", "2", "--rounds", "1",
                url=server_url, timeout=120)
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["way"], r["claims"]) for r in rows] == [
        ("cursor", 6), ("prepared", 6), ("prepared_plans_dropped", 6),
        ("prepared_plans_made_again", 6)]
    assert all(0 < r["median_us"] <= r["p90_us"] for r in rows), rows
    assert rows[0]["parameters_median_us"] > 0


def test_the_claim_parts_benchmark_claims_on_every_arm(server_url):
    out = bench("bench_claim_parts.py", "--claims", "4", "--gap-ms", "1", "--rounds", "1",
                url=server_url, timeout=120)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    # Each arm's table was changed as it says (the script stops otherwise) and claimed on.
    assert [(r["arm"], r["claims"]) for r in rows] == [
        ("as migrated", 4), ("no checks", 4), ("no count trigger", 4),
        ("hot indexes only", 4), ("all three", 4), ("SELECT 1", 4)]
    assert all(0 < r["median_us"] <= r["p90_us"] for r in rows), rows
    assert rows[0]["vs_as_migrated_us"] == 0
    assert "| all three |" in out
    done = subprocess.run([sys.executable, "bench/bench_claim_parts.py", "--claims", "0"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--claims and --rounds must be at least 1" in done.stderr


def test_the_start_legs_benchmark_stamps_every_step_of_every_job(server_url):
    out = bench("bench_start_legs.py", "--jobs", "12", "--rate", "40", "--rounds", "1",
                url=server_url, timeout=150)
    (row,) = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    # Every job was stamped at every step: the wrapped methods are the ones a woken
    # producer runs (a rename in the runtime leaves jobs unstamped).
    assert row["jobs"] == 12
    legs = ["commit → woken", "woken → sent", "claim", "claimed → begun", "begun → handler"]
    assert all(row[leg]["p50"] <= row[leg]["p90"] <= row[leg]["p99"]
               for leg in [*legs, "total"]), row
    assert all(row[leg]["p50"] > 0 for leg in legs[1:]), row
    assert "| total |" in out


def test_the_startup_benchmark_times_each_stage_of_a_worker_start(server_url):
    out = bench("bench_startup.py", "--jobs", "40", "--rounds", "1", url=server_url,
                timeout=120)
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r.get("round") for r in rows] == [0, None]  # the round, then the medians
    stages = [rows[0][s] for s in ("up", "imported", "connected", "registered", "claimed",
                                   "finished", "drained")]
    # One clock (this machine's) for the worker and the server: each stage after the last.
    assert 0 < stages[0] < stages[1] < stages[2] <= stages[3] <= stages[4] <= stages[5] \
        <= stages[6], rows[0]
    assert rows[0]["jobs_per_s"] > 0
    # The worker's collector over its life, written as it exited: young/older/full passes.
    passes = [int(n) for n in rows[0]["gc_passes"].split("/")]
    assert len(passes) == 3 and min(passes) >= 0 and rows[0]["gc_ms"] >= 0, rows[0]


def test_the_batch_benchmark_drains_every_job_at_each_size(server_url):
    out = bench("bench_batches.py", "--sizes", "1,50", "--jobs", "120", "--rounds", "1",
                url=server_url, timeout=150)
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    # Every drain at every size ran, to its end: three drains, two sizes.
    assert sorted((r["drain"], r["size"]) for r in rows) == sorted(
        (d, s) for d in ("1 process", "1 process, one core busy", "2 processes")
        for s in (1, 50))
    assert all(r["jobs_per_s"] > 0 and not r["timed_out"] for r in rows), rows
    assert "| 50 / 100 / 50 |" in out and "| 1 / 2 / 1 |" in out


@pytest.mark.parametrize("claim, ways", [("plain", ["probed", "hashed"]),
                                         ("fair", ["fair_probed", "fair_scanned"])])
def test_the_claim_lookup_benchmark_times_both_joins(server_url, claim, ways):
    out = bench("bench_claim_lookup.py", "--claim", claim, "--claims", "8", "--gap-ms", "2",
                "--rounds", "1", url=server_url, timeout=120)
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["way"], r["claims"]) for r in rows] == [(way, 8) for way in ways]
    assert all(0 < r["median_us"] <= r["p90_us"] and len(r["quarters_median_us"]) == 4
               for r in rows), rows


def test_the_flows_benchmark_times_both_drains_every_hop_and_the_single_job(server_url):
    figures = json.loads(bench("bench_flows.py", "--jobs", "200", "--chain", "6",
                               "--single", "3", "--rounds", "1", url=server_url,
                               timeout=180))
    assert len(figures["independent_s"]) == len(figures["fan_in_s"]) == 1
    assert figures["independent_s"][0] > 0 and figures["fan_in_s"][0] > 0
    assert figures["chain"]["hops"] == 5  # one per edge of a chain of 6
    # A hop ends at the child's start, after its parent completed: never below zero.
    assert 0 <= figures["chain"]["hop_ms"]["p50"] <= figures["chain"]["hop_ms"]["p99"]
    assert figures["single"]["samples"] == 3
    assert 0 <= figures["single"]["start_ms"]["p50"] <= figures["single"]["start_ms"]["p99"]


def test_the_cost_benchmark_gives_each_job_its_cpu_and_statements(tmp_path):
    """bench/bench_cost.py on its private cluster: per-job CPU on both sides, the
    statements that spent it (the claim and the finish by name), and an ablation arm."""
    out = tmp_path / "cost.json"
    # Enough jobs that the window holds some after a worker's first outcome batches (up
    # to 1,000 jobs each at the defaults): 3,000 could all be done before it opened.
    bench("bench_cost.py", "--jobs", "10000", "--rounds", "1", "--json", str(out),
          "--variant", "no-timings:ALTER TABLE job_executions "
          "DISABLE TRIGGER job_executions_timings_insert", timeout=300)
    runs = json.loads(out.read_text())
    assert [r["checkout"] for r in runs] == [ROOT, "no-timings"]
    for run in runs:
        assert 0 < run["jobs"] <= 10_000
        for figure in ("jobs_per_s", "server_us_per_job", "worker_us_per_job"):
            assert run[figure] > 0, (figure, run[figure])
        top = {s["query"].split()[2] for s in run["statements"]
               if s["toplevel"] and s["query"].startswith("-- jobwarden:")}
        assert {"claim_jobs", "finish_executions"} <= top, top
        assert run["payload_bytes"] == 0 and run["payload_stored_bytes"] < 100
        # Every claimed job is finished by some statement in the window: the finish
        # statements' rows cover the window's jobs.
        finished = sum(s["rows"] for s in run["statements"]
                       if s["query"].startswith("-- jobwarden: finish_executions"))
        assert finished >= run["jobs"], (finished, run["jobs"])
    timed = [s for s in runs[0]["statements"] if "job_timings" in s["query"]
             and not s["toplevel"]]
    assert timed and not [s for s in runs[1]["statements"] if "INSERT INTO job_timings"
                          in s["query"]]


def test_the_cost_benchmark_drains_with_several_worker_processes(tmp_path):
    """`--workers 2`: two worker processes drain together, both finish jobs, and their
    CPU is summed; a count out of range is refused in one line before anything runs."""
    out = tmp_path / "cost.json"
    # The window opens once both have finished jobs: at 20,000 jobs, spawned together,
    # the first to start would need a lead of over a second to drain them all alone.
    bench("bench_cost.py", "--jobs", "20000", "--rounds", "1", "--workers", "2",
          "--json", str(out), timeout=300)
    [run] = json.loads(out.read_text())
    assert run["checkout"] == f"{ROOT} ×2" and run["processes"] == 2
    assert run["finishers"] == 2, run["finishers"]
    assert 0 < run["jobs"] <= 20_000 and run["worker_us_per_job"] > 0
    for bad in ("0", "two", "1,9"):
        done = subprocess.run([sys.executable, "bench/bench_cost.py", "--workers", bad],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines()[-1].endswith(
            f"--workers wants counts from 1 to 8, comma-separated, not {bad!r}"), done.stderr


def test_the_cost_benchmark_pads_payloads_to_the_size_asked(tmp_path):
    """`--payload-bytes N`: every job enqueued with a payload of about N bytes (random
    hex words, which PostgreSQL's compression leaves as they are); a size out of range
    is refused in one line before anything runs."""
    out = tmp_path / "cost.json"
    bench("bench_cost.py", "--jobs", "10000", "--rounds", "1", "--payload-bytes", "8000",
          "--json", str(out), timeout=300)
    [run] = json.loads(out.read_text())
    assert run["payload_bytes"] == 8000
    # Stored as written, beyond what PostgreSQL keeps in the row (2 KB): in TOAST.
    assert 7_500 < run["payload_stored_bytes"] < 8_500, run["payload_stored_bytes"]
    assert 0 < run["jobs"] <= 10_000 and run["server_us_per_job"] > 0
    done = subprocess.run([sys.executable, "bench/bench_cost.py", "--payload-bytes", "-1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(
        "--payload-bytes wants 0 to 1000000, not -1"), done.stderr


def test_finishes_a_system_prunes_during_a_scenario_still_count(server_url):
    """awa-pg truncates a ring slot's finished records ~16 s after it opened: the harness
    keeps each group of finishes as last seen, so one pruned still counts, with its times,
    and one whose finishes shrank (a tombstone) counts what is left."""
    system = System("pruning", None, sys.executable, "", finished_sql="", settings="",
                    finish_groups_sql="SELECT key, n, epoch FROM pg_temp.finish_groups")
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute("CREATE TEMP TABLE finish_groups (key text, n int, epoch float8)")
        conn.execute("INSERT INTO finish_groups VALUES ('a', 2, 10.0), ('b', 1, 11.0)")
        finishes = Finishes(system)
        assert finishes.count(conn) == 3
        conn.execute("DELETE FROM finish_groups WHERE key = 'a'")
        conn.execute("UPDATE finish_groups SET n = 0 WHERE key = 'b'")
        conn.execute("INSERT INTO finish_groups VALUES ('c', 1, 12.0)")
        assert finishes.count(conn) == 3
        assert sorted(finishes.times(conn)) == [10.0, 10.0, 12.0]
def test_the_fair_claim_benchmark_times_both_claims(server_url):
    figures = json.loads(bench("bench_fair.py", "claim", "--jobs", "400", "--rounds", "3",
                               url=server_url))
    assert set(figures["median_ms"]) == {"plain", "fair"}
    assert all(v > 0 for v in figures["median_ms"].values()), figures
    assert figures["fair_over_plain"] > 0
