"""attnrmt.theory.predict: the one theory engine behind theory.zarr, the analysis and the CLI."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from attnrmt.contract import AXES, VARIABLE_ATTRS, VARIANTS
from attnrmt.sweep import store
from attnrmt.sweep.spec.plan import plan_run
from attnrmt.theory import (
    THEORY_VARIABLES,
    bulk_edges,
    mean_spike,
    predict,
    predict_grid,
    predict_point,
    spike,
)

PLAN_CONFIG = {
    "run": "predict",
    "seed": 3,
    "positional_models": {
        "prefix2": {"kind": "prefix", "L": 2},
        "lab": {"kind": "label", "rho0": 0.6, "L": 2},
    },
    "weight_models": {"att": {"kind": "causal_attention", "tau": 1.0}},
    "sweeps": {
        "grid": {
            "d": [30, 41],
            "delta": [0.5, 2.0],
            "gamma": [0.7],
            "T": [3, 4],
            "positional": ["prefix2", "lab"],
            "weights": ["mean", "optimal", "att"],
            "snr": [0.0, 0.5, 3.0],
            "centered": [True, False],
            "replicates": 1,
            "top_k": 1,
        }
    },
}


def plan_specs(sweep) -> tuple[dict, dict]:
    """``(name, T) -> spec`` of a sweep plan's positional and weights models."""
    positional = {(c.positional, int(c.T)): c.positional_spec for c in sweep.cells}
    weights = {(c.weights, int(c.T)): c.weights_spec for c in sweep.cells}
    return positional, weights


@pytest.fixture(scope="module")
def grid() -> tuple[xr.Dataset, object]:
    sweep = plan_run(PLAN_CONFIG).sweeps["grid"]
    return predict_grid(sweep.axes, *plan_specs(sweep)), sweep


def test_grid_has_exactly_the_theory_variables_on_named_dims(grid) -> None:
    theory, sweep = grid
    assert set(theory.data_vars) == set(THEORY_VARIABLES)
    assert theory["sample_outlier"].dims == (*AXES, "variant")
    assert theory["mean_spike_outlier"].dims == AXES
    assert theory["alpha"].dims == ("T", "positional", "weights")
    assert theory["delta_effective"].dims == ("d", "delta", "gamma")
    assert theory["variant"].values.tolist() == list(VARIANTS)
    for axis in AXES:
        assert theory[axis].values.tolist() == list(sweep.axes[axis]), axis


def test_theory_store_is_predict_on_the_sweep_axes(grid) -> None:
    """theory.zarr's dataset is predict_grid's, variable for variable (one theory engine),
    with the contract's attributes and the run's provenance attributes."""
    theory, sweep = grid
    stored = store.theory_dataset(sweep, 3)
    assert set(stored.data_vars) == set(THEORY_VARIABLES)
    for name in THEORY_VARIABLES:
        xr.testing.assert_identical(theory[name].drop_attrs(), stored[name].drop_attrs())
        assert stored[name].attrs.get("units") == VARIABLE_ATTRS[name].get("units"), name
    assert stored.attrs["config_sha256"] == sweep.config_sha256
    assert stored.attrs["root_seed"] == 3


def test_point_values_match_the_spike_formulas(grid) -> None:
    theory, _ = grid
    point = theory.sel(d=41, delta=2.0, gamma=0.7, T=4, positional="prefix2", weights="mean")
    delta, gamma = (float(point[n]) for n in ("delta_effective", "gamma_effective"))
    alpha, kappa, sigma = (float(point[n]) for n in ("alpha", "kappa", "sigma"))
    assert (alpha, kappa, sigma) == pytest.approx((6 / 16, 1 / 4, 1.0))  # prefix(2), T = 4
    for variant in VARIANTS:
        expected = spike(delta, gamma, 3.0, alpha, kappa, variant=variant)
        got = point.sel(snr=3.0, centered=True, variant=variant)
        assert float(got["sample_overlap_signal"]) == pytest.approx(expected.sample_overlap)
        assert float(got["threshold_snr_population"]) == pytest.approx(
            expected.threshold_snr_population
        )
    lower, upper = bulk_edges(delta, gamma)
    edges = point.sel(snr=0.0, centered=True, variant="paper")
    assert float(edges["bulk_upper_edge"]) == pytest.approx(kappa * upper)
    assert float(edges["bulk_lower_edge"]) == pytest.approx(kappa * lower)
    expected_mean = mean_spike(delta, gamma, sigma, kappa)
    uncentred = point.sel(snr=0.0, centered=False)
    assert float(uncentred["mean_spike_overlap"]) == pytest.approx(expected_mean.sample_overlap)
    assert np.isnan(point["mean_spike_outlier"].sel(centered=True)).all()


