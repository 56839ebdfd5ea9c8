"""environment.yml (conda users) carries the same dependencies as pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
# conda-forge spells a few PyPI names differently; none of ours today, kept explicit.
CONDA_NAME = {"pyyaml": "pyyaml"}


def _split(requirement: str) -> tuple[str, str]:
    match = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", requirement)
    assert match, requirement
    return match.group(1).lower(), match.group(2).replace(" ", "")


def _pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    requirements += project["optional-dependencies"]["test"]
    return dict(_split(r) for r in requirements)


def _conda_requirements() -> dict[str, str]:
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    entries = [e for e in environment["dependencies"] if isinstance(e, str)]
    pinned = dict(_split(e) for e in entries)
    pinned.pop("python", None)
    pinned.pop("pip", None)
    return pinned


def test_environment_yml_matches_pyproject() -> None:
    expected = {CONDA_NAME.get(name, name): pin for name, pin in _pyproject_requirements().items()}
    assert _conda_requirements() == expected


def test_environment_python_matches_requires_python() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert f"python{project['requires-python']}" in environment["dependencies"]
