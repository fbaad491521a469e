"""Where the console's templates and static files are, installed or in the source tree."""

from __future__ import annotations

from pathlib import Path


def resource_dir(name: str) -> Path:
    """The console's `templates` or `static` folder, installed or in the source tree.

    A wheel carries them inside the package (jobwarden/console/templates, mapped by
    pyproject.toml's package-dir); the repository keeps them at its top level, where an
    editable install and a checkout find them.
    """
    package = Path(__file__).resolve().parents[1]  # console/, above console/core/
    for candidate in (package / name, package.parent / name):
        if candidate.is_dir():
            return candidate
    raise RuntimeError(f"the console's {name}/ folder is missing: reinstall jobwarden")
