"""Thresholds of shared-noise sweeps: the bootstrap resamples whole replicate curves
(docs/thresholds.md, "Shared-noise curves")."""

from __future__ import annotations

import numpy as np

from attnrmt.analysis.thresholds import (
    CURVE_RESAMPLING,
    estimate_thresholds,
    fit_threshold,
    fit_thresholds_shared_slope,
    outlier_ratios,
    shares_noise,
)
from tests.analysis.conftest import curve_rng
from tests.analysis.synthetic import make_synthetic

#: Planted correlated curves: theta_hat = theta_c + slope max(0, snr - s_c) plus, per
#: replicate, an offset (sd CURVE_OFFSET) and a slope error (sd CURVE_TILT, about s_c)
#: shared by all its snr points, plus independent noise (sd CURVE_NOISE) on every point:
#: what one noise realisation per replicate curve does (the curve's points move together).
CURVE_SNR = np.linspace(0.0, 3.0, 13)
CURVE_THETA_C, CURVE_SLOPE, CURVE_THRESHOLD = 1.2, 1.0, 1.1
CURVE_REPLICATES = 16
CURVE_OFFSET, CURVE_TILT, CURVE_NOISE = 0.05, 0.02, 0.005
CURVE_SEEDS = tuple(range(1000))
#: Bounds of the calibration check (see the test's docstring for the measurements).
COVERAGE_RANGE = (0.90, 0.97)
WIDTH_RANGE = (0.88, 1.12)


def planted_curves(seed: int) -> np.ndarray:
    """One planted correlated sweep, (snr, replicate). O(snr x replicates)."""
    rng = np.random.default_rng([seed, 21])
    offset = CURVE_OFFSET * rng.normal(size=CURVE_REPLICATES)
    tilt = CURVE_TILT * rng.normal(size=CURVE_REPLICATES)
    noise = CURVE_NOISE * rng.normal(size=(CURVE_SNR.size, CURVE_REPLICATES))
    truth = CURVE_THETA_C + CURVE_SLOPE * np.maximum(0.0, CURVE_SNR - CURVE_THRESHOLD)
    return (
        truth[:, None]
        + offset[None, :]
        + tilt[None, :] * (CURVE_SNR - CURVE_THRESHOLD)[:, None]
        + noise
    )


def calibration(curves: bool) -> tuple[float, float, float]:
    """Coverage of the planted threshold by the 95% CI, root-mean-square CI half-width over
    1.96 sd of the estimate across seeds, and the estimate's mean bias, over
    :data:`CURVE_SEEDS`. O(seeds x 200 x snr x replicates)."""
    rows = []
    for seed in CURVE_SEEDS:
        fit = fit_threshold(
            CURVE_SNR,
            planted_curves(seed),
            CURVE_THETA_C,
            rng=np.random.default_rng([seed, 22]),
            curves=curves,
        )
        rows.append((fit["estimate"], fit["ci_low"], fit["ci_high"]))
    estimate, low, high = np.array(rows).T
    assert np.all(np.isfinite(estimate))  # every planted curve crosses inside the range
    coverage = float(np.mean((low <= CURVE_THRESHOLD) & (CURVE_THRESHOLD <= high)))
    width = float(np.sqrt(np.mean(((high - low) / 2) ** 2)) / (1.959964 * estimate.std(ddof=1)))
    return coverage, width, float(estimate.mean() - CURVE_THRESHOLD)


def test_curve_bootstrap_covers_a_planted_threshold_of_correlated_curves() -> None:
    """1000 planted sweeps of 16 correlated replicate curves (13 snr points, threshold
    1.1): resampling whole curves, the 95% CI covers the planted threshold in 90-97% of
    them, its rms half-width is 0.88-1.12 times 1.96 sd of the estimate, and the estimate is
    unbiased to 0.002 (2% of one sweep's sd, ~0.03); resampling each snr point on its own
    (the independent-cell bootstrap) on the same data fails the width check.

    Measured over 6 disjoint seed groups of 1000 (this test's seeds are group 0):
    whole curves, coverage 0.908-0.927 (mean 0.920, binomial sd 0.009), width ratio
    0.94-1.01, bias -0.0005..+0.0002; points resampled independently, coverage 0.838-0.868
    and width ratio 0.72-0.76 (the shared offset of a curve is averaged away across its
    points, so the interval is ~25% too narrow). The width bounds sit 6 sd of the
    group-to-group spread (~0.02) from the curve bootstrap's and > 6 sd from the point
    bootstrap's, so either failing means the resampling changed.
    """
    coverage, width, bias = calibration(curves=True)
    assert COVERAGE_RANGE[0] <= coverage <= COVERAGE_RANGE[1], coverage
    assert WIDTH_RANGE[0] <= width <= WIDTH_RANGE[1], width
    assert abs(bias) < 0.002, bias
    _, point_width, _ = calibration(curves=False)
    assert not WIDTH_RANGE[0] <= point_width <= WIDTH_RANGE[1], point_width


