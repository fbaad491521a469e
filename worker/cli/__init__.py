"""The `jobwarden` command line (docs/guide/cli.md): `main` is its entry point."""

from jobwarden.worker.cli.commands import main

__all__ = ["main"]
