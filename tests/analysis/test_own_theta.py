"""theta_hat of an anisotropic table law reads its own inverse spike maps
(docs/thresholds.md, "General bulks"), not the isotropic closed forms."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from attnrmt.analysis.bulk_fit import bulk_fit
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
        ("pop_top_eigenvalues", "population_outlier"),
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


def test_anisotropic_bulk_is_fitted_to_its_own_law() -> None:
    """Eigenvalues of one simulated two-level S (Sigma^1/2 Z^T Z Sigma^1/2 / V sampled by
    N rows) are within KS ~ d^-1/2 of the law's own bulk (the isotropic one: ~0.1)."""
    d = 400
    cells, _ = make_synthetic(d=(d,), snr=(0.0, 1.0), replicates=2, noise=0.0)
    law = {**LAW, "signal": "random"}
    cells.attrs.update(table_name="aniso", table_law=json.dumps(law))
    V, N = int(cells["V"].max()), int(cells["N"].max())
    rng = np.random.default_rng(0)
    root = np.sqrt(covariance_spectrum(law, d))  # type: ignore[arg-type]
    z = rng.standard_normal((V, d)) * root
    lam, vec = np.linalg.eigh(z.T @ z / V)
    y = rng.standard_normal((N, d)) @ (vec * np.sqrt(np.maximum(lam, 0.0))) @ vec.T
    spectrum = np.linalg.eigvalsh(y.T @ y / N)
    eig = cells["eigenvalues"]
    cells["eigenvalues"] = (
        (cells["kappa"] * xr.DataArray(spectrum, dims="eig"))
        .broadcast_like(eig)
        .transpose(*eig.dims)
    )
    fit = bulk_fit(cells, margin=0.05)
    assert float(fit["bulk_ks"].max()) < 0.04
    assert int(fit["bulk_n_outliers"].max()) == 0
    ratio = fit["bulk_upper_edge_emp"] / fit["bulk_upper_edge_th"]
    assert 0.95 < float(ratio.min()) and float(ratio.max()) < 1.0


def test_universality_judges_an_anisotropic_law_by_its_own_theory() -> None:
    """The law's cells are its own theory plus the Gaussian cells' error: consistent; its
    distance from the Gaussian theory (0.5) is not an error."""
    from attnrmt.analysis.universality import INPUT_COLUMNS, universality_table
    from attnrmt.contract import AXES

    snr = np.array([1.0, 2.0, 3.0])
    gaussian_theory, own_theory, error = 2.0 + snr, 2.5 + snr, np.array([0.01, -0.02, 0.015])
    rows = []
    for law, kind, theory in (
        ("gaussian", "gaussian", gaussian_theory),
        ("a", "anisotropic", own_theory),
    ):
        for i, s in enumerate(snr):
            row = dict.fromkeys(INPUT_COLUMNS, np.nan)
            row.update({axis: 0 for axis in AXES}, d=200, snr=s, sweep="s", law=law, kind=kind)
            row.update(quantity="sample_outlier", empirical=theory[i] + error[i], theory=theory[i])
            row.update(empirical_sem=0.01, n=8)
            rows.append(row)
    table = universality_table(pd.DataFrame(rows))
    assert bool(table["consistent"].iloc[0])
    assert float(table["mean_abs_error"].iloc[0]) < 0.02


def test_file_table_theta_hat_is_affine_and_its_threshold_the_law_s() -> None:
    """The shipped 160 x 40 table: sample outliers of its forward map at
    ``(alpha/kappa)(|Dlt_0| + sqrt snr)^2`` read back as ``(alpha/kappa) snr``."""
    from attnrmt.theory.anisotropic import file_bulk

    data = Path(__file__).parent.parent / "data"
    law = {"kind": "file", "path": str(data / "small_table.npy")}
    law["labels"] = str(data / "small_table_labels.npy")
    snr = np.linspace(0.2, 6.0, 12)
    cells, _ = make_synthetic(d=(40,), delta=(0.25,), snr=tuple(snr), replicates=3, noise=0.0)
    cells.attrs.update(table_name="file", table_law=json.dumps(law))
    bulk, norm, _, _ = file_bulk(law, float(40 / cells["N"].max()))
    ratio = float((cells["alpha"] / cells["kappa"]).mean())
    target = (norm + np.sqrt(snr)) ** 2
    out = spike_solution(bulk, np.asarray(ratio), target, bulk.signal, np.asarray(0.0))
    top = cells["top_eigenvalues"].isel(k=0)
    planted = xr.DataArray(np.nan_to_num(out["sample_outlier"]), dims="snr", coords={"snr": snr})
    cells["top_eigenvalues"][{"k": 0}] = (
        (planted * cells["kappa"]).broadcast_like(top).transpose(*top.dims).values
    )
    with np.errstate(all="ignore"):  # the given population's edge is a pole
        high = np.sqrt(thresholds(bulk, np.asarray(ratio), np.asarray(0.0))[1]) - norm
    high = float(np.sign(high) * high**2)
    got = theta_hat(cells).sel(transition="sample").squeeze().transpose("snr", ...).values
    above = snr > high
    np.testing.assert_allclose(got[above], ratio * snr[above, None] + 0 * got[above], rtol=1e-8)
    estimate = estimate_thresholds(cells, n_boot=20)["threshold_estimate"]
    np.testing.assert_allclose(float(estimate.sel(transition="sample").squeeze()), high, rtol=1e-6)


def test_a_noise_outlier_above_the_signal_gives_no_estimate() -> None:
    """A power law with ``u`` random (d = 200): Sigma's top eigenvalue is isolated above the
    edge, so the top sample eigenvalue is its noise outlier, not the signal's. Planted at
    the noise outlier plus 1% at every snr, it used to read as a detection everywhere
    (bound ``below``); the estimator has no eigenvalue of the signal there: bound
    ``hidden``, no estimate. With ``u`` on that eigenvalue (``signal: top``) the top
    eigenvalue is the signal's and is read as before."""
    from attnrmt.analysis.own_theta import _bulk

    snr = np.linspace(0.5, 3.0, 6)
    cells, _ = make_synthetic(d=(200,), snr=tuple(snr), replicates=3, noise=0.0)
    law = {"kind": "anisotropic", "spectrum": "power", "beta": 0.4}
    delta, gamma = float(200 / cells["V"].max()), float(200 / cells["N"].max())
    bulk = _bulk({**law, "signal": "random"}, 200, delta, gamma)
    rise = 1.01 + 0.01 * cells["snr"]
    spike = rise * bulk.outer_sample.inverse_map(np.array(bulk.floor))[0]
    pop = rise * bulk.outer.inverse_map(np.array(bulk.floor))[0]
    for name, value in (("top_eigenvalues", spike), ("pop_top_eigenvalues", pop)):
        top = cells[name].isel(k=0)
        cells[name][{"k": 0}] = (cells["kappa"] * value).broadcast_like(top).transpose(*top.dims)
    bounds = {}
    for signal in ("random", "top"):
        cells.attrs.update(table_name="aniso", table_law=json.dumps({**law, "signal": signal}))
        out = estimate_thresholds(cells, n_boot=20)
        bounds[signal] = out["threshold_bound"].squeeze().values.tolist()
        assert np.isnan(theta_hat(cells)).all() == (signal == "random")
    assert bounds == {"random": ["hidden", "hidden"], "top": ["below", "below"]}
