"""Install anywhere: the wheel ships the workflow, and the base install is lean.

The wheel is built from this checkout (``pip wheel --no-deps``) and installed, alone,
into fresh virtual environments made without pip (``python -m venv --without-pip``;
``pip --python`` installs into them). Their dependencies come from this interpreter's
environment through a ``.pth`` file, so nothing is downloaded and the environments are
ready in seconds:

* **everything**: this environment's site-packages (every extra). From an empty directory
  outside the checkout, ``python -m attnrmt run tiny.yaml`` runs the shipped workflow (the
  package's Snakefile, rules and profile, not the checkout's: ``PYTHONPATH`` is dropped)
  and the results open under ``./results/``.
* **base only**: a folder of links to exactly the distributions the wheel's base
  requirements need (their closure over ``Requires-Dist``, extras excluded), so Snakemake,
  distributed, matplotlib, ... cannot be imported. It opens those results, computes the
  theory, and ``attnrmt run`` names the extra to install.

A real ``pip install`` from the package index takes minutes; the sizes of such
environments are in the report of issue 22 (measured once, not here).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest

from tests.e2e.helpers import REPO_ROOT, subprocess_environment

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TINY = REPO_ROOT / "tests" / "configs" / "tiny.yaml"
TIMEOUT_SECONDS = 300.0


def site_packages(venv: Path) -> Path:
    """``<venv>/lib/pythonX.Y/site-packages``."""
    return (
        venv
        / "lib"
        / f"python{sys.version_info.major}.{sys.version_info.minor}"
        / ("site-packages")
    )


def environment() -> dict[str, str]:
    """This test's environment without PYTHONPATH (no checkout on the path)."""
    env = subprocess_environment()
    env.pop("PYTHONPATH", None)
    return env


def run(python: Path, *args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(python), *args],
        cwd=cwd,
        env=environment(),
        text=True,
        capture_output=True,
        timeout=TIMEOUT_SECONDS,
        check=False,
    )
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done


def venv_with_wheel(path: Path, wheel: Path, dependency_dirs: list[Path]) -> Path:
    """A venv at ``path`` holding only the wheel, its dependencies found in
    ``dependency_dirs`` (a ``.pth`` file); its python."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)],
        check=True,
        timeout=TIMEOUT_SECONDS,
    )
    python = path / "bin" / "python"
    (site_packages(path) / "dependencies.pth").write_text(
        "".join(f"{directory}\n" for directory in dependency_dirs), encoding="utf-8"
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
        timeout=TIMEOUT_SECONDS,
        env=environment(),
        capture_output=True,
    )
    return python


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(REPO_ROOT)],
        check=True,
        timeout=TIMEOUT_SECONDS,
        env=environment(),
        capture_output=True,
    )
    (built,) = out.glob("attnrmt-*.whl")
    return built


@pytest.fixture(scope="module")
def installed_run(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny config run by the installed wheel from an empty directory; that directory."""
    root = tmp_path_factory.mktemp("anywhere")
    python = venv_with_wheel(
        root / "venv", wheel, [Path(p) for p in sysconfig.get_paths()["purelib"].split(os.pathsep)]
    )
    work = root / "study"
    work.mkdir()
    where = run(
        python,
        "-c",
        "import attnrmt, attnrmt.workflow as w; print(attnrmt.__file__); print(w.SNAKEFILE)",
        cwd=work,
    ).stdout.split()
    for path in where:
        assert Path(path).is_relative_to(root / "venv"), where  # the wheel's files
    shutil.copy(TINY, work / "tiny.yaml")
    done = run(python, "-m", "attnrmt", "run", "tiny.yaml", "--cores", "2", cwd=work)
    assert "run 'tiny' (tiny.yaml): results in results/tiny/" in done.stdout, done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    opened = run(
        python,
        "-c",
        "import attnrmt; t = attnrmt.open_results('results/tiny'); "
        "print(dict(t['tiny/cells'].sizes))",
        cwd=work,
    ).stdout
    assert "'snr': 2" in opened and "'replicate': 2" in opened
    assert (work / "results" / "tiny" / "report.html").is_file()
    assert not (work / "Snakefile").exists() and not (work / "profiles").exists()
    return work


def test_the_wheel_runs_a_sweep_from_any_directory(installed_run: Path) -> None:
    assert sorted(p.name for p in installed_run.iterdir()) == [".snakemake", "results", "tiny.yaml"]


def base_closure(wheel: Path) -> list[metadata.Distribution]:
    """The distributions the wheel's base requirements need, recursively (markers
    evaluated here, extras left out), found in this environment."""
    from packaging.requirements import Requirement

    with __import__("zipfile").ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        requires = [
            line.split(":", 1)[1].strip()
            for line in archive.read(name).decode().splitlines()
            if line.startswith("Requires-Dist:")
        ]
    found: dict[str, metadata.Distribution] = {}
    pending = [Requirement(text) for text in requires]
    while pending:
        requirement = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        key = re.sub(r"[-_.]+", "-", requirement.name).lower()
        if key in found:
            continue
        found[key] = metadata.distribution(requirement.name)
        pending += [Requirement(text) for text in found[key].requires or []]
    return list(found.values())


def link_distributions(distributions: list[metadata.Distribution], target: Path) -> None:
    """Symlink each distribution's top-level files and its .dist-info into ``target``."""
    target.mkdir()
    for distribution in distributions:
        base = Path(str(distribution.locate_file("")))
        tops = {Path(str(file)).parts[0] for file in distribution.files or []}
        for top in tops:
            if top == ".." or top.endswith(".pth") or top == "__pycache__":
                continue
            source = base / top
            if source.exists() and not (target / top).exists():
                (target / top).symlink_to(source)


