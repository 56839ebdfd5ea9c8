"""Rounds of a sweep with a precision target, end to end (docs/architecture.md, "Rounds"):
``attnrmt run`` killed (SIGKILL, Snakemake and its workers) during round 1 resumes round 1
on the same command, reaches the target there, and no cell is computed twice; a rerun of
a run whose target is met computes nothing. Real Snakemake, Dask and files.

The sweep (d = 20, 4 snr, 8 replicates to start, population half-width 0.3): round 0's
population CI is a bound (distance inf), so round 1 has 4 x 8 = 32 replicates, whose
half-width is 0.25 (measured with these seeds): met, 128 cells in all.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest

from tests.e2e.helpers import (
    Workdir,
    attnrmt_run_command,
    count_cells,
    fragment_files,
    subprocess_environment,
    tiny_config,
    wait_until,
    with_sweep,
    written_since,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TARGET = {"threshold_halfwidth": 0.3, "transitions": ["population"], "budget_cpu_hours": 0.01}
TARGET["max_growth"] = 4
FINAL_CELLS = 128  # 32 replicates x 4 snr: round 1's replicates by the 1/sqrt(R) law


def attnrmt_run(workdir: Workdir) -> str:
    done = subprocess.run(
        attnrmt_run_command(),
        cwd=workdir.path,
        capture_output=True,
        text=True,
        timeout=900,
        env=subprocess_environment(),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout + done.stderr


def test_a_killed_round_resumes_and_a_met_target_computes_nothing(tmp_path: Path) -> None:
    config = with_sweep(
        tiny_config(run="aim"),
        weights=["mean"],
        snr=[0.0, 1.0, 2.0, 3.0],
        replicates=8,
        target=TARGET,
    )
    workdir = Workdir.create(tmp_path / "work", config)
    rounds = workdir.run_dir / "rounds"
    try:
        process = workdir.start_attnrmt_run()
        wait_until(
            lambda: (rounds / "round-1.yaml").exists() and len(fragment_files(workdir.path)) > 8,
            600,
            "a finished block of round 1",
            process,
        )
        workdir.close()  # SIGKILL of attnrmt run, its Snakemake and the Dask workers
        resumed = attnrmt_run(workdir)
        assert "round 1 (" in resumed and "round 0 (" not in resumed
        table = pd.read_csv(rounds / "rounds.csv")
        assert table["round"].tolist() == [0, 1] and table["next"].tolist()[-1] == "met"
        assert not (rounds / "round-2.yaml").exists()
        report = (workdir.run_dir / "report.html").read_text(errors="replace")
        assert (workdir.run_dir / "figures" / "rounds.png").is_file() and "rounds.png" in report
        # every cell once: a killed block's salvaged cells count as reused in its fragment;
        # the last round's design (its replicates x snr points, as rounds.csv records them)
        final_cells = int(table["replicates"].iloc[-1] * table["snr_points"].iloc[-1])
        assert final_cells >= FINAL_CELLS  # at least the replicates the 1/sqrt(R) law asks
        assert count_cells(fragment_files(workdir.path)).computed <= final_cells
        assert int((workdir.open_cells()["cell_key"] != "").sum()) == final_cells

        before = fragment_files(workdir.path)
        again = attnrmt_run(workdir)
        assert "round 1 (" in again and "round 2 (" not in again
        assert count_cells(written_since(before, fragment_files(workdir.path))).computed == 0
        assert "targets after round 1" in again
    finally:
        workdir.close()
