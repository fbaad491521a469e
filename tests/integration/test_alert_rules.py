"""The shipped Prometheus alerting rules, checked and unit-tested by the real promtool.

deploy/prometheus/jobwarden.rules.test.yml holds, for each alert, series for which it must
fire and series for which it must not; promtool evaluates the rules over them.
`make test` installs Debian's `prometheus` package (which carries promtool) when missing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def promtool(*args: str) -> subprocess.CompletedProcess:
    tool = shutil.which("promtool")
    assert tool, "promtool is missing: `make promtool` installs Debian's prometheus package"
    return subprocess.run([tool, *args], cwd=RULES_DIR, capture_output=True, text=True,
                          timeout=300)


def test_the_alerting_rules_are_valid_prometheus_rules():
    result = promtool("check", "rules", "jobwarden.rules.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 13 rules found" in result.stdout


def test_each_alert_fires_on_its_series_and_stays_quiet_on_the_others():
    result = promtool("test", "rules", "jobwarden.rules.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
