"""A ``noise: shared`` sweep end to end (real Snakemake, Dask, Zarr; tiny cells): the store
keeps one row per (setting, snr, replicate), every row equals the replicate's
:func:`attnrmt.model.simulate_cell` of the snr list, extending the snr axis computes only
the new values and leaves the stored ones bit-identical, and the analysis resamples whole curves
(docs/data-contract.md, "Shared-noise sweeps")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from attnrmt.analysis.thresholds import CURVE_RESAMPLING, estimate_thresholds
from attnrmt.model import simulate_cell
from attnrmt.sweep.spec.config import load_valid_config
from attnrmt.sweep.spec.identity import seed_words
from attnrmt.sweep.spec.plan import plan_run
from tests.e2e.helpers import Workdir, tiny_config, with_sweep

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

#: Fields compared between the store and a direct curve (all numeric per-cell results).
FIELDS = ("top_eigenvalues", "pop_top_eigenvalues", "overlap_signal", "eigenvalues")
SNRS = [0.0, 1.0, 2.0]
EXTENDED = [0.0, 0.5, 1.0, 2.0, 3.0]


def shared_config(snr: list[float]) -> dict:
    """The tiny e2e config (2 weights x snr x 2 replicates, block_size 4) with shared
    noise: block_size 4 rounds up to whole curves of len(snr) cells."""
    return with_sweep(tiny_config(run="shared"), noise="shared", snr=snr)


def stored(cells, field: str, snr: float) -> np.ndarray:
    return np.asarray(cells[field].sel(snr=snr).values)


def test_shared_sweep_end_to_end(tmp_path: Path) -> None:
    """Run, check the rows against direct curves, extend snr, check only new cells were
    computed and the old rows did not change by a bit, then the thresholds' resampling."""
    workdir = Workdir.create(tmp_path / "run", shared_config(SNRS))
    try:
        first = workdir.run()
        assert first.computed == 2 * len(SNRS) * 2 and first.reused == 0
        cells = workdir.open_cells()
        assert cells.attrs["noise"] == "shared"
        assert int(cells.attrs["cells_present"]) == 12

        # every row is its replicate's curve (same seed for every snr): a shared seed,
        # not the cell's own, or a different curve would differ far above 1e-10
        valid = load_valid_config(workdir.config)
        plan = plan_run(valid.config, valid.sweeps).sweeps["grid"]
        lines = {}
        for cell in plan.cells:
            lines.setdefault((cell.weights, cell.replicate), []).append(cell)
        for (weights, replicate), curve_cells in lines.items():
            first_cell = curve_cells[0]
            seeds = {tuple(cell.seed_words(plan_seed(workdir))) for cell in curve_cells}
            assert len(seeds) == 1  # one seed for the whole curve
            kwargs = first_cell.simulate_kwargs()
            kwargs.pop("snr")
            results = simulate_cell(
                **kwargs, snr=[cell.snr for cell in curve_cells], seed=list(seeds.pop())
            )
            for cell, result in zip(curve_cells, results, strict=True):
                row = cells.sel(weights=weights, replicate=replicate, snr=cell.snr)
                for field in FIELDS:
                    expected = np.asarray(getattr(result, field), dtype=float).reshape(-1)
                    got = np.asarray(row[field].values, dtype=float).reshape(-1)[: expected.size]
                    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
            # computed together: one curve gives each of its cells the same share
            # of its wall time (separate cells would each measure their own)
            times = [
                cells["compute_seconds"].sel(weights=weights, replicate=replicate, snr=snr).item()
                for snr in SNRS
            ]
            assert len(set(times)) == 1, times
            # the cell's own seed would give other noise: the rows are not independent cells
            own = simulate_cell(
                **first_cell.simulate_kwargs(), seed=seed_words(first_cell.key, plan_seed(workdir))
            )
            row = cells.sel(weights=weights, replicate=replicate, snr=first_cell.snr)
            assert not np.allclose(row["top_eigenvalues"].values[-1], own.top_eigenvalues[-1])
        before = {field: {snr: stored(cells, field, snr) for snr in SNRS} for field in FIELDS}

        # extend the snr axis: only the new values are computed, the stored ones are copied
        workdir.write_config(shared_config(EXTENDED))
        second = workdir.run()
        new = 2 * (len(EXTENDED) - len(SNRS)) * 2
        assert second.computed == new, second.output
        extended = workdir.open_cells()
        assert int(extended.attrs["cells_present"]) == 2 * len(EXTENDED) * 2
        for field in FIELDS:
            for snr in SNRS:
                np.testing.assert_array_equal(stored(extended, field, snr), before[field][snr])

        thresholds = estimate_thresholds(extended, n_boot=20)
        assert thresholds.attrs["bootstrap_resamples"] == CURVE_RESAMPLING
        assert np.isfinite(thresholds["threshold_extrapolated"].values).any()
    finally:
        workdir.close()


def plan_seed(workdir: Workdir) -> int:
    """The run's root seed (the tiny config's)."""
    return int(workdir.config["seed"])
