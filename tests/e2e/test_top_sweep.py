"""A ``spectrum: top`` sweep end to end: real Snakemake, Dask and Zarr, beside a full sweep
of the same grid (store, analysis tables, figures, report)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.e2e.helpers import Workdir, tiny_config, with_sweep

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# d = 220 > DENSE_TOP_MAX_N (200): the top cells run the block Lanczos route.
D, TOP_K, N_CELLS_PER_SWEEP = 220, 2, 12


def test_top_sweep_runs_end_to_end_beside_a_full_one(tmp_path) -> None:
    grid = with_sweep(tiny_config(run="top"), d=[D], top_k=TOP_K)["sweeps"]["grid"]
    config = tiny_config(run="top", sweeps={"full": grid, "top": {**grid, "spectrum": "top"}})
    workdir = Workdir.create(tmp_path / "work", config)
    try:
        result = workdir.run(targets=())
        assert result.computed == 2 * N_CELLS_PER_SWEEP, result.output
        full, top = workdir.open_cells("full"), workdir.open_cells("top")
        # full cells: all d eigenvalues; top cells: the 2 top_k largest, and the view's eig
        # axis is that long (not padded to d); the store says which spectrum it holds
        assert np.isfinite(full.eigenvalues).sum("eig").min() == D
        assert (full.sizes["eig"], top.sizes["eig"]) == (D, 2 * TOP_K)
        assert (full.attrs["spectrum"], top.attrs["spectrum"]) == ("full", "top")
        assert np.isfinite(top.eigenvalues).all()
        tail = top.eigenvalues.isel(eig=slice(2 * TOP_K - 1, 2 * TOP_K - 1 - TOP_K, -1))
        np.testing.assert_array_equal(tail.values, top.top_eigenvalues.values)
        assert not set(top.cell_key.values.ravel()) & set(full.cell_key.values.ravel())

        bulk = pd.read_csv(workdir.run_dir / "bulk.csv")
        assert set(bulk["sweep"]) == {"full", "top"}
        note = bulk.loc[bulk["sweep"] == "top", "note"].iloc[0]
        assert "spectrum: top" in note
        assert bulk.loc[bulk["sweep"] == "full", "bulk_ks"].notna().all()
        thresholds = pd.read_csv(workdir.run_dir / "thresholds.csv")
        assert set(thresholds["sweep"]) == {"full", "top"}
        comparison = pd.read_csv(workdir.run_dir / "comparison.csv")
        overlaps = comparison[comparison["quantity"] == "sample_overlap"]
        assert set(overlaps["sweep"]) == {"full", "top"}
        assert (workdir.run_dir / "full" / "figures" / "spectra.png").is_file()

        report = workdir.run_dir / "report.html"
        workdir.run("--report", str(report), targets=())
        assert report.stat().st_size > 0
    finally:
        workdir.close()
