"""`python -m jobwarden.worker.cli`: the `jobwarden` command."""

import sys

from jobwarden.worker.cli.commands import main

sys.exit(main())
