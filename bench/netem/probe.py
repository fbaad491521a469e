"""The round trip a worker in a namespace sees: `python -m bench.netem.probe URL`, run
inside the namespace, times `SELECT 1` on one connection (after 20 unmeasured) and
prints a JSON line: median, 10th and 90th percentile in ms. It includes the server's
work on the statement and the client library's, tens of microseconds."""

from __future__ import annotations

import json
import sys
import time

import psycopg


def main() -> int:
    url, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200
    with psycopg.connect(url, autocommit=True) as conn:
        for _ in range(20):
            conn.execute("SELECT 1")
        ms = []
        for _ in range(n):
            t = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            ms.append((time.perf_counter() - t) * 1000)
    ms.sort()
    print(json.dumps({"n": n, "median_ms": round(ms[n // 2], 3),
                      "p10_ms": round(ms[n // 10], 3), "p90_ms": round(ms[n * 9 // 10], 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