def test_top_eigenvalue_is_outlier_above_and_bulk_edge_below(grid) -> None:
    """issue 12: the comparable quantity is defined at every snr (no fillna needed)."""
    theory, _ = grid
    for kind, outlier, edge in (
        ("sample", "sample_outlier", "bulk_upper_edge"),
        ("pop", "pop_outlier", "pop_bulk_edge"),
    ):
        top = theory[f"{kind}_top_eigenvalue"]
        assert top.notnull().all(), kind
        present = theory[outlier].notnull()
        assert (~present).any() and present.any(), kind  # the grid spans the threshold
        xr.testing.assert_equal(top.where(present), theory[outlier].where(present))
        xr.testing.assert_allclose(
            top.where(~present), theory[edge].broadcast_like(top).where(~present)
        )
        # an outlier is above the bulk edge, so the comparable quantity is continuous
        assert (top >= theory[edge].broadcast_like(top) * (1 - 1e-12)).all(), kind


def test_inputs_broadcast_by_name_and_absent_points_are_nan() -> None:
    snr = xr.DataArray([0.0, 1.0, 4.0], dims="snr", coords={"snr": [0.0, 1.0, 4.0]})
    kappa = xr.DataArray([0.25, np.nan], dims="weights", coords={"weights": ["mean", "gone"]})
    out = predict(0.5, 0.5, snr, 2.0 * kappa, kappa, 1.0)
    assert out["sample_outlier"].dims == ("snr", "weights", "variant")
    assert out["sample_top_eigenvalue"].sel(weights="gone").isnull().all()
    assert out["sample_top_eigenvalue"].sel(weights="mean").notnull().all()
    expected = spike(0.5, 0.5, 4.0, 0.5, 0.25, variant="finite_vocab").sample_outlier
    assert float(
        out["sample_outlier"].sel(snr=4.0, weights="mean", variant="finite_vocab")
    ) == pytest.approx(expected)


def test_every_variable_carries_the_contract_attrs(grid) -> None:
    theory, _ = grid
    for name, variable in theory.variables.items():
        assert variable.attrs == VARIABLE_ATTRS[name], name


def test_point_reproduces_the_readme_numbers() -> None:
    """README: finite_vocab sample outlier 0.997 and overlap 0.706, paper 0.849 and 0.840."""
    point = predict_point(0.5, 0.5, 2.0, 8, {"kind": "prefix", "L": 4}, "mean")
    fv, paper = point.sel(variant="finite_vocab"), point.sel(variant="paper")
    assert float(fv["sample_outlier"]) == pytest.approx(0.997, abs=5e-4)
    assert float(fv["sample_overlap_signal"]) == pytest.approx(0.706, abs=5e-4)
    assert float(paper["sample_outlier"]) == pytest.approx(0.849, abs=5e-4)
    assert float(paper["sample_overlap_signal"]) == pytest.approx(0.840, abs=5e-4)
    np.testing.assert_allclose(point["pooling_weights"], np.full(8, 1 / 8))
    assert point.attrs["weights_substituted"] == ""


def test_point_names_the_causal_attention_substitution() -> None:
    attention = predict_point(0.5, 0.5, 1.0, 6, "iid", {"kind": "causal_attention", "tau": 1.0})
    limit = predict_point(0.5, 0.5, 1.0, 6, "iid", {"kind": "causal_limit", "tau": 1.0})
    assert "causal_limit" in attention.attrs["weights_substituted"]
    xr.testing.assert_equal(attention[list(THEORY_VARIABLES)], limit[list(THEORY_VARIABLES)])
    with pytest.raises(ValueError, match="L=9"):
        predict_point(0.5, 0.5, 1.0, 3, {"kind": "prefix", "L": 9}, "mean")
