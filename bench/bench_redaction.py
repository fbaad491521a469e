"""Each redaction pattern against hostile text: time at n and 2n characters.

A pattern that backtracks across its input takes four times as long on twice the text
(quadratic); a linear one about twice. re holds the GIL for the whole of a search, so one
quadratic pattern over a handler's 650 kB error froze the whole worker for 40 s
(docs/faults-handlers.md). The unit tests hold the bounds without a clock
(tests/unit/test_sanitize_bounds.py); this script shows the times.

    .venv/bin/python -m bench.bench_redaction [--chars 200000] [--only URL]

Prints, per rule and input, the seconds at n and 2n and their ratio; exits 1 when any
input takes more than --limit seconds at 2n (a quadratic rule takes tens of seconds).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

from jobwarden.worker.core.sanitize import _compiled, redact


def hostile_inputs() -> dict[str, Callable[[int], str]]:
    """Text made to make a backtracking pattern work hard, each of about n characters:
    what tests/unit/test_sanitize_bounds.py feeds the patterns too."""
    def rep(unit: str) -> Callable[[int], str]:
        return lambda n: unit * (n // len(unit))
    return {
        "json of bare urls": rep('{"id":1,"homepage":"https://site1.example.com"},'),
        "many https:// no @": rep("https://"),
        "scheme://host: runs": rep("a://b:"),
        "colons": rep(":"),
        "word characters": rep("a"),
        "a=": rep("a="),
        "password= (no value)": rep("password="),
        "pass=%22": rep("pass=%22"),
        "quotes": rep('"'),
        "escaped quotes": rep('\\"'),
        "password=\\\"": lambda n: 'password=\\"' + "\\\\\\\"" * (n // 8),
        "token= then spaces": lambda n: "token=" + " " * n + "[REDACTED]",
        "bearer then spaces": lambda n: "bearer" + " " * n + "[REDACTED]",
        "cookie: then spaces": lambda n: "cookie:" + " " * n + "[REDACTED]",
        "password then spaces": lambda n: "password" + " " * n + "x",
        "bearer words": rep("bearer "),
        "-----BEGIN ": rep("-----BEGIN "),
        "-----BEGIN X PRIVATE KEY": rep("-----BEGIN X PRIVATE KEY-----"),
        "SG.": rep("SG.aaaaaaaaaaaaaaaaaaaa"),
        "eyJ": rep("eyJaaaaaaa."),
        "base64 run": rep("aB3/"),
        "digits and :A": rep("12345:A"),
        "&quot;": lambda n: "password=&quot;" + "&quot" * (n // 5),
        "%22": lambda n: "password=%22" + "%2" * (n // 2),
        "hooks.slack.com": rep("hooks.slack.com/services/"),
        "token.token.": rep("token."),
        "%20 runs": lambda n: "token" + "%20" * (n // 3),
        "key%3D": rep("key%3D"),
        "newlines": rep("\n"),
    }


def _time(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=200_000, help="n (default 200,000)")
    parser.add_argument("--limit", type=float, default=2.0,
                        help="seconds at 2n above which an input fails (default 2)")
    parser.add_argument("--only", default="", help="only rules whose pattern holds this")
    args = parser.parse_args(argv)
    compiled = _compiled()
    patterns = [("secret key", compiled.secret_key)] + [
        (r.pattern.pattern[:40], r.pattern) for r in compiled.rules]
    worst = 0.0
    for name, text_of in hostile_inputs().items():
        small, large = text_of(args.chars), text_of(2 * args.chars)
        for label, pattern in patterns:
            if args.only and args.only not in pattern.pattern:
                continue
            a = _time(lambda p=pattern, t=small: p.sub("", t))  # type: ignore[misc]
            b = _time(lambda p=pattern, t=large: p.sub("", t))  # type: ignore[misc]
            worst = max(worst, b)
            if b > 0.05:
                print(f"{name:28} {label:42} {a:7.3f}s {b:7.3f}s  x{b / max(a, 1e-9):.1f}")
        whole = _time(lambda t=large: redact(t))  # type: ignore[misc]
        print(f"{name:28} {'redact() whole':42} {'':8} {whole:7.3f}s")
    print(f"slowest pattern at 2n: {worst:.3f}s")
    return 1 if worst > args.limit else 0


if __name__ == "__main__":
    sys.exit(main())
