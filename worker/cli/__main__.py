"""`python -m worker.cli`: the `jobwarden` command."""

import sys

from worker.cli.commands import main

sys.exit(main())
