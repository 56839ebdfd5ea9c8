"""End to end: a real run (Snakemake, Dask workers, fragments, cell table) records the
provenance of every cell, and ``attnrmt provenance`` names the commit and counts them all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from attnrmt.sweep.compute.provenance import git_state
from attnrmt.sweep.report.provenance import commit_label
from tests.e2e.helpers import REPO_ROOT, Workdir, subprocess_environment, tiny_config

ATTNRMT = Path(sys.executable).with_name("attnrmt")


def attnrmt(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ATTNRMT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=subprocess_environment(),
        check=False,
    )


def test_provenance_of_a_run_names_the_commit_and_counts_every_cell(tmp_path: Path) -> None:
    workdir = Workdir.create(tmp_path / "w", tiny_config(run="prov"))
    try:
        first = workdir.run()
    finally:
        workdir.close()
    n_cells = 12  # tiny_config: 2 weights x 3 snr x 2 replicates
    assert first.computed == n_cells
    # what the workers saw: the checkout the Snakefile's package comes from
    commit, dirty = git_state(REPO_ROOT / "src" / "attnrmt")
    label = commit_label({"git_commit": commit, "git_dirty": dirty})

    text = attnrmt("provenance", str(workdir.run_dir))
    assert text.returncode == 0, text.stderr
    assert f"{workdir.run_dir}: {n_cells} cells (grid: {n_cells})" in text.stdout
    assert f"{n_cells} cells from commit {label}\n" in text.stdout
    assert "attempts: 1 (12)" in text.stdout

    by_config = attnrmt(
        "provenance",
        str(workdir.path / "config.yaml"),
        "--results",
        str(workdir.path / "results"),
        "--json",
    )
    assert by_config.returncode == 0, by_config.stderr
    summary = json.loads(by_config.stdout)
    assert summary["cells"] == n_cells
    assert summary["commits"] == {label: n_cells}
    assert summary["attempts"] == {"1": n_cells}
    assert summary["peak_memory_bytes"]["min"] > 0
    assert 0 < summary["wall_seconds"]["min"] <= summary["wall_seconds"]["max"]
    assert sum(summary["hosts"].values()) == n_cells
