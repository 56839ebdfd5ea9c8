"""theory.zarr (attnrmt.sweep.store.theory): the spike predictions of every setting."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from attnrmt.sweep import store
from attnrmt.theory import bulk_edges, mean_spike, spike
from tests.sweep.conftest import (
    store_plan,
)


def test_theory_matches_spike_predictions(tmp_path: Path) -> None:
    plan = store_plan(d=[40])
    sweep = plan.sweeps["grid"]
    out = store.write_theory(sweep, tmp_path / "theory.zarr", plan.seed)
    theory = xr.open_zarr(out).load()
    assert theory.variant.values.tolist() == ["paper", "finite_vocab"]
    assert "replicate" not in theory.dims
    point = theory.sel(d=40, delta=0.5, gamma=0.5, T=3, positional="prefix2", centered=True)
    # mean weights on T=3 with prefix L=2: alpha = (1/9) * (4 + 1) = 5/9, kappa = 1/3
    alpha, kappa = point.alpha.sel(weights="mean").item(), point.kappa.sel(weights="mean").item()
    assert alpha == pytest.approx(5 / 9) and kappa == pytest.approx(1 / 3)
    delta_eff = theory.delta_effective.item()
    gamma_eff = theory.gamma_effective.item()
    for variant in ("paper", "finite_vocab"):
        expected = spike(delta_eff, gamma_eff, 2.0, alpha, kappa, variant=variant)
        got = point.sel(weights="mean", snr=2.0, variant=variant)
        assert got.threshold_snr_sample.item() == pytest.approx(expected.threshold_snr_sample)
        np.testing.assert_allclose(got.sample_outlier.item(), expected.sample_outlier)
    _, upper = bulk_edges(delta_eff, gamma_eff)
    assert point.bulk_upper_edge.sel(weights="mean", snr=0.0, variant="paper").item() == (
        pytest.approx(kappa * upper)
    )
    # the mean spike exists only for uncentred S
    assert np.isnan(theory.mean_spike_outlier.sel(centered=True)).all()
    sigma = point.sigma.sel(weights="mean").item()
    expected_mean = mean_spike(delta_eff, gamma_eff, sigma, kappa)
    np.testing.assert_allclose(
        theory.mean_spike_pop_outlier.sel(
            d=40, delta=0.5, gamma=0.5, T=3, positional="prefix2", weights="mean", snr=0.0
        ).sel(centered=False),
        expected_mean.population_outlier,
    )
    assert (theory.alpha.sel(weights="causal1") > 0).all()  # causal_attention -> its limit
