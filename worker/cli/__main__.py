"""`python -m jobwarden.worker.cli`: the `jobwarden` command."""

import sys

# SIGTERM and SIGINT are recorded, not fatal, until the command knows what it is, as in
# jobwarden/command.py (worker/engine/stop_signals.py).
from jobwarden.worker.engine import stop_signals

stop_signals.hold()

from jobwarden.worker.cli.commands import main  # noqa: E402

sys.exit(main())
