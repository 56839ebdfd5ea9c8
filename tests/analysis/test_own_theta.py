"""theta_hat of an anisotropic table law reads its own inverse spike maps
(docs/thresholds.md, "General bulks"), not the isotropic closed forms."""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from attnrmt.analysis.thresholds import estimate_thresholds, theta_hat
from attnrmt.model.table_laws import covariance_spectrum
from attnrmt.theory.anisotropic import anisotropic_bulk, spike_solution, thresholds

from .synthetic import make_synthetic

LAW = {"kind": "anisotropic", "spectrum": "two_level", "ratio": 4.0, "fraction": 0.25}


def _planted(signal: str):  # type: ignore[no-untyped-def]
    """Gaussian synthetic cells relabelled as one anisotropic law, their signal outliers
    replaced by that law's finite_vocab forward maps (noise-free), and its thresholds."""
    snr = np.linspace(0.5, 12.0, 12)
    cells, _ = make_synthetic(d=(200,), snr=tuple(snr), replicates=3, noise=0.0)
    law = {**LAW, "signal": signal}
    cells.attrs.update(table_name="aniso", table_law=json.dumps(law))
    d = 200
    delta = float(d / cells["V"].max())
    gamma = float(d / cells["N"].max())
    on_u = np.full(d, 1.0 / d) if signal == "random" else np.eye(d)[0]
    lam = covariance_spectrum(law, d)
    assert lam is not None
    bulk = anisotropic_bulk(lam, on_u, delta, gamma)
    ratio = float((cells["alpha"] / cells["kappa"]).mean())
    rest = np.asarray(delta)
    out = spike_solution(bulk, np.asarray(ratio), snr, bulk.signal, rest, 1.0)
    for name, key in (
        ("pop_top_eigenvalues", "pop_outlier"),
        ("top_eigenvalues", "sample_outlier"),
    ):
        top = cells[name].isel(k=0)
        planted = xr.DataArray(np.nan_to_num(out[key]), dims="snr", coords={"snr": snr})
        planted = (planted * cells["kappa"]).broadcast_like(top).transpose(*top.dims)
        cells[name][{"k": 0}] = planted.values
    return cells, snr, ratio, delta, thresholds(bulk, np.asarray(ratio), rest)


def test_anisotropic_theta_hat_is_the_planted_strength_and_thresholds_the_law_s() -> None:
    for signal in ("top", "bottom"):
        cells, snr, ratio, delta, (low, high) = _planted(signal)
        theta = theta_hat(cells).squeeze()
        for transition, threshold in (("population", low), ("sample", high)):
            got = theta.sel(transition=transition).transpose("snr", ...).values
            above = snr > threshold  # the planted strength; theta_c below the threshold
            want = ratio * (np.where(above, snr, threshold) + delta)
            np.testing.assert_allclose(got, np.broadcast_to(want[:, None], got.shape), rtol=1e-8)
        estimate = estimate_thresholds(cells, n_boot=20)["threshold_estimate"].squeeze()
        np.testing.assert_allclose(estimate.values, [low.item(), high.item()], rtol=1e-6)
