"""A ragged grid (config ``replicates: {d: count}``, docs/architecture.md, "Rounds"): fewer
replicate curves at some ``d``, the rest NaN. The analysis sees each ``d``'s own curves:
the same numbers whatever the NaN padding or where it sits, and a ``d`` fitted alone is
the fit of its curves in a square grid."""

from __future__ import annotations

import numpy as np

from attnrmt.analysis.thresholds import (
    _crossing_ci,
    fit_threshold,
    fit_thresholds_shared_slope,
)

from .test_thresholds import PLANTED_D, PLANTED_LIMIT, PLANTED_SNR, PLANTED_THETA_C

KEYS = ("extrapolated", "estimate", "ci_low", "ci_high", "boot", "slope")


def ragged_curves(seed: int, slopes: float | np.ndarray = 1.0) -> np.ndarray:
    """theta_hat (d, snr, 12) of PLANTED_D's planted line; 12 curves at d <= 1000, 5 above."""
    rng = np.random.default_rng(seed)
    s_c = PLANTED_LIMIT + 0.16 * PLANTED_D ** (-1 / 3)
    slope = np.broadcast_to(np.asarray(slopes, dtype=float), PLANTED_D.shape)[:, None]
    truth = PLANTED_THETA_C + np.maximum(0.0, slope * (PLANTED_SNR - s_c[:, None]))
    sigma = 0.05 * np.sqrt(1000.0 / PLANTED_D)[:, None, None]
    reps = truth[..., None] + sigma * rng.normal(size=(*truth.shape, 12))
    reps[3:, :, 5:] = np.nan
    return reps


def fit(reps: np.ndarray) -> dict:
    tc = np.full(PLANTED_D.size, PLANTED_THETA_C)
    return fit_thresholds_shared_slope(
        PLANTED_SNR, reps, tc, n_boot=200, rng=np.random.default_rng(7), curves=True
    )


def test_the_padding_of_a_ragged_grid_changes_nothing() -> None:
    """More NaN columns, or the missing curves of one d first instead of last: the same
    estimates, CIs and bootstrap draws, exactly (resampling among the curves a d has; the
    split fit halving each d's own curves; the CI widened for each d's own count)."""
    reps = ragged_curves(1)
    base = fit(reps)
    assert base["shared"]
    padded = fit(np.concatenate([reps, np.full((*reps.shape[:2], 4), np.nan)], axis=-1))
    moved = reps.copy()
    moved[4] = np.roll(reps[4], 7, axis=-1)  # d = 4000: its 5 curves in columns 7 ... 11
    for other in (padded, fit(moved)):
        for key in KEYS:
            np.testing.assert_array_equal(other[key], base[key])
    at_4000 = _crossing_ci(base["boot"][4], base["extrapolated"][4], 5, 200, 0.95)
    np.testing.assert_array_equal(at_4000, [base["ci_low"][4], base["ci_high"][4]])  # n = 5


def test_each_d_resamples_its_own_curves() -> None:
    """60 seeds: each d's CI half-width / 1.96 against the spread of its estimate across
    seeds is 1.02-1.26 (measured; 5 curves at d >= 2000: the bootstrap of few curves is
    wide). Resampling among all 12 columns at every d (NaN curves drawn) gives 1.55-1.9,
    drawing 12 of a d's 5 curves 0.61-0.84: the bounds [0.85, 1.4] catch both."""
    fits = [fit(ragged_curves(seed)) for seed in range(60)]
    estimates = np.array([one["extrapolated"] for one in fits])
    halfwidths = np.array([(one["ci_high"] - one["ci_low"]) / 2 for one in fits])
    ratio = halfwidths.mean(0) / 1.96 / estimates.std(0, ddof=1)
    assert np.all((ratio > 0.85) & (ratio < 1.4)), ratio


def test_a_d_fitted_alone_is_its_curves_in_a_square_grid() -> None:
    """Slopes that differ across d (the per-d fallback): each d's fit in the ragged grid is
    fit_threshold of its own curves (12 or 5, no NaN column), the generator taken in turn."""
    reps = ragged_curves(3, np.linspace(0.6, 1.4, PLANTED_D.size))
    ragged = fit(reps)
    assert not ragged["shared"]
    rng = np.random.default_rng(7)
    for i, count in enumerate((12, 12, 12, 5, 5)):
        alone = fit_threshold(
            PLANTED_SNR, reps[i, :, :count], PLANTED_THETA_C, n_boot=200, rng=rng, curves=True
        )
        for key in KEYS:
            np.testing.assert_array_equal(ragged[key][i], alone[key])


def test_the_limit_is_widened_for_the_fewest_curves_at_a_d() -> None:
    """finite_size_thresholds on a ragged grid: the limit's CI is finite_size_fit's with
    ``n_replicates`` = the fewest curves a d has (5 here, not the grid's 12 columns)."""
    import xarray as xr

    from attnrmt.analysis.thresholds import (
        finite_size_fit,
        finite_size_thresholds,
        finite_size_weights,
    )

    reps = ragged_curves(5)
    one = fit(reps)
    theta = xr.DataArray(reps[:, None], dims=("d", "transition", "snr", "replicate"))
    data = xr.Dataset(
        {
            "threshold_extrapolated": (("d", "transition"), one["extrapolated"][:, None]),
            "threshold_boot": (("d", "transition", "boot"), one["boot"][:, None]),
            "theta_hat": theta,
        },
        coords={"d": PLANTED_D, "transition": ["sample"]},
    )
    limit = finite_size_thresholds(data)
    assert limit is not None
    expected = finite_size_fit(
        PLANTED_D,
        one["extrapolated"],
        one["boot"],
        weights=finite_size_weights(one["boot"], PLANTED_D.size),
        n_replicates=5,
    )
    assert float(limit["fss_ci_low"].item()) == expected["ci_low"]
    assert float(limit["fss_ci_high"].item()) == expected["ci_high"]
