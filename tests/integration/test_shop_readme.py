"""The shop README's stop command reaches the shop's embedded PostgreSQL, not another one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def readme_stop_command() -> str:
    text = (ROOT / "examples" / "shop" / "README.md").read_text()
    match = re.search(r"```sh\n(.*jobwarden embedded stop)\n```", text)
    assert match, "the shop's README lost its stop command"
    return match.group(1)


def test_the_shop_readmes_stop_command_names_the_folder_make_shop_keeps_its_server_in(
        tmp_path):
    # `make shop` runs `python -m shop` inside examples/shop without JOBWARDEN_HOME, so the
    # shop's embedded server lives in examples/shop/.jobwarden (the default ./.jobwarden).
    recipe = re.search(r"^shop:.*\n((?:\t.*\n)+)", (ROOT / "Makefile").read_text(),
                       re.MULTILINE).group(1)
    assert "cd examples/shop && " in recipe and "JOBWARDEN_HOME" not in recipe
    # A scratch top folder holding only .venv: a shop server a developer left running in
    # this checkout stays up, and nothing runs here, so the command says what it looked for.
    (tmp_path / ".venv").symlink_to(sys.prefix)
    env = {k: v for k, v in os.environ.items() if k not in ("JOBWARDEN_HOME", "DATABASE_URL")}

    said = subprocess.run(["bash", "-c", readme_stop_command()], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)

    assert said.returncode == 0, said.stderr
    assert said.stdout.strip() == (
        f"no embedded PostgreSQL in {tmp_path / 'examples' / 'shop' / '.jobwarden' / 'pgdata'}")
