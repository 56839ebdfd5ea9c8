"""A results folder made by attnrmt 0.1.0 (the last commit before the sweep machinery moved
into its rooms) reruns with today's code computing no cell: only the tables and figures
added since 0.1.0 (:data:`NEW_SINCE_0_1_0`) are made, by the analysis and figure jobs,
and then it is "Nothing to be done"; today's ``open_results`` reads the same numbers.

The old code is exported from this repository's own history (``git archive``), run on a
tiny config, and its numbers dumped by its own ``open_results``; the new code then dry-runs
the same folder. Cost: one tiny run of the whole old pipeline (~30 s on 2 cores).
"""

from __future__ import annotations

import re
import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

import numpy as np
import pytest

from attnrmt import open_results
from tests.e2e.helpers import (
    NOTHING_TO_DO,
    REPO_ROOT,
    Workdir,
    subprocess_environment,
    tiny_config,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: attnrmt 0.1.0 (tag v0.1.0): the layout before spec/, store/, run/, report/.
LEGACY_COMMIT = "59d51fc68952deb08ae9253fb136b12550735c07"
#: What the old pipeline needs of its checkout.
LEGACY_PATHS = ("src", "Snakefile", "workflow", "profiles", "config.yaml")
#: Variables compared between the old and the new reader.
COMPARED = ("top_eigenvalues", "overlap_signal", "pop_top_eigenvalues", "alpha")
#: Outputs of a run that 0.1.0 did not make (K classes, table laws).
NEW_SINCE_0_1_0 = (
    "classes_thresholds.csv",
    "classes_spikes.csv",
    "universality.csv",
    "universality_verdict.csv",
    "figures/classes_spikes.png",
    "figures/universality.png",
)
#: The jobs that make them; no cell, gather or theory job may run.
NEW_OUTPUT_JOBS = {"analysis_tables", "figures", "all"}


def export_legacy(target: Path) -> Path:
    """The files of :data:`LEGACY_COMMIT` needed to run it, under ``target``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", "--format=tar", LEGACY_COMMIT, *LEGACY_PATHS],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target


def test_a_0_1_0_results_folder_reruns_computing_only_new_outputs(tmp_path: Path) -> None:
    old = export_legacy(tmp_path / "legacy")
    work = Workdir.create(tmp_path / "work", tiny_config(run="legacy"))
    env = {**subprocess_environment(), "PYTHONPATH": str(old / "src")}
    snakemake = str(Path(subprocess_environment()["PATH"].split(":")[0]) / "snakemake")
    made = subprocess.run(
        [
            snakemake,
            "--snakefile",
            str(old / "Snakefile"),
            "--directory",
            str(work.path),
            "--workflow-profile",
            str(old / "profiles" / "default"),
            "--cores",
            "2",
            "--configfile",
            str(work.path / "config.yaml"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    dump = tmp_path / "legacy.npz"
    read_old = (
        "import numpy as np, sys; from attnrmt import open_results; "
        f"t = open_results({str(work.run_dir)!r}); c = t['grid/cells'].to_dataset(); "
        f"np.savez({str(dump)!r}, **{{n: c[n].values for n in {COMPARED!r}}})"
    )
    subprocess.run(
        [str(Path(snakemake).with_name("python")), "-c", read_old], env=env, check=True, timeout=300
    )

    for name in NEW_SINCE_0_1_0:
        assert not (work.run_dir / name).exists(), name  # 0.1.0 did not make it
    planned = work.run("-n", "--configfile", str(work.path / "config.yaml"), targets=())
    jobs = set(re.findall(r"^(?:local)?rule (\w+):$", planned.output, flags=re.M))
    assert jobs and jobs <= NEW_OUTPUT_JOBS, (jobs, planned.output[-3000:])
    made_now = work.run("--configfile", str(work.path / "config.yaml"), targets=())
    assert made_now.computed == 0 and made_now.reused == 0, made_now.output[-3000:]
    for name in NEW_SINCE_0_1_0:
        assert (work.run_dir / name).exists(), name
    again = work.run("-n", "--configfile", str(work.path / "config.yaml"), targets=())
    assert NOTHING_TO_DO in again.output, again.output[-3000:]

    cells = open_results(work.run_dir)["grid/cells"].to_dataset()
    with np.load(dump) as legacy:
        for name in COMPARED:
            np.testing.assert_array_equal(cells[name].values, legacy[name], err_msg=name)
