"""One rerun heals damaged results (docs/data-contract.md, "Integrity"): after a complete
``attnrmt run`` (real Snakemake, Dask, files), a chunk of the ``cells.zarr`` snapshot
(and so of the cell table: the same hard-linked file) with 4 bytes flipped, a
``theory.zarr`` chunk deleted, an ``analysis.zarr`` chunk flipped, a byte of
``thresholds.csv`` changed and ``.snakemake/`` removed. ``attnrmt open_results`` names
the damage; the same ``attnrmt run`` names each damaged store and product, recomputes no
cell, and ends with every store and table equal to the clean run's.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import xarray as xr

from attnrmt.sweep import store
from attnrmt.sweep.store.integrity import DamagedStore, sweep_damage
from tests.e2e.helpers import (
    Workdir,
    attnrmt_run_command,
    count_cells,
    fragment_files,
    subprocess_environment,
    tiny_config,
    with_sweep,
    written_since,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: Tables with rows in the tiny config (the rest are placeholders).
TABLES_SEEN = ("thresholds", "comparison", "pooling", "summary")


def attnrmt_run(
    workdir: Workdir, command: list[str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        command or attnrmt_run_command(),
        cwd=workdir.path,
        capture_output=True,
        text=True,
        timeout=900,
        env=subprocess_environment(),
    )
    if check:
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def first_chunk(store_dir: Path, variable: str) -> Path:
    return sorted(p for p in (store_dir / variable / "c").rglob("*") if p.is_file())[0]


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 4] = bytes(
        b ^ 0xFF for b in data[len(data) // 2 : len(data) // 2 + 4]
    )
    path.write_bytes(bytes(data))


def stores(workdir: Workdir) -> dict[str, xr.Dataset]:
    sweep_dir = workdir.sweep_dir()
    return {
        "cells": store.open_cells(sweep_dir).load(),
        **{
            name: xr.open_zarr(sweep_dir / f"{name}.zarr").load() for name in ("theory", "analysis")
        },
    }


def test_one_rerun_heals_damaged_stores_and_products(tmp_path: Path) -> None:
    workdir = Workdir.create(tmp_path / "work", tiny_config(run="heal"))
    try:
        attnrmt_run(workdir)
        sweep_dir = workdir.sweep_dir()
        assert sweep_damage(sweep_dir, full=True) == {}
        clean = stores(workdir)
        table = workdir.run_dir / "thresholds.csv"
        clean_table = table.read_bytes()

        flip(first_chunk(sweep_dir / "cells.zarr", "top_eigenvalues"))
        first_chunk(sweep_dir / "theory.zarr", "sample_outlier").unlink()
        flip(first_chunk(sweep_dir / "analysis.zarr", "threshold_estimate"))
        table.write_bytes(clean_table.replace(b",", b";", 1))
        shutil.rmtree(workdir.path / ".snakemake")
        with pytest.raises(DamagedStore, match="sample_outlier"):
            store.open_results(workdir.run_dir)

        before = fragment_files(workdir.path)
        healed = attnrmt_run(workdir)
        assert count_cells(written_since(before, fragment_files(workdir.path))).computed == 0
        for name in (
            "grid/cells.zarr damaged",
            "grid/theory.zarr damaged",
            "grid/analysis.zarr damaged",
            "thresholds.csv",
        ):
            assert name in healed.stdout + healed.stderr, (name, healed.stdout[-3000:])
        assert sweep_damage(sweep_dir, full=True) == {}
        for name, dataset in stores(workdir).items():
            xr.testing.assert_identical(dataset, clean[name])
        assert table.read_bytes() == clean_table
        store.open_results(workdir.run_dir)
    finally:
        workdir.close()


def sorted_rows(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path)
    return frame.sort_values(list(frame.columns), kind="stable").reset_index(drop=True)


def test_config_changes_arrive_without_snakemake_metadata(tmp_path: Path) -> None:
    """With ``.snakemake/`` removed each time: the weights listed the other way round
    compute nothing and change no table value; an snr value added computes exactly its
    cells and the stores hold it. With ``.attnrmt-run.json`` deleted, another config under
    the same run name is refused; the owning config's rerun writes the record again."""
    config = tiny_config(run="change")
    workdir = Workdir.create(tmp_path / "work", config)
    try:
        attnrmt_run(workdir)
        tables = {name: sorted_rows(workdir.run_dir / f"{name}.csv") for name in TABLES_SEEN}

        shutil.rmtree(workdir.path / ".snakemake")
        workdir.write_config(with_sweep(config, weights=["causal1", "mean"]))
        before = fragment_files(workdir.path)
        attnrmt_run(workdir)
        assert count_cells(written_since(before, fragment_files(workdir.path))).computed == 0
        for name, table in tables.items():
            pd.testing.assert_frame_equal(sorted_rows(workdir.run_dir / f"{name}.csv"), table)

        shutil.rmtree(workdir.path / ".snakemake")
        workdir.write_config(with_sweep(config, snr=[0.0, 1.0, 2.0, 3.0]))
        before = fragment_files(workdir.path)
        grown = attnrmt_run(workdir)
        assert "grid/cells.zarr holds another config" in grown.stdout + grown.stderr
        new = count_cells(written_since(before, fragment_files(workdir.path))).computed
        assert new == 4  # 2 weights x 2 replicates at snr 3
        assert store.open_cells(workdir.sweep_dir()).snr.values.tolist() == [0, 1, 2, 3]

        (workdir.run_dir / ".attnrmt-run.json").unlink()
        (workdir.path / "other.yaml").write_text((workdir.path / "config.yaml").read_text())
        command = attnrmt_run_command()
        command[command.index("config.yaml")] = "other.yaml"
        refused = attnrmt_run(workdir, command, check=False)
        assert refused.returncode != 0 and "config.yaml" in refused.stderr, refused.stderr
        attnrmt_run(workdir)
        assert (workdir.run_dir / ".attnrmt-run.json").is_file()
    finally:
        workdir.close()