def test_curve_resampling_keeps_each_replicate_whole() -> None:
    """With ``curves=True`` every bootstrap resample takes the same replicates at every
    snr: planted curves that are constant along snr but for a linear rise above the
    threshold, differing only by a per-replicate offset, give bootstrap means whose
    residuals about a line are 0 (a point-wise resample leaves them ~offset / sqrt(R))."""
    snr = np.linspace(0.0, 3.0, 7)
    offsets = np.linspace(-0.1, 0.1, 5)
    y = 1.2 + np.maximum(0.0, snr - 1.0)[:, None] + offsets[None, :]
    whole = fit_threshold(snr, y, 1.2, n_boot=64, rng=np.random.default_rng(1), curves=True)
    points = fit_threshold(snr, y, 1.2, n_boot=64, rng=np.random.default_rng(1), curves=False)
    # a resampled mean offset o shifts the crossing to 1 - o (slope 1): whole-curve crossings
    # take only the values 1 - (mean of 5 offsets drawn from the 5), point-wise ones others
    draws = 1.0 - np.linspace(-0.1, 0.1, 5)[np.random.default_rng(1).integers(0, 5, (64, 1, 5))]
    np.testing.assert_allclose(np.sort(whole["boot"]), np.sort(draws.mean(-1)[:, 0]), atol=1e-12)
    assert not np.allclose(np.sort(points["boot"]), np.sort(whole["boot"]), atol=1e-6)


def test_shared_slope_fit_resamples_whole_curves_per_d() -> None:
    """The several-``d`` fit resamples whole curves too: with ``curves=True`` its bootstrap
    crossings are those of the per-d whole-curve resamples (planted curves differing by an
    offset only, every d alike), which differ from point-wise resampling."""
    snr = np.linspace(0.0, 3.0, 7)
    offsets = np.array([-0.1, -0.05, 0.0, 0.05, 0.1])
    one = 1.2 + np.maximum(0.0, snr - 1.0)[:, None] + offsets[None, :]
    y = np.stack([one, one])
    tc = np.array([1.2, 1.2])
    whole = fit_thresholds_shared_slope(
        snr, y, tc, n_boot=32, rng=np.random.default_rng(2), curves=True
    )
    points = fit_thresholds_shared_slope(
        snr, y, tc, n_boot=32, rng=np.random.default_rng(2), curves=False
    )
    assert whole["shared"] and points["shared"]
    draws = np.random.default_rng(2).integers(0, 5, size=(32, 2, 1, 5))
    expected = 1.0 - offsets[draws].mean(-1)[..., 0].T  # (D, n_boot)
    np.testing.assert_allclose(whole["boot"], expected, atol=1e-12)
    assert not np.allclose(points["boot"], expected, atol=1e-6)


def test_estimate_thresholds_resamples_curves_of_shared_cells() -> None:
    """``estimate_thresholds`` resamples whole curves exactly when the cells say
    ``noise: shared`` (their attribute), and says so in its attributes; independent cells
    keep the point-wise bootstrap and their attributes."""
    cells, _ = make_synthetic(
        d=(240,), snr=tuple(np.linspace(0.0, 3.0, 9)), replicates=4, noise=0.01
    )
    assert not shares_noise(cells)
    independent = estimate_thresholds(cells, n_boot=50, seed=3)
    assert "bootstrap_resamples" not in independent.attrs
    shared_cells = cells.assign_attrs(noise="shared")
    assert shares_noise(shared_cells)
    shared = estimate_thresholds(shared_cells, n_boot=50, seed=3)
    assert shared.attrs["bootstrap_resamples"] == CURVE_RESAMPLING
    curve = shared.sel(transition="population").squeeze()
    rng = curve_rng(3, curve, "population")  # the curve's own generator
    direct = fit_threshold(
        curve["theta_hat"]["snr"].values,
        curve["theta_hat"].transpose("snr", "replicate").values,
        float(curve["theta_critical"]),
        n_boot=50,
        rng=rng,
        curves=True,
        outliers=outlier_ratios(shared_cells)
        .sel(transition="population")
        .squeeze()
        .transpose("snr", "replicate")
        .values,
    )
    np.testing.assert_array_equal(curve["threshold_boot"].values, direct["boot"])
    assert not np.array_equal(
        curve["threshold_boot"].values,
        independent.sel(transition="population").squeeze()["threshold_boot"].values,
    )
