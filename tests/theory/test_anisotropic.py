"""Anisotropic tables (docs/model.md, "Anisotropic tables"): the theory reduces to the
closed forms for ``Sigma = I``, and matches simulated cells of a two-level ``Sigma`` with
the signal along the top eigenvector and in a random direction.

Simulation check: ``d = 240``, ``delta = gamma = 0.5``, ``T = 8``, iid signs, mean pooling,
centred, ``snr = 3`` (above both thresholds of both placements), 12 seeds. The tolerance is
``4 SE`` of the seeds' mean plus the finite-``d`` offset of the isotropic theory at this
``d`` (eigenvalues 3% low, squared overlaps 0.05; "Spike formulas", measured). Planting
``U_u = U_Sigma`` (the signal's weights ignored: the top case's population outlier 15% low)
or dropping the sampling factor of the overlap (0.2 high) makes it fail.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import xarray as xr

from attnrmt.model import simulate_cell
from attnrmt.theory import THEORY_VARIABLES, predict, predict_grid
from attnrmt.theory.predict import predict_point

PREDICTED = [
    n
    for n in THEORY_VARIABLES
    if n not in ("alpha", "kappa", "sigma", "delta_effective", "gamma_effective")
]
TWO_LEVEL = {"kind": "anisotropic", "spectrum": "two_level", "ratio": 4.0, "fraction": 0.25}


def test_identity_covariance_reduces_to_the_closed_forms() -> None:
    snr = xr.DataArray(np.linspace(0.0, 5.0, 11), dims="snr")
    centred = xr.DataArray([True, False], dims="centered")
    for delta, gamma in ((0.5, 0.5), (0.3, 1.7), (2.0, 0.4)):
        inputs = (delta, gamma, snr, 1.7, 0.4, 1.2, centred)
        expected = predict(*inputs)
        for signal in ("random", "top"):
            law = {"kind": "anisotropic", "spectrum": [1.0, 1.0], "signal": signal}
            got = predict(*inputs, table=law, d=100)
            for name in expected.data_vars:
                np.testing.assert_allclose(
                    got[name].values, expected[name].values, rtol=1e-9, atol=1e-12, err_msg=name
                )


def test_anisotropic_theory_needs_d() -> None:
    with pytest.raises(ValueError, match="needs d"):
        predict(0.5, 0.5, 1.0, 1.0, 1.0, 1.0, table={**TWO_LEVEL, "signal": "top"})


@pytest.mark.parametrize("signal", ["top", "random"])
def test_two_level_spike_matches_simulation(signal: str) -> None:
    law = {**TWO_LEVEL, "signal": signal}
    d, snr, seeds = 240, 3.0, 12
    cells = [
        simulate_cell(d, 0.5, 0.5, 8, "iid", "mean", snr, True, 1, seed, "full", law)
        for seed in range(seeds)
    ]
    V, N = cells[0].V, cells[0].N
    theory = predict_point(d / V, d / N, snr, 8, "iid", "mean", table=law, d=d)
    theory = theory.sel(variant="finite_vocab")
    measured = {
        "pop_top_eigenvalue": [c.pop_top_eigenvalues[0] for c in cells],
        "sample_top_eigenvalue": [c.top_eigenvalues[0] for c in cells],
        "pop_overlap_signal": [c.pop_overlap_signal[0] for c in cells],
        "sample_overlap_signal": [c.overlap_signal[0] for c in cells],
    }
    for name, values in measured.items():
        mean, se = np.mean(values), np.std(values, ddof=1) / np.sqrt(seeds)
        predicted = float(theory[name])
        offset = 0.05 if "overlap" in name else 0.03 * predicted
        assert abs(mean - predicted) < 4 * se + offset, (name, mean, se, predicted)


def test_grid_along_the_table_axis_takes_each_laws_own_theory() -> None:
    """theory.zarr of a sweep with a ``table`` axis: the gaussian slice is the Gaussian grid,
    the anisotropic slice is that law's grid (not the Gaussian one)."""
    axes: dict[str, Any] = {
        "d": [192],
        "delta": [0.5],
        "gamma": [0.5, 2.0],
        "T": [4],
        "positional": ["iid"],
        "weights": ["mean"],
        "snr": [0.5, 3.0],
        "centered": [True, False],
    }
    models = ({("iid", 4): "iid"}, {("mean", 4): "mean"})
    law = {**TWO_LEVEL, "signal": "top"}
    found = predict_grid(
        {**axes, "table": ["gaussian", "aniso"]},
        *models,
        table_laws={"gaussian": {"kind": "gaussian"}, "aniso": law},
    )
    for name, expected in (("gaussian", predict_grid(axes, *models)), ("aniso", None)):
        expected = predict_grid(axes, *models, table=law) if expected is None else expected
        for variable in PREDICTED:
            got = found[variable].sel(table=name).transpose(*expected[variable].dims)
            np.testing.assert_array_equal(got.values, expected[variable].values, variable)
    gaussian = found["sample_outlier"].sel(table="gaussian", variant="finite_vocab")
    assert not np.allclose(
        found["sample_outlier"].sel(table="aniso", variant="finite_vocab"), gaussian
    )


