"""Side-by-side benchmark: Jobwarden and its PostgreSQL-queue peers on one server.

Run `python -m bench.peers --help`. This package imports nothing beyond the standard
library at import time, so its `apps` modules also load under a peer's own interpreter.
"""
