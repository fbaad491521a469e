"""`make test` installs the Debian packages some tests drive (Makefile, APT): an apt-get
that another apt-get's dpkg lock meets waits for it instead of failing the run."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCK = "/var/lib/dpkg/lock-frontend"

pytestmark = pytest.mark.skipif(
    not shutil.which("apt-get") or not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="the dpkg lock is Debian's and root's, as `make test`'s installs are")


def test_the_makefiles_apt_get_waits_for_a_dpkg_lock_another_holds():
    # Another apt-get holds the frontend lock as apt does (fcntl), and lets it go a
    # little later; `make`'s apt-get (here installing what is there already, so with no
    # download) must wait for it rather than fail at once with status 100.
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o640)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    release = threading.Timer(2.0, os.close, [fd])
    try:
        probe = subprocess.Popen(
            ["make", "-s", "--no-print-directory", "-f", "Makefile", "-f", "-", "apt-probe"],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        release.start()
        out, _ = probe.communicate("apt-probe:\n\t$(APT) install -y -qq --no-download make\n",
                                   timeout=120)
    finally:
        release.join()
    assert probe.returncode == 0, out
