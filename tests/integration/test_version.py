"""One version, the installed distribution's (from pyproject.toml): `jobwarden --version`
prints it and every console page's footer shows it."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import jobwarden

ROOT = Path(__file__).resolve().parents[2]
FOOTER = re.compile(r'<footer class="site-footer" data-testid="footer">([^<]*)</footer>')


def test_the_metadata_version_is_pyprojects():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version("jobwarden") == declared
    assert jobwarden.__version__ == declared


def test_jobwarden_version_prints_the_installed_version():
    command = Path(sys.executable).with_name("jobwarden")
    done = subprocess.run([str(command), "--version"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (
        0, f"jobwarden {version('jobwarden')}\n", "")


def test_the_console_footer_shows_the_version_signed_out_and_in(client, login):
    signed_out = client.get("/login").get_data(as_text=True)
    assert FOOTER.findall(signed_out) == [f"Jobwarden {version('jobwarden')}"]
    login(client, "ada")
    for page in ("/", "/jobs", "/failed"):
        html = client.get(page).get_data(as_text=True)
        assert FOOTER.findall(html) == [f"Jobwarden {version('jobwarden')}"], page
