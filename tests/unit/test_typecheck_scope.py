"""`make typecheck` really checks the console, strictly: a package dropped from
pyproject's [tool.mypy], a relaxing override or a lost jobwarden/ link would leave
modules unchecked while mypy still said "Success"."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: A type: ignore comment: its codes, and what follows it on the line.
IGNORE = re.compile(r"#\s*type:\s*ignore(?P<codes>\[[^\]]*\])?(?P<rest>.*)$")
#: Where every ignore must name its codes and give its reason.
CHECKED = [ROOT / "console", *sorted((ROOT / "jobwarden").glob("*.py"))]


def mypy_config() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["tool"]["mypy"]


def test_the_facade_the_runtime_and_the_console_are_checked_strictly():
    config = mypy_config()
    assert config["strict"] is True
    # The façade and every module beside it (the command's entry point).
    beside = sorted(f"jobwarden.{p.stem}" for p in (ROOT / "jobwarden").glob("*.py")
                    if p.stem != "__init__")
    assert beside and config.get("modules") == ["jobwarden", *beside]
    assert set(config["packages"]) == {"jobwarden.worker", "jobwarden.console"}
    relaxed = [o for o in config.get("overrides", [])
               if any(m == "jobwarden" or m.startswith("jobwarden.")
                      for m in ([o["module"]] if isinstance(o["module"], str) else o["module"]))]
    assert relaxed == []


def test_the_checked_packages_are_the_repositorys_folders():
    """mypy finds the packages through these links; "Can't find package" stops it when
    one is gone, but a link to the wrong place would check something else."""
    for name in ("worker", "console"):
        assert (ROOT / "jobwarden" / name).resolve() == ROOT / name


def ignores_without_reasons(paths: list[Path]) -> list[str]:
    found = []
    files = [f for p in paths for f in (sorted(p.rglob("*.py")) if p.is_dir() else [p])]
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"#\s*mypy:", line):
                found.append(f"{path.name}:{number}: {line.strip()}")
                continue
            match = IGNORE.search(line)
            if match and not (match["codes"] and re.match(r"\s*#\s*\S", match["rest"])):
                found.append(f"{path.name}:{number}: {line.strip()}")
    return found


def test_every_ignore_names_its_error_and_says_why():
    assert len(list(CHECKED[0].rglob("*.py"))) > 30  # the scan reads the console
    assert ignores_without_reasons(CHECKED) == []


def test_a_bare_or_unexplained_ignore_is_found(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("a = 1  # type: ignore\n"
                      "b = 2  # type: ignore[assignment]\n"
                      "c = 3  # type: ignore[assignment]  # a reason\n"
                      "# mypy: ignore-errors\n")
    found = [line.split(":")[1] for line in ignores_without_reasons([module])]
    assert found == ["1", "2", "4"]