def test_a_base_install_reads_results_computes_theory_and_names_the_extra(
    wheel: Path, installed_run: Path, tmp_path: Path
) -> None:
    closure = base_closure(wheel)
    names = {re.sub(r"[-_.]+", "-", d.metadata["Name"]).lower() for d in closure}
    assert {"numpy", "scipy", "xarray", "zarr", "dask", "pandas", "pyyaml"} <= names
    assert not names & {"snakemake", "distributed", "matplotlib", "bokeh", "dask-jobqueue"}
    link_distributions(closure, tmp_path / "base-site")
    python = venv_with_wheel(tmp_path / "venv", wheel, [tmp_path / "base-site"])
    work = tmp_path / "study"
    shutil.copytree(installed_run / "results", work / "results")
    shutil.copy(TINY, work / "tiny.yaml")
    absent = run(
        python,
        "-c",
        "import importlib.util as u; print([m for m in ('snakemake', "
        "'distributed', 'matplotlib', 'bokeh') if u.find_spec(m)])",
        cwd=work,
    )
    assert absent.stdout.strip() == "[]"

    opened = run(
        python,
        "-c",
        "import attnrmt; t = attnrmt.open_results('results/tiny'); "
        "print(float(t['tiny/cells'].top_eigenvalues.max()) > 0)",
        cwd=work,
    )
    assert opened.stdout.strip() == "True"
    theory = run(python, "-m", "attnrmt", "theory", "--snr", "2", "--json", cwd=work)
    assert '"alpha_over_kappa"' in theory.stdout
    assert run(python, "-m", "attnrmt", "status", "tiny.yaml", cwd=work).returncode == 0
    refused = run(python, "-m", "attnrmt", "run", "tiny.yaml", cwd=work, check=False)
    assert refused.returncode == 2
    assert refused.stderr.strip().startswith(
        "attnrmt run: error: attnrmt run needs the 'workflow' extra (snakemake, distributed"
    )
    assert refused.stderr.strip().endswith("pip install 'attnrmt[workflow]'")
    assert "Traceback" not in refused.stderr


def test_a_checkout_runs_its_own_rules_whatever_is_installed(
    wheel: Path, installed_run: Path, tmp_path: Path
) -> None:
    """A copy of the checkout (root Snakefile + workflow/) with one rule added, run by an
    interpreter whose attnrmt is the installed wheel (not editable): Snakemake sees the
    copy's rule, so edits to a checkout's rules are never silently ignored."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    shutil.copy(REPO_ROOT / "Snakefile", checkout / "Snakefile")
    shutil.copytree(REPO_ROOT / "workflow", checkout / "workflow")
    with (checkout / "workflow" / "rules" / "report.smk").open("a", encoding="utf-8") as rules:
        rules.write('\n\nrule edited_in_this_checkout:\n    output:\n        "edited.txt"\n')
    shutil.copy(TINY, checkout / "config.yaml")
    python = installed_run.parent / "venv" / "bin" / "python"
    where = run(python, "-c", "import attnrmt; print(attnrmt.__file__)", cwd=checkout)
    assert Path(where.stdout.strip()).is_relative_to(installed_run.parent / "venv")
    listed = run(python, "-m", "snakemake", "--list-rules", "--cores", "1", cwd=checkout)
    assert "edited_in_this_checkout" in listed.stdout.split(), listed.stdout


MODULE_SNAKEFILE = """\
configfile: "config.yaml"


module attnrmt:
    snakefile:
        "{workflow}"
    config:
        config


use rule * from attnrmt


onstart:
    attnrmt.onstart()


onsuccess:
    attnrmt.onsuccess()


onerror:
    attnrmt.onerror()
"""


def test_the_workflow_runs_as_a_snakemake_module(tmp_path: Path) -> None:
    """Another directory's Snakefile deploys the workflow as snakedeploy deploys catalog
    workflows (`module` + `use rule * from`) and runs the tiny sweep to its report tables
    (docs/getting-started.md, "As a Snakemake module")."""
    (tmp_path / "Snakefile").write_text(
        MODULE_SNAKEFILE.format(workflow=REPO_ROOT / "workflow" / "Snakefile"), encoding="utf-8"
    )
    shutil.copy(TINY, tmp_path / "config.yaml")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "--cores",
            "2",
            "--workflow-profile",
            str(REPO_ROOT / "workflow" / "profiles" / "default"),
        ],
        cwd=tmp_path,
        env=subprocess_environment(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "results" / "tiny" / "thresholds.csv").is_file()
    assert (tmp_path / "results" / "tiny" / "tiny" / "figures" / "spectra.png").is_file()


def test_the_checkout_snakefile_is_the_shipped_workflow(tmp_path: Path) -> None:
    """`snakemake` with the checkout's root Snakefile (which includes workflow/Snakefile)
    plans the whole run by default, like `attnrmt run`: rule all, not nothing (an included
    file's default target does not carry over by itself)."""
    shutil.copy(TINY, tmp_path / "config.yaml")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-n",
            "--cores",
            "1",
            "--snakefile",
            str(REPO_ROOT / "Snakefile"),
            "--workflow-profile",
            str(REPO_ROOT / "profiles" / "default"),
        ],
        cwd=tmp_path,
        env=subprocess_environment(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", done.stdout + done.stderr, flags=re.MULTILINE))
    assert jobs["simulate_block"] == "4" and jobs["all"] == "1" and jobs["total"] == "13"
