"""An app that takes a while to import (as a large one does), and says when it has begun:
a test stops the worker while it loads (worker/engine/stop_signals.py)."""

import os
import time

from jobwarden import job

with open(os.environ["SLOW_LOAD_MARKER"], "w") as marker:
    marker.write(str(os.getpid()))
time.sleep(float(os.environ.get("SLOW_LOAD_SECONDS", "2")))


@job("slow_load.noop")
def noop(ctx, payload):
    return None
