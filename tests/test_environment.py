"""environment.yml (conda users) carries the same dependencies as pyproject.toml, and
.ci/floor-constraints.txt (the floors CI installs) is generated from pyproject.toml."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
# conda-forge spells a few PyPI names differently; none of ours today, kept explicit.
CONDA_NAME = {"pyyaml": "pyyaml"}


def _split(requirement: str) -> tuple[str, str]:
    match = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*)$", requirement)
    assert match, requirement
    return match.group(1).lower(), match.group(2).replace(" ", "")


def _pyproject_requirements() -> dict[str, str]:
    """Base dependencies and every extra's, less the extras naming attnrmt itself
    (``attnrmt[workflow]`` inside ``hpc``: nothing new)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += [r for r in extra if not r.startswith(f"{project['name']}[")]
    return dict(_split(r) for r in requirements)


def _conda_requirements() -> dict[str, str]:
    environment = yaml.safe_load((ROOT / "environment.yml").read_text())
    entries = [e for e in environment["dependencies"] if isinstance(e, str)]
    from_pypi = [
        e
        for group in environment["dependencies"]
        if isinstance(group, dict)
        for e in group.get("pip", [])
        if not e.startswith("-")
    ]
    pinned = dict(_split(e) for e in entries + from_pypi)
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


def test_floor_constraints_are_generated_from_pyproject() -> None:
    """.ci/floor-constraints.txt pins every lower bound of pyproject.toml (.ci/run installs
    exactly these and tests them): regenerated, it is unchanged; and every requirement has
    a floor to pin."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("floor", ROOT / ".ci" / "floor_constraints.py")
    assert spec is not None and spec.loader is not None
    floor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(floor)
    text = (ROOT / "pyproject.toml").read_text()
    assert (ROOT / ".ci" / "floor-constraints.txt").read_text() == floor.constraints_text(text)
    pins = dict(line.split("==") for line in floor.floor_pins(text))
    assert pins == {name: pin.removeprefix(">=") for name, pin in _pyproject_requirements().items()}
    unbounded = text.replace('"scipy>=1.16"', '"scipy"')
    with pytest.raises(ValueError, match="'scipy': no lower bound"):
        floor.floor_pins(unbounded)


def test_snakemake_starts_on_a_machine_without_slurm(tmp_path: Path) -> None:
    """Snakemake loads every installed executor plugin when it starts; the SLURM plugin
    before 2.0.3 raises at import when neither ``sacct`` nor ``squeue`` is on PATH, which
    stops local runs on a laptop with the ``hpc`` extra. PATH here holds the shell tools
    the plugin calls (``which``, ``sh``) and no SLURM command, as on a machine without
    SLURM; this fails with 2.0.1."""
    import shutil
    import subprocess
    import sys

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("which", "sh"):
        (bin_dir / tool).symlink_to(str(shutil.which(tool)))
    done = subprocess.run(
        [sys.executable, "-c", "import snakemake.api; print('started')"],
        env={"PATH": str(bin_dir), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0 and "started" in done.stdout, done.stderr[-2000:]
