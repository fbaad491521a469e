"""The printed tables of `python -m bench.netem`: each cell lists every round's figure,
ratios are of the medians."""

from __future__ import annotations

import statistics

from bench.netem.runs import latency_round_trips
from bench.peers.report import _fmt


def _values(runs: list[dict], key: str) -> list[float]:
    out = []
    for r in runs:
        v = r
        for part in key.split("."):
            v = v.get(part) if isinstance(v, dict) else None
        if isinstance(v, (int, float)):
            out.append(float(v))
    return out


def _cell(runs: list[dict], key: str, fmt=_fmt) -> tuple[str, float | None]:
    values = _values(runs, key)
    if not values:
        failed = [r["failed"] for r in runs if "failed" in r]
        return ("failed: " + failed[0][:50] if failed else ""), None
    text = "; ".join(fmt(v) for v in values)
    if any(r.get("timed_out") for r in runs):
        text += " (timed out*)"
    return text, statistics.median(values)


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a and b else ""


def _pct(v: float) -> str:
    return f"{v * 100:.0f}%"


def _f3(v: float) -> str:
    return f"{v:.3f}"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def latency_tables(results: dict, probes: dict, rtts: list[str], systems: list[str]) -> str:
    """The drain at each round trip, Jobwarden over each peer; then where the time goes."""
    peers = [s for s in systems if s != "jobwarden"]
    head = ["round trip (set; measured median)"]
    for s in systems:
        head += [f"{s}, jobs/s", f"{s}, steady jobs/s"]
    head += [f"jobwarden / {p}" for p in peers] + [f"steady, jobwarden / {p}" for p in peers]
    lines = [_row(head), "|" + "---|" * len(head)]
    for rtt in rtts:
        cells = [f"{rtt} ms; {probes[rtt]['median_ms']:.2f} ms"]
        meds: dict[str, tuple[float | None, float | None]] = {}
        for s in systems:
            runs = results[s][rtt]
            whole, wm = _cell(runs, "jobs_per_s")
            st, sm = _cell(runs, "steady_jobs_per_s")
            cells += [whole, st]
            meds[s] = (wm, sm)
        if "jobwarden" in systems:
            cells += [_ratio(meds["jobwarden"][0], meds[p][0]) for p in peers]
            cells += [_ratio(meds["jobwarden"][1], meds[p][1]) for p in peers]
        lines.append(_row(cells))
    lines += ["", where_the_time_goes(results, probes, rtts, systems)]
    return "\n".join(lines)


def where_the_time_goes(results: dict, probes: dict, rtts: list[str], systems: list[str]) -> str:
    head = ["system", "round trip", "commits per job", "statements per job",
            "packets per job (to server / back)", "serial round trips per job (steady)",
            "server CPU, ms per 1,000 jobs", "worker CPU, ms per 1,000 jobs",
            "host CPU busy (2 cores)", "delay line lateness, mean µs"]
    lines = [_row(head), "|" + "---|" * len(head)]
    base = rtts[0]
    for s in systems:
        r0 = statistics.median(_values(results[s][base], "steady_jobs_per_s") or [0])
        for rtt in rtts:
            runs = results[s][rtt]
            rate = statistics.median(_values(runs, "steady_jobs_per_s") or [0])
            serial = latency_round_trips(rate, r0, probes[rtt]["median_ms"],
                                         probes[base]["median_ms"])
            up = _cell(runs, "packets_up_per_job", _f3)[0]
            down = _cell(runs, "packets_down_per_job", _f3)[0]
            lines.append(_row([
                s, f"{rtt} ms",
                _cell(runs, "commits_per_job", _f3)[0],
                _cell(runs, "statements.calls_per_job", _f3)[0],
                f"{up} / {down}",
                "" if serial is None else f"{serial:.3f}",
                _cell(runs, "server_cpu_ms_per_1000")[0],
                _cell(runs, "workers_cpu_ms_per_1000")[0],
                _cell(runs, "cpu.host_busy_share", _pct)[0],
                _cell(runs, "delay_line_late_mean_us", lambda v: f"{v:.0f}")[0],
            ]))
    return "\n".join(lines)


