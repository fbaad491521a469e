"""The ceiling: how fast PostgreSQL itself claims and completes jobs on Jobwarden's schema
when nothing but a loop of two statements stands around it (bench/peers/sql/ceiling.sql)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import psycopg

_HEADER = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def load_queries(path: Path) -> dict[str, str]:
    """Named queries from a .sql file in the project's `-- name:` format."""
    parts = _HEADER.split(path.read_text())
    return {name: body.strip() for name, body in zip(parts[1::2], parts[2::2], strict=True)}


SQL = load_queries(Path(__file__).parent / "sql" / "ceiling.sql")


def raw_loop(url: str, jobs: int, batch: int = 100, timeout: float = 300.0) -> dict:
    """Claim and complete `jobs` pending jobs, `batch` rows per transaction; returns the
    jobs done, the seconds and whether every completion's compare-and-set matched."""
    done = mismatched = 0
    start = time.perf_counter()
    with psycopg.connect(url) as conn:
        while done < jobs and time.perf_counter() - start < timeout:
            rows = conn.execute(SQL["ceiling_claim"],
                                {"batch": batch, "worker_id": "bench-ceiling"}).fetchall()
            conn.commit()
            if not rows:
                break
            cur = conn.execute(SQL["ceiling_complete"],
                               {"ids": [r[0] for r in rows],
                                "execution_ids": [r[1] for r in rows]})
            mismatched += len(rows) - cur.rowcount
            conn.commit()
            done += len(rows)
    seconds = time.perf_counter() - start
    return {"jobs": done, "seconds": round(seconds, 3), "cas_mismatches": mismatched,
            "jobs_per_s": round(done / seconds, 1) if seconds else 0.0,
            "timed_out": done < jobs}
