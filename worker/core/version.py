"""Jobwarden's version: one source, the installed distribution's metadata.

pyproject.toml's `version` is written into the metadata by every install (the wheel and
`pip install -e` alike); `jobwarden --version`, the console's footer and
`jobwarden.__version__` all read it here, so no second copy can fall behind.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as distribution_version


def version() -> str:
    """The installed jobwarden's version, e.g. `0.1.0`."""
    try:
        return distribution_version("jobwarden")
    except PackageNotFoundError:
        # Imported from a checkout that was never installed (no `make setup`): say so
        # rather than guess a number.
        return "unknown (not installed)"
