"""The printed table (medians over rounds, ratio Jobwarden / each peer) from raw results."""

from __future__ import annotations

import statistics

#: (scenario, figure, row label, higher is better; None: a condition of the run, no ratio)
ROWS = [
    ("enqueue", "jobs_per_s", "bulk enqueue, jobs/s", True),
    ("drain1", "jobs_per_s", "no-op drain, 1 process, jobs/s", True),
    ("drain1", "steady_jobs_per_s", "no-op drain, 1 process, steady state (10–90%), jobs/s",
     True),
    ("drain1_busy", "jobs_per_s", "no-op drain, 1 process, one core busy, jobs/s", True),
    ("drain1_busy", "steady_jobs_per_s", "no-op drain, 1 process, one core busy, steady "
     "state, jobs/s", True),
    ("drain2", "jobs_per_s", "no-op drain, 2 processes, jobs/s", True),
    ("drain2", "steady_jobs_per_s", "no-op drain, 2 processes, steady state (10–90%), jobs/s",
     True),
    ("drain2_busy", "jobs_per_s", "no-op drain, 2 processes, one core busy, jobs/s", True),
    ("drain2_busy", "steady_jobs_per_s", "no-op drain, 2 processes, one core busy, steady "
     "state, jobs/s", True),
    # How busy that core was: what the machine left the loop (1.0: the whole core).
    ("drain1_busy", "load_core_share", "one core busy, 1 process: the loop's share of its "
     "core", None),
    ("drain2_busy", "load_core_share", "one core busy, 2 processes: the loop's share of its "
     "core", None),
    ("sleep10ms", "jobs_per_s", "10 ms jobs, 1 process, jobs/s", True),
    ("io50ms", "jobs_per_s", "50 ms async I/O jobs, 500 in flight, 1 process, jobs/s", True),
    ("io50ms", "steady_jobs_per_s", "50 ms async I/O jobs, steady state (10–90%), jobs/s",
     True),
    ("io50ms", "peak_rss_mb", "50 ms async I/O jobs, peak worker RSS, MB", False),
    ("latency", "p50_ms", "enqueue→start p50, ms", False),
    ("latency", "p99_ms", "enqueue→start p99, ms", False),
    ("backlog", "first_tenth_jobs_per_s", "backlog, first tenth, jobs/s", True),
    ("backlog", "last_tenth_jobs_per_s", "backlog, last tenth, jobs/s", True),
    ("ratelimit", "steady_median", "rate limit across processes: median starts/s while work "
     "waited", True),
    ("ratelimit", "steady_min", "rate limit: lowest second while work waited, starts", True),
    ("ratelimit", "steady_stdev", "rate limit: stdev of those seconds, starts", False),
    ("ratelimit", "steady_percent_of_limit", "rate limit: mean % of the limit while work "
     "waited", True),
    ("ratelimit", "busiest_sliding", "rate limit: busiest sliding second, starts", False),
    ("ratelimit", "over_limit_plus_burst", "rate limit: whole seconds above limit + burst",
     False),
    ("ratelimit", "limit_plus_burst", "rate limit: limit + burst (the ceiling), starts", False),
    ("*", "peak_rss_mb", "peak worker RSS, MB", False),
    ("ceiling", "jobs_per_s", "ceiling: raw SQL, 100 rows/tx, jobs/s", True),
    ("wal", "wal_bytes_per_job", "WAL bytes per job, enqueue + drain (this database)", False),
    ("wal", "cluster_wal_bytes_per_job", "WAL bytes per job, whole cluster (LSN delta)", False),
    ("wal", "heap_tuples_written_per_job", "heap tuples written per job", False),
    ("wal", "non_hot_updates_per_job", "non-HOT updates per job", False),
    ("wal", "index_entries_per_job", "index entries written per job", False),
]


def _figures(results: dict, system: str, scenario: str, figure: str) -> list[float]:
    runs = results.get(system, {}).get(scenario, [])
    return [r[figure] for r in runs if isinstance(r, dict) and r.get(figure) is not None]


def cell(results: dict, system: str, scenario: str, figure: str) -> tuple[str, float | None]:
    """The cell's text and its median (None when there is no figure)."""
    if scenario == "*":  # the largest over every scenario that ran workers
        peaks = [r["peak_rss_mb"] for runs in results.get(system, {}).values() for r in runs
                 if isinstance(r, dict) and r.get("peak_rss_mb")]
        return (f"{max(peaks):,.0f}", max(peaks)) if peaks else ("", None)
    runs = results.get(system, {}).get(scenario, [])
    values = _figures(results, system, scenario, figure)
    if not values:
        skipped = [r["not_measured"] for r in runs if isinstance(r, dict)
                   and "not_measured" in r]
        if skipped:  # "no rate limit in X: why": the cell says what, the JSON says why
            return skipped[0].split(":")[0], None
        errors = [r["failed"] for r in runs if isinstance(r, dict) and "failed" in r]
        if errors:
            return "failed: " + errors[0][:60], None
        if any(r.get("timed_out") for r in runs):
            return "timed out", None
        return "", None
    med = statistics.median(values)
    text = ("; ".join(_fmt(v) for v in values))
    limits = sorted({r.get("timeout_s") for r in runs if isinstance(r, dict)
                     and r.get("timed_out")}, key=lambda t: t or 0)
    if limits:
        at = "/".join(f"{t:g} s" for t in limits if t)
        text += f" (timed out{' at ' + at if at else ''}*)"
    return text, med


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.1f}"


def table(results: dict, systems: list[str], scenarios: list[str]) -> str:
    """A Markdown table: each round's figure per system, then Jobwarden / each peer
    (of the medians; for ms and MB a ratio below 1 means Jobwarden is better)."""
    peers = [s for s in systems if s != "jobwarden"]
    jw = "jobwarden" in systems
    head = ["figure"] + systems + ([f"jobwarden / {p}" for p in peers] if jw else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for scenario, figure, label, higher in ROWS:
        if scenario != "*" and scenario not in scenarios:
            continue
        cells, meds = [], {}
        for s in systems:
            text, med = cell(results, s, scenario, figure)
            cells.append(text)
            meds[s] = med
        ratios = []
        if jw:
            for p in peers:
                if higher is None:
                    ratios.append("")
                    continue
                a, b = meds.get("jobwarden"), meds.get(p)
                ratios.append(f"{a / b:.2f}×" if a and b else "")
        lines.append("| " + " | ".join([label] + cells + ratios) + " |")
    return "\n".join(lines)
