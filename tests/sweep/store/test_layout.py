"""The one spelling of every path under ``results/<run>/``
(``attnrmt.sweep.store.layout``; docs/data-contract.md, "Results folder")."""

from __future__ import annotations

from pathlib import Path

from attnrmt.sweep.store.layout import (
    RESULTS_DIRNAME,
    RunLayout,
    SweepLayout,
)


def test_every_run_path_is_spelled_as_the_data_contract_shows(tmp_path: Path) -> None:
    run = RunLayout.of("paper", tmp_path / RESULTS_DIRNAME)
    root = tmp_path / "results" / "paper"
    assert run.root == root and run.name == "paper"
    assert run.workdir == tmp_path
    assert {
        "record": run.record,
        "started": run.started_marker,
        "calibration": run.calibration,
        "cluster": run.cluster_dir,
        "driver": run.driver_dir,
        "report": run.report,
        "figure": run.figure("phase_diagram", "png"),
        "table": run.table("failed_cells"),
        "log": run.log("simulate_block", "grid", "b1.log"),
    } == {
        "record": root / ".attnrmt-run.json",
        "started": root / ".run-started",
        "calibration": root / ".calibration.json",
        "cluster": root / ".dask",
        "driver": root / "driver",
        "report": root / "report.html",
        "figure": root / "figures" / "phase_diagram.png",
        "table": root / "failed_cells.csv",
        "log": root / "logs" / "simulate_block" / "grid" / "b1.log",
    }
    assert not root.exists(), "building a path must not touch the file system"


def test_every_sweep_path_is_spelled_as_the_data_contract_shows(tmp_path: Path) -> None:
    sweep = RunLayout(tmp_path / "run").sweep("grid")
    root = tmp_path / "run" / "grid"
    assert sweep.root == root and sweep.name == "grid"
    assert sweep.run == RunLayout(tmp_path / "run")
    assert (sweep.fragment("b1"), sweep.cached("b1"), sweep.failure_record("b1")) == (
        root / "fragments" / "b1.npz",
        root / "cache" / "b1.npz",
        root / "failures" / "b1.json",
    )
    assert sweep.salvage_dir == root / "salvage"
    assert (sweep.cells, sweep.theory, sweep.analysis) == (
        root / "cells.zarr",
        root / "theory.zarr",
        root / "analysis.zarr",
    )


def test_a_fragment_names_its_sweep_from_any_of_its_folders(tmp_path: Path) -> None:
    sweep = SweepLayout(tmp_path / "run" / "grid")
    for fragment in (sweep.fragment("b"), sweep.cached("b"), sweep.salvage_dir / "b.npz"):
        assert SweepLayout.of_fragment(fragment) == sweep


def test_snakemake_wildcards_pass_through_unchanged() -> None:
    pattern = RunLayout.of("{run}").sweep("{sweep}").fragment("{block}")
    assert pattern.as_posix() == "results/{run}/{sweep}/fragments/{block}.npz"
    assert RunLayout("results/x").log("{rule}", "{sweep}.log").as_posix() == (
        "results/x/logs/{rule}/{sweep}.log"
    )


def test_layouts_are_values() -> None:
    assert RunLayout("results/a") == RunLayout(Path("results/a"))
    assert len({RunLayout("results/a"), RunLayout("results/a"), RunLayout("results/b")}) == 2