def _label(run_key: str) -> str:
    n, via, *mode = run_key.split("/")
    return (f"{n} {'process' if n == '1' else 'processes'}"
            + (", PgBouncer" if via == "pgbouncer" else "") + "".join(f", {m}" for m in mode))


def scale_tables(results: dict, keys: list[str]) -> str:
    """Throughput and CPU per size; then conflicts and what the backends waited on."""
    head = ["worker processes", "jobs/s, whole drain", "jobs/s, steady (10–90%)",
            "× 1 process (steady)", "server CPU, ms per 1,000 jobs",
            "worker CPU, ms per 1,000 jobs", "host CPU busy (2 cores)",
            "other load, CPU s", "commits/s", "WAL flushes/s (commits per flush)",
            "WAL flush time, ms per s"]
    lines = [_row(head), "|" + "---|" * len(head)]
    one = statistics.median(_values(results.get(keys[0], []), "steady_jobs_per_s") or [0])
    for key in keys:
        runs = results[key]
        steady, sm = _cell(runs, "steady_jobs_per_s")
        flushes = _cell(runs, "wal_syncs_per_s")[0]
        per = _cell(runs, "commits_per_wal_sync", lambda v: f"{v:.1f}")[0]
        lines.append(_row([
            _label(key), _cell(runs, "jobs_per_s")[0], steady, _ratio(sm, one),
            _cell(runs, "server_cpu_ms_per_1000")[0], _cell(runs, "workers_cpu_ms_per_1000")[0],
            _cell(runs, "cpu.host_busy_share", _pct)[0],
            _cell(runs, "cpu.other_cpu_s", lambda v: f"{v:.1f}")[0],
            _cell(runs, "commits_per_s")[0], f"{flushes} ({per})",
            _cell(runs, "wal_sync_ms_per_s", _int)[0]]))
    head = ["worker processes", "claims", "rows per claim", "short claims while jobs pending",
            "claim: buffers per call", "claim: ms per call", "lock waits (samples)",
            "busy backends: on CPU", "busy: waiting on LWLock/IO",
            "busy: in a transaction, waiting for the worker", "server connections (max seen)"]
    lines += ["", _row(head), "|" + "---|" * len(head)]
    for key in keys:
        runs = results[key]
        shares = [_busy(r) for r in runs if "cpu" in r]
        locks = [", ".join(f"{k} {v}" for k, v in r["cpu"]["activity"]["lock_waits"].items())
                 or "0" for r in runs if "cpu" in r]
        lines.append(_row([
            _label(key), _cell(runs, "claims.claims", _int)[0],
            _cell(runs, "claims.rows_per_claim", _int)[0],
            _cell(runs, "claims.short_while_pending", _int)[0],
            "; ".join(_int(v) for v in _claim_stat(runs, "blocks_per_call")),
            "; ".join(_int(v) for v in _claim_stat(runs, "mean_ms")),
            "; ".join(locks),
            "; ".join(_pct(b["cpu"]) for b in shares),
            "; ".join(_pct(b["io"]) for b in shares),
            "; ".join(_pct(b["client"]) for b in shares),
            _cell(runs, "cpu.activity.workload_backends_max", _int)[0]]))
    return "\n".join(lines)


def _claim_stat(runs: list[dict], key: str) -> list[float]:
    """A figure of Jobwarden's claim statement (pg_stat_statements), per run."""
    return [t[key] for r in runs for t in r.get("statements", {}).get("top", [])
            if t["query"].startswith("-- jobwarden: claim_jobs ")]


def _int(v: float) -> str:
    return f"{v:,.0f}"


def _busy(run: dict) -> dict[str, float]:
    """Of the workload backends' samples that were not idle: on CPU, waiting on an LWLock
    or I/O (WAL writes and flushes), inside a transaction waiting for the worker."""
    states = run["cpu"]["activity"]["workload_states"]
    busy = {k: v for k, v in states.items() if not k.startswith("idle")}
    total = sum(busy.values()) or 1.0
    return {"cpu": sum(v for k, v in busy.items() if "on CPU" in k) / total,
            "io": sum(v for k, v in busy.items()
                      if "waiting on LWLock" in k or "waiting on IO" in k) / total,
            "client": sum(v for k, v in busy.items() if "waiting for the client" in k) / total}