def test_an_isolated_eigenvalue_of_sigma_sits_at_its_spike_map() -> None:
    """Power spectrum, beta = 0.5, d = 400: lambda_1 = 10.4 leaves the bulk, so the largest
    population eigenvalue at snr 0 is its spike map x_rest(lambda_1), not the upper edge of
    the mass-1/d component (7% higher). 16 seeds; 3 SE + 1.5% (an isolated eigenvalue
    fluctuates symmetrically, its bias is O(1/d))."""
    law = {"kind": "anisotropic", "spectrum": "power", "beta": 0.5, "signal": "random"}
    d, seeds = 400, 16
    cells = [
        simulate_cell(d, 0.5, 0.5, 8, "iid", "mean", 0.0, True, 1, s, "full", law)
        for s in range(seeds)
    ]
    values = [c.pop_top_eigenvalues[0] for c in cells]
    theory = predict_point(d / cells[0].V, d / cells[0].N, 0.0, 8, "iid", "mean", table=law, d=d)
    predicted = float(theory["pop_top_eigenvalue"].sel(variant="finite_vocab"))
    se = np.std(values, ddof=1) / np.sqrt(seeds)
    assert abs(np.mean(values) - predicted) < 3 * se + 0.015 * predicted, (values, predicted)


def test_the_isolated_top_eigenvalue_along_u_is_a_spike_of_every_other_eigenvalue() -> None:
    """Power spectrum, beta = 0.5, d = 400, u on the isolated lambda_1, snr 0: the top
    eigenvector of the population ``W + (alpha/kappa - 1) Dlt Dlt^T`` (iid, mean: alpha =
    kappa) carries u with the overlap of lambda_1 as a spike of the law of every other
    eigenvalue (0.927), not of the bulk without the other isolated ones (0.940). 64 tables
    (measured 0.928 +- 0.002); 3 SE."""
    from attnrmt.model.table import sample_table

    law = {"kind": "anisotropic", "spectrum": "power", "beta": 0.5, "signal": "top"}
    d, V, tables = 400, 800, 64
    overlaps = []
    for seed in range(tables):
        table = sample_table(d, V, 0.0, np.random.default_rng(seed), table=law)
        rows, mbar = table.embeddings, table.table_mean
        _, vectors = np.linalg.eigh(rows.T @ rows / V - np.outer(mbar, mbar))
        overlaps.append(float(vectors[0, -1] ** 2))
    theory = predict_point(d / V, 0.5, 0.0, 8, "iid", "mean", table=law, d=d)
    predicted = float(theory["pop_overlap_signal"].sel(variant="finite_vocab"))
    se = np.std(overlaps, ddof=1) / np.sqrt(tables)
    assert abs(np.mean(overlaps) - predicted) < 3 * se, (np.mean(overlaps), se, predicted)
