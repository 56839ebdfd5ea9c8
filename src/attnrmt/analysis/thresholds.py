"""Empirical BBP thresholds along ``snr``
(docs/model.md, "Spikes", "What the pipeline tests"); the estimator is in docs/thresholds.md.

Estimator ("theta inversion + linear extrapolation"):

1. Invert the bulk's spike map
(docs/model.md, "Spikes"; it depends only on ``delta``, ``gamma``, not on the
   variant): a measured outlier ``ell`` of ``Sigma_E`` gives
   ``theta_hat = delta + [(x-1-delta) + sqrt((x-1-delta)^2 - 4 delta)]/2``, ``x = ell/kappa``
   (the root ``u < 1/sqrt(delta)`` of ``x = (1+u)(1+delta u)/u``); a measured outlier
   ``lambda`` of ``S`` gives ``theta_hat = delta + 1/u`` with ``u in (0, u*)`` the root of
   ``lambda/kappa = (1+u)(1+delta u)(1+gamma u)/u``. Eigenvalues at or inside the edge give
   the critical value ``theta_c`` (``delta + sqrt(delta)`` resp. ``delta + 1/u*``). A snr
   point's ``theta`` is the inverse at its replicates' mean outlier (:func:`_point_means`).
2. Both variants say ``theta`` is *affine* in ``snr`` (paper: ``(alpha/kappa) snr``;
   finite_vocab: ``(alpha/kappa)(snr + delta)``), so above the threshold the replicate
   mean of ``theta_hat`` is a straight line in ``snr`` with no curvature to bias a linear
   fit. Points are "detected" when the mean exceeds ``theta_c (1 + margin)`` (default
   margin 0.1, which keeps the fit out of the finite-d critical window); a least-squares
   line through the detected points (each half of the replicates over the points the
   other half detects, the two averaged: :func:`_split_fit`) is extrapolated to
   ``theta_c``; the crossing is the threshold. Its intercept/slope (``snr`` offset)
   discriminates the variants: 0 (paper) versus ``delta`` (finite_vocab).
3. CIs: percentile bootstrap, resampling replicates independently at every ``snr``; in a
   ``noise: shared`` sweep (one noise realisation per replicate curve, cells attribute
   ``noise``) whole replicate curves are resampled instead, the same replicates at every
   ``snr`` (docs/thresholds.md, "Shared-noise curves").
4. Out of range: when every swept point is detected the estimate is a bound
   (``threshold < min snr``), when fewer than two are detected it is ``> max snr`` (or an
   interval between the last undetected and the single detected point); the model-based
   extrapolation is still reported in ``extrapolated``.
5. Finite size: with several ``d``, fit ``estimate(d) = a + b d^(-w)`` for each law ``w`` of
   :data:`FSS_LAWS` by least squares weighted with the inverse variance of each ``d``'s
   bootstrap crossings (:func:`finite_size_weights`), and average the limits ``a`` with
   Akaike weights; the CI mixes the laws' bootstrap limits in the same proportions, so the
   law's own uncertainty is in it (:func:`finite_size_fit`). The limit is a verdict only
   from at least :data:`MIN_FSS_D` values of ``d`` (a line through two points always fits).
6. Shared slope: with several ``d`` the lines of step 2 share one slope across the ``d`` of
   a curve (it is ``alpha/kappa`` at every ``d``), fitted jointly with ``d``-specific
   intercepts (:func:`fit_thresholds_shared_slope`), unless a chi-square test finds the
   per-``d`` slopes differ (p below :data:`SLOPE_CONSISTENCY_P`): then every ``d`` keeps its
   own free slope. A single-``d`` sweep is estimated exactly as in steps 2-4.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import xarray as xr

from attnrmt.analysis._common import at_signal, effective_ratios, plain, setting_rng
from attnrmt.analysis.noise_edge import finite_d_edges
from attnrmt.analysis.own_theta import own_critical, own_theta
from attnrmt.contract import CURVE_AXES, TABLE_AXIS, TRANSITIONS
from attnrmt.theory.spike import critical_theta, theta_from_population, theta_from_sample

DEFAULT_MARGIN = 0.1
DEFAULT_N_BOOT = 200
DEFAULT_LEVEL = 0.95
#: Fewest distinct d for a d -> inf limit that counts as a verdict (docs/thresholds.md).
MIN_FSS_D = 3
#: Candidate finite-size laws of the per-``d`` thresholds: exponents ``w`` of
#: ``estimate(d) = a + b d^(-w)``, averaged by :func:`finite_size_fit` (docs/thresholds.md,
#: "Finite-size law"): the critical window's 1/3, the outlier fluctuations' 1/2, and the
#: ``O(1/d)`` corrections of the mean outlier location.
FSS_LAWS = (1.0 / 3.0, 0.5, 1.0)
#: Below this p-value of the slope-consistency test the per-``d`` slopes of a curve differ
#: and every ``d`` keeps its own slope (docs/thresholds.md, "Shared slope").
SLOPE_CONSISTENCY_P = 0.01
#: ``estimator`` values of thresholds.csv: one sweep's d (or a single d) fitted alone, a
#: curve's d sharing one slope, and the fallback when their slopes differ.
FREE_SLOPE = "free slope"
SHARED_SLOPE = "slope shared across d"
SLOPES_DIFFER = "free slope per d (slopes differ across d)"


def theta_hat(cells: xr.Dataset) -> xr.DataArray:
    """Per-replicate ``theta_hat`` for both transitions (step 1 of the module's estimator).

    Population: ``pop_top_eigenvalues`` at the signal index; sample: ``top_eigenvalues`` at
    the signal index (:func:`attnrmt.analysis._common.signal_index`). Cells of an
    anisotropic or file table law: their own inverse maps (:mod:`attnrmt.analysis.own_theta`).

    Returns
    -------
    xarray.DataArray
        Dims of the cells' ``top_eigenvalues`` minus ``k``, plus ``transition``.
    """
    delta, gamma = effective_ratios(cells)
    pop, sam = outlier_ratios(cells)
    pop_theta = xr.apply_ufunc(theta_from_population, pop, delta, 1.0)
    mean, sd = finite_d_edges(cells)  # finite T: the finite-d edge, mean + sd (docs/model.md)
    sam_theta = xr.apply_ufunc(theta_from_sample, sam, delta, gamma, 1.0, mean + sd)
    out = xr.concat([pop_theta, sam_theta], dim="transition", join="outer")
    out = out.assign_coords(transition=list(TRANSITIONS))
    out.attrs = {"long_name": "spike strength inferred from the outlier", "units": "kappa"}
    return own_theta(cells, out)


def outlier_ratios(cells: xr.Dataset) -> xr.DataArray:
    """``ell / kappa`` (population) and ``lambda / kappa`` (sample) at the signal index,
    along ``transition`` (the dims of :func:`theta_hat`). O(cells)."""
    ratios = [
        at_signal(cells, name, population=name.startswith("pop")) / cells["kappa"]
        for name in ("pop_top_eigenvalues", "top_eigenvalues")
    ]
    out = xr.concat(ratios, dim="transition", join="outer")
    return out.assign_coords(transition=list(TRANSITIONS)).drop_vars("k", errors="ignore")


def _weighted_line(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, ...]:
    """Weighted least-squares line ``y = a + b x`` along the last axis (vectorised).

    Minimises ``sum_i w_i (y_i - a - b x_i)^2``; a point with weight 0 (or NaN) is left out.
    Returns ``(a, b, count)`` with ``count`` the points of positive weight; ``b`` is NaN with
    fewer than two of them or no spread in ``x``. O(size of y) time and memory.
    """
    w = np.where(np.asarray(weights, dtype=float) > 0, weights, 0.0)
    used = w > 0
    xs = np.where(used, x, 0.0)
    ys = np.where(used, y, 0.0)
    sw = w.sum(-1)
    sx = (w * xs).sum(-1)
    sy = (w * ys).sum(-1)
    sxx = (w * xs * xs).sum(-1)
    sxy = (w * xs * ys).sum(-1)
    count = used.sum(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        denom = sw * sxx - sx * sx
        slope = np.where((count >= 2) & (denom > 0), (sw * sxy - sx * sy) / denom, np.nan)
        intercept = (sy - slope * sx) / sw
    return intercept, slope, count


def _masked_line(s: np.ndarray, y: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, ...]:
    """Least-squares line ``y = a + b s`` over ``mask`` along the last axis (vectorised)."""
    return _weighted_line(s, y, np.asarray(mask, dtype=float))


def _contiguous_from_top(detected: np.ndarray) -> np.ndarray:
    """Keep only the run of detected points that ends at the largest snr (last axis).

    ``theta`` increases with ``snr`` in both variants, so a true detection is monotone: an
    isolated "detection" below an undetected snr is a sub-threshold fluctuation and is
    dropped.
    """
    undetected_above = np.flip(np.cumsum(np.flip(~detected, axis=-1), axis=-1), axis=-1)
    return detected & (undetected_above == 0)


def _point_means(y: np.ndarray, x: np.ndarray | None, pairs: tuple | None) -> np.ndarray:
    """``theta`` of each point from replicates along the last axis (docs/thresholds.md,
    step 1): the mean of the ``theta_hat`` ``y``, or with the outliers ``x`` (``lambda /
    kappa``, same shape) the inverse map at their mean, read off each point's replicate pairs
    ``pairs = (x0, y0)`` (shape ``(..., R)``, the trailing dims of ``x`` but the resampled
    leading ones) by linear interpolation, so any monotone inverse map serves.
    O(size of y + points x R log R)."""
    with np.errstate(invalid="ignore"), _all_nan_rows_stay_nan():
        if x is None or pairs is None:
            return np.nanmean(y, axis=-1)
        mean_x = np.nanmean(x, axis=-1)
    out = np.full(mean_x.shape, np.nan)
    x0, y0 = pairs
    for p in np.ndindex(*x0.shape[:-1]):
        ok = np.isfinite(x0[p]) & np.isfinite(y0[p])
        if ok.any():
            order = np.argsort(x0[p][ok])
            out[(..., *p)] = np.interp(mean_x[(..., *p)], x0[p][ok][order], y0[p][ok][order])
    return out


def _with_value(y: np.ndarray) -> np.ndarray:
    """Which replicates (last axis) have a value at some snr (the axis before): a ragged
    grid's ``d`` has fewer than the grid's replicate axis. O(size of y)."""
    return np.isfinite(y).any(-2)


def _split_fit(
    y: np.ndarray, x: np.ndarray | None, pairs: tuple, level: Any, fit: Any
) -> tuple[np.ndarray, ...]:
    """Line ``(intercept, slope)`` fitted on each half of the replicates (last axis) over the
    points the other half detects, the two averaged in proportion to their replicates (so
    when the halves detect the same points it is the line of all replicates' means), so no
    point is kept for the noise it brings to the fit (docs/thresholds.md, step 3); one
    replicate is its own half. Each curve's replicates are its leading columns with a value
    (a ragged grid: fewer at some ``d``), halved by their own count. ``fit(mean, detected)``
    fits one line; ``x``, ``pairs`` as in :func:`_point_means`. O(fit + size of y)."""
    n = _with_value(y).sum(-1)  # replicates of each curve
    half, column = n // 2, np.arange(y.shape[-1])
    first = (column < half[..., None, None]) | (half[..., None, None] == 0)
    cuts = (first, (column >= half[..., None, None]))
    means = [
        _point_means(np.where(c, y, np.nan), None if x is None else np.where(c, x, np.nan), pairs)
        for c in cuts
    ]
    lines = [
        fit(mean, _contiguous_from_top(np.isfinite(other) & (other > level)))
        for mean, other in zip(means, means[::-1], strict=True)
    ]
    out = []
    sizes = np.stack([np.maximum(half, 1), np.maximum(n - half, 1)])
    for one, two in zip(*lines, strict=True):
        both = np.stack([one, two])  # a line shared over d (fewer axes): the halves' mean size
        w = np.where(np.isfinite(both), sizes if one.ndim == half.ndim else sizes.mean(-1), 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append((np.where(w > 0, both, 0.0) * w).sum(0) / w.sum(0))
    return tuple(out)


def fit_threshold(
    snr: np.ndarray,
    theta_reps: np.ndarray,
    theta_c: float,
    *,
    margin: float = DEFAULT_MARGIN,
    n_boot: int = DEFAULT_N_BOOT,
    level: float = DEFAULT_LEVEL,
    rng: np.random.Generator | None = None,
    curves: bool = False,
    outliers: np.ndarray | None = None,
) -> dict[str, Any]:
    """Threshold in ``snr`` from ``theta_hat`` replicates along one snr curve (steps 1–4).

    Parameters
    ----------
    snr : ndarray (S,)
        Swept signal strengths.
    theta_reps : ndarray (S, R)
        ``theta_hat`` per snr and replicate (NaN = missing).
    theta_c : float
        Critical spike strength of the transition (docs/model.md, "Spikes").
    margin : float
        Detection margin: a point is detected when its replicate mean exceeds
        ``theta_c (1 + margin)``.
    n_boot : int
        Bootstrap resamples (replicates resampled independently at each snr).
    level : float
        CI level.
    rng : numpy.random.Generator, optional
        Resampling generator (default: seeded with 0).
    curves : bool
        Resample whole replicate curves (column ``r`` of ``theta_reps`` at every snr
        together): the replicates of a ``noise: shared`` sweep, whose snr values share one
        noise realisation (docs/thresholds.md, "Shared-noise curves"). Default False:
        replicates resampled independently at each snr (independent cells).
    outliers : ndarray (S, R), optional
        ``lambda / kappa`` of the replicates: a point's ``theta`` is then the inverse map at
        their mean (:func:`_point_means`), not the mean of ``theta_reps``.

    Returns
    -------
    dict
        ``estimate`` (NaN when a bound), ``ci_low``, ``ci_high``, ``bound`` (``"none"``,
        ``"below"`` = threshold < min snr, ``"above"`` = > max snr, ``"interval"``,
        ``"failed"``), ``extrapolated`` (line crossing regardless of range), ``slope``,
        ``intercept`` (theta = intercept + slope snr), ``offset`` (= intercept/slope),
        ``n_detected``, ``boot`` (ndarray (n_boot,) of bootstrap crossings).
    """
    rng = np.random.default_rng(0) if rng is None else rng
    s = np.asarray(snr, dtype=float)
    y = np.asarray(theta_reps, dtype=float).reshape(s.size, -1)
    order = np.argsort(s)
    s, y = s[order], y[order]
    x = None if outliers is None else np.asarray(outliers, dtype=float).reshape(y.shape)[order]
    kept = _with_value(y)
    y, x = y[:, kept], None if x is None else x[:, kept]
    level_c = theta_c * (1.0 + margin)
    mean = _point_means(y, x, (x, y))
    detected = _contiguous_from_top(np.isfinite(mean) & (mean > level_c))

    def line(m: np.ndarray, det: np.ndarray) -> tuple[np.ndarray, ...]:
        return _masked_line(s, m, det)[:2]

    intercept, slope = (float(v) for v in _split_fit(y, x, (x, y), level_c, line))
    with np.errstate(divide="ignore", invalid="ignore"):
        crossing = (theta_c - intercept) / slope if slope > 0 else np.nan
        offset = intercept / slope if slope > 0 else np.nan

    # bootstrap: resample replicates at each snr independently (or whole curves)
    n_rep = y.shape[1]
    idx = rng.integers(0, n_rep, size=(n_boot, 1 if curves else s.size, n_rep))
    idx = np.broadcast_to(idx, (n_boot, s.size, n_rep))
    samples = np.take_along_axis(np.broadcast_to(y, (n_boot, *y.shape)), idx, axis=2)
    x_samples = None if x is None else np.take_along_axis(np.broadcast_to(x, samples.shape), idx, 2)
    b_int, b_slope = _split_fit(samples, x_samples, (x, y), level_c, line)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = np.where(b_slope > 0, (theta_c - b_int) / b_slope, np.nan)
    ci = _crossing_ci(boot, crossing, n_rep, n_boot, level)
    result: dict[str, object] = {
        "extrapolated": float(crossing),
        "slope": slope,
        "intercept": intercept,
        "offset": float(offset),
        "n_detected": int(detected.sum()),
        "boot": boot,
    }
    return {**result, **_classify(s, detected, crossing, ci)}


def _crossing_ci(
    boot: np.ndarray, crossing: float, n_rep: int, n_boot: int, level: float
) -> np.ndarray:
    """Percentile CI of bootstrap crossings, widened about ``crossing`` by
    ``sqrt(n/(n-1))`` for ``n_rep`` replicates and stretched to contain ``crossing``
    (docs/thresholds.md, "Confidence intervals"); NaN when fewer than half the resamples
    give a crossing. O(n_boot)."""
    tail = (1.0 - level) / 2.0
    if np.isfinite(boot).sum() < max(2, n_boot // 2):
        return np.array([np.nan, np.nan])
    ci = np.nanquantile(boot, [tail, 1.0 - tail])
    # Resampling n replicates gives a mean whose spread is sqrt((n-1)/n) of the true
    # one, so the percentile interval under-covers with 3-6 replicates (measured: 87%
    # for a 95% CI at n = 3): widen it about the estimate by sqrt(n/(n-1)).
    if np.isfinite(crossing) and n_rep > 1:
        ci = crossing + np.sqrt(n_rep / (n_rep - 1.0)) * (ci - crossing)
    if np.isfinite(crossing):
        ci = np.array([min(ci[0], crossing), max(ci[1], crossing)])
    return ci


def _classify(
    s: np.ndarray, detected: np.ndarray, crossing: float, ci: np.ndarray
) -> dict[str, object]:
    """``estimate``, ``ci_low``, ``ci_high``, ``bound`` of one curve from its sorted ``snr``,
    detected points and line crossing (step 6 of docs/thresholds.md, "Out of range")."""
    n_det = int(detected.sum())
    if n_det == 0:
        return {"estimate": np.nan, "ci_low": float(s[-1]), "ci_high": np.inf, "bound": "above"}
    if n_det == 1:
        first = int(np.argmax(detected))
        below = s[:first][~detected[:first]]
        return {
            "estimate": np.nan,
            "ci_low": float(below[-1]) if below.size else -np.inf,
            "ci_high": float(s[first]),
            "bound": "interval",
        }
    if not np.isfinite(crossing):
        return {"estimate": np.nan, "ci_low": np.nan, "ci_high": np.nan, "bound": "failed"}
    if detected[0] or crossing < s[0]:
        return {"estimate": np.nan, "ci_low": -np.inf, "ci_high": float(s[0]), "bound": "below"}
    if crossing > s[-1]:
        return {"estimate": np.nan, "ci_low": float(s[-1]), "ci_high": np.inf, "bound": "above"}
    return {
        "estimate": float(crossing),
        "ci_low": float(ci[0]),
        "ci_high": float(ci[1]),
        "bound": "none",
    }


def _all_nan_rows_stay_nan() -> warnings.catch_warnings:
    """Silence numpy's 'Mean of empty slice' RuntimeWarning (all-NaN rows stay NaN)."""
    return warnings.catch_warnings(action="ignore", category=RuntimeWarning)


def _pooled_mean_variance(y: np.ndarray, detected: np.ndarray) -> np.ndarray:
    """Variance of a replicate mean at the detected points of each ``d``, pooled over them.

    ``y`` (..., D, S, R) replicates, ``detected`` (..., D, S). Returns (..., D):
    ``sum_i sum_r (y_ir - mean_i)^2 / sum_i (n_i - 1)`` over detected points ``i``, divided
    by their mean replicate count (NaN without two replicates at a detected point).
    O(size of y).
    """
    finite = np.isfinite(y)
    n = finite.sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"), _all_nan_rows_stay_nan():
        mean = np.nanmean(y, axis=-1)
        squares = np.where(finite, (y - mean[..., None]) ** 2, 0.0).sum(-1)
        use = detected & (n >= 2)
        dof = np.where(use, n - 1, 0).sum(-1)
        pooled = np.where(use, squares, 0.0).sum(-1) / dof
        n_mean = np.where(use, n, 0).sum(-1) / use.sum(-1)
        return np.where(dof > 0, pooled / n_mean, np.nan)


def _line_sums(s: np.ndarray, y: np.ndarray, mask: np.ndarray, axis: int) -> tuple[np.ndarray, ...]:
    """Least-squares sums of lines ``y = a + b s`` along ``axis`` over the points ``mask``
    holds (``s`` broadcast against ``y``): ``(n, sbar, ybar, Sxx, Sxy)``, centred within
    each line. O(size of y)."""
    n = mask.sum(axis)
    sbar = np.where(mask, s, 0.0).sum(axis) / n
    ybar = np.where(mask, y, 0.0).sum(axis) / n
    ds = np.where(mask, s - np.expand_dims(sbar, axis), 0.0)
    dy = np.where(mask, y - np.expand_dims(ybar, axis), 0.0)
    return n, sbar, ybar, (ds * ds).sum(axis), (ds * dy).sum(axis)


def _replicate_slope_variance(
    s: np.ndarray, y: np.ndarray, detected: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Variance of the free slope ``B_d`` of the mean curve at each ``d``, estimated from
    whole replicate curves (shared noise: the points of one curve are correlated).

    ``y`` (..., D, S, R) replicates, ``detected`` (..., D, S). Each replicate's own line is
    fitted by least squares over its finite detected points; the slope of the replicate
    mean is the mean of those slopes (least squares is linear in ``theta``), so its
    variance is ``var_r(b_r) / k`` over the ``k`` replicates with two such points (ddof 1;
    NaN below ``k = 2``). Reduces to ``v_d / Sxx_d`` of :func:`_shared_slope_lines` when
    the points are independent. Returns ``(variance, k)``, both (..., D). O(size of y).
    """
    with np.errstate(invalid="ignore", divide="ignore"), _all_nan_rows_stay_nan():
        n, _, _, sxx, sxy = _line_sums(s[:, None], y, detected[..., None] & np.isfinite(y), -2)
        slopes = np.where((n >= 2) & (sxx > 0), sxy / sxx, np.nan)
        k = np.isfinite(slopes).sum(-1)
        return np.where(k >= 2, np.nanvar(slopes, axis=-1, ddof=1) / k, np.nan), k


def _shared_slope_lines(
    s: np.ndarray,
    mean: np.ndarray,
    detected: np.ndarray,
    mean_variance: np.ndarray,
    slope_variance: np.ndarray | None = None,
) -> tuple[np.ndarray, ...]:
    """Lines ``theta = A_d + B snr`` with one slope ``B`` shared by all ``d`` (vectorised).

    ``mean`` and ``detected`` (..., D, S), ``mean_variance`` (..., D) the variance of a point
    mean at each ``d`` (:func:`_pooled_mean_variance`). Weighted least squares with weights
    ``1/mean_variance``: ``B = sum_d w_d Sxy_d / sum_d w_d Sxx_d`` (``Sxx_d``, ``Sxy_d``
    centred within ``d`` over its detected points), ``A_d = ybar_d - B sbar_d``. Equal weights
    when some used ``d`` has no finite positive variance. Also the per-``d`` free slopes
    ``B_d = Sxy_d / Sxx_d`` and the slope-consistency statistic
    ``Q = sum_d w_d Sxx_d (B_d - B)^2`` (chi-square with ``dof`` = number of ``d`` with two
    detected points minus 1 when the slopes agree; docs/thresholds.md, "Shared slope").
    With ``slope_variance`` (..., D), the variance of each ``B_d`` measured on whole
    replicate curves (:func:`_replicate_slope_variance`; shared-noise sweeps, whose points
    along ``snr`` are correlated), ``B`` is the ``1/slope_variance``-weighted mean of the
    ``B_d`` and ``Q = sum_d (B_d - B)^2 / slope_variance_d``: the same formulas, since
    ``w_d Sxx_d`` is ``1/Var(B_d)`` for independent points.
    Returns ``(A (..., D), B (...), B_d (..., D), Q (...), dof (...))``. O(size of mean).
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        n, sbar, ybar, sxx, sxy = _line_sums(s, mean, detected, -1)
        used = n >= 1
        good = np.isfinite(mean_variance) & (mean_variance > 0)
        all_good = np.all(good | ~used, axis=-1, keepdims=True)
        w = np.where(used, np.where(all_good, 1.0 / np.where(good, mean_variance, 1.0), 1.0), 0.0)
        den = (w * sxx).sum(-1)
        slope = np.where(den > 0, (w * sxy).sum(-1) / den, np.nan)
        intercept = np.where(used, ybar - slope[..., None] * sbar, np.nan)
        two = n >= 2
        own = np.where(two & (sxx > 0), sxy / sxx, np.nan)
        q = np.where(two, w * sxx * (own - slope[..., None]) ** 2, 0.0).sum(-1)
        dof = two.sum(-1) - 1
        if slope_variance is None:
            return intercept, slope, own, np.where(all_good[..., 0], q, np.nan), dof
        has_slope = two & (sxx > 0)
        good_slope = np.isfinite(slope_variance) & (slope_variance > 0)
        all_slopes = np.all(good_slope | ~has_slope, axis=-1)
        weight = np.where(
            has_slope & good_slope, 1.0 / np.where(good_slope, slope_variance, 1.0), 0.0
        )
        total = weight.sum(-1)
        curve_slope = np.where(
            total > 0, (weight * np.where(has_slope, own, 0.0)).sum(-1) / total, np.nan
        )
        slope = np.where(
            all_slopes, curve_slope, np.where(den > 0, sxy.sum(-1) / sxx.sum(-1), np.nan)
        )
        intercept = np.where(used, ybar - slope[..., None] * sbar, np.nan)
        deviation = np.where(has_slope, own - slope[..., None], 0.0)
        q = (weight * deviation**2).sum(-1)
    return intercept, slope, own, np.where(all_slopes, q, np.nan), dof


def _slope_consistency_p(q: float, dof: int, nu: int | None) -> float:
    """p-value of the slope-consistency statistic ``Q`` of :func:`_shared_slope_lines`:
    chi-square with ``dof`` degrees of freedom (known point variances, ``nu`` None), or,
    with slope variances estimated from ``nu + 1`` replicate curves at the fewest,
    ``Q / dof`` against ``F(dof, nu)``, which keeps the nominal rate with few replicates
    (docs/thresholds.md, "Shared slope"). NaN without two slopes. O(1)."""
    from scipy.stats import chi2, f

    if dof < 1 or not np.isfinite(q):
        return float("nan")
    if nu is None:
        return float(chi2.sf(q, dof))
    return float(f.sf(q / dof, dof, nu)) if nu >= 1 else float("nan")


def fit_thresholds_shared_slope(
    snr: np.ndarray,
    theta_reps: np.ndarray,
    theta_c: np.ndarray,
    *,
    margin: float = DEFAULT_MARGIN,
    n_boot: int = DEFAULT_N_BOOT,
    level: float = DEFAULT_LEVEL,
    rng: np.random.Generator | None = None,
    min_p: float | None = None,
    curves: bool = False,
    outliers: np.ndarray | None = None,
) -> dict[str, Any]:
    """Thresholds at every ``d`` of one curve with one ``theta``-vs-``snr`` slope shared by
    all ``d`` (docs/thresholds.md, "Shared slope").

    Both variants make ``theta`` affine in ``snr`` with slope ``alpha/kappa``, which does not
    depend on ``d`` (docs/model.md, "Spikes"); only the intercept moves with ``d`` (realised
    ``delta``, finite-size shift). So each ``d`` keeps the detection rule of
    :func:`fit_threshold`, and the lines ``theta_hat = A_d + B snr`` are fitted jointly
    (:func:`_shared_slope_lines`, each ``d`` weighted by the inverse variance of its point
    means); ``d``'s threshold is ``(theta_c_d - A_d) / B``. The bootstrap resamples
    replicates independently at every (``d``, ``snr``) and refits jointly, so its columns
    carry the correlation the shared slope induces between the ``d`` (the ``d -> inf`` fit
    refits column by column). The data decide: when the per-``d`` slopes disagree
    (slope-consistency p-value below ``min_p``, default :data:`SLOPE_CONSISTENCY_P`) every
    ``d`` falls back to :func:`fit_threshold` (free slope).

    Parameters
    ----------
    snr : ndarray (S,)
    theta_reps : ndarray (D, S, R)
        ``theta_hat`` per ``d``, snr and replicate (NaN = missing).
    theta_c : ndarray (D,)
        Critical spike strength at each ``d``.
    margin, n_boot, level, rng, outliers : as in :func:`fit_threshold` (``outliers``
        (D, S, R)).
    min_p : float, optional
        Smallest slope-consistency p-value at which the slope is still shared.
    curves : bool
        The replicates are whole curves (shared noise): resample them whole (as
        :func:`fit_threshold`; at each ``d`` the same replicates at every snr, the ``d``
        independently, each ``d`` being its own setting with its own seeds), and weigh the
        per-``d`` slopes and test their consistency with slope variances measured on the
        curves (:func:`_replicate_slope_variance`), not with the independent-points
        formula, which the curves' correlation along ``snr`` makes too small.

    Returns
    -------
    dict
        Per ``d`` (arrays (D,)): ``estimate``, ``ci_low``, ``ci_high``, ``bound``,
        ``extrapolated``, ``slope``, ``intercept``, ``offset``, ``n_detected``; ``boot``
        (D, n_boot); per curve: ``shared_slope`` (``B``), ``slope_p`` (p-value of the
        consistency test, NaN with fewer than two ``d`` of two detected points), ``shared``
        (bool: the slope was shared). O(n_boot D S R) time and memory.
    """
    rng = np.random.default_rng(0) if rng is None else rng
    min_p = SLOPE_CONSISTENCY_P if min_p is None else min_p
    s = np.asarray(snr, dtype=float)
    order = np.argsort(s)
    s = s[order]
    y = np.asarray(theta_reps, dtype=float)[:, order, :]
    x = None if outliers is None else np.asarray(outliers, dtype=float)[:, order, :]
    # each d's replicates with a value first (a ragged grid has fewer at some d): counts[i]
    with_value = _with_value(y)
    counts = with_value.sum(-1)
    first = np.argsort(~with_value, axis=-1, kind="stable")[:, None, : max(counts.max(), 1)]
    y = np.take_along_axis(y, first, -1)
    x = None if x is None else np.take_along_axis(x, first, -1)
    tc = np.asarray(theta_c, dtype=float).reshape(-1)
    n_d, _, n_rep = y.shape
    level_c = (tc * (1.0 + margin))[:, None]

    def lines(samples: np.ndarray, x_samples: np.ndarray | None) -> tuple[Any, ...]:
        mean = _point_means(samples, x_samples, (x, y))
        detected = _contiguous_from_top(np.isfinite(mean) & (mean > level_c))
        slope_variance, slope_count = (
            _replicate_slope_variance(s, samples, detected) if curves else (None, None)
        )
        variance = _pooled_mean_variance(samples, detected)
        _, _, own, q, dof = _shared_slope_lines(s, mean, detected, variance, slope_variance)

        def line(m: np.ndarray, det: np.ndarray) -> tuple[np.ndarray, ...]:
            return _shared_slope_lines(s, m, det, variance, slope_variance)[:2]

        a, b = _split_fit(samples, x_samples, (x, y), level_c, line)
        with np.errstate(invalid="ignore", divide="ignore"):
            crossing = np.where(b[..., None] > 0, (tc - a) / b[..., None], np.nan)
        return crossing, a, b, own, q, dof, detected, slope_count

    crossing, intercept, slopes, own, q, dof, detected, slope_count = lines(y, x)
    slope = float(slopes)
    nu = None  # the F test's denominator: curves at the d with a slope and the fewest
    if slope_count is not None:
        counts = slope_count[np.isfinite(own)]
        nu = int(counts.min()) - 1 if counts.size else 0
    p_value = _slope_consistency_p(float(q), int(dof), nu)
    if np.isfinite(p_value) and p_value < min_p:
        fits = [
            fit_threshold(
                s,
                y[i],
                float(tc[i]),
                margin=margin,
                n_boot=n_boot,
                level=level,
                rng=rng,
                curves=curves,
                outliers=None if x is None else x[i],
            )
            for i in range(n_d)
        ]
        out = {key: np.array([fit[key] for fit in fits]) for key in fits[0]}
        return {**out, "shared_slope": slope, "slope_p": p_value, "shared": False}
    high = np.maximum(counts, 1)[:, None, None]  # resample among each d's own replicates
    idx = rng.integers(0, high, size=(n_boot, n_d, 1, n_rep) if curves else (n_boot, *y.shape))
    idx = np.broadcast_to(idx, (n_boot, *y.shape))
    real = np.arange(n_rep) < counts[:, None, None]
    samples = np.where(real, np.take_along_axis(np.broadcast_to(y, idx.shape), idx, -1), np.nan)
    x_samples = (
        None
        if x is None
        else np.where(real, np.take_along_axis(np.broadcast_to(x, idx.shape), idx, -1), np.nan)
    )
    boot = lines(samples, x_samples)[0].T  # (D, n_boot)
    per_d = [
        _classify(
            s,
            detected[i],
            float(crossing[i]),
            _crossing_ci(boot[i], float(crossing[i]), int(counts[i]), n_boot, level),
        )
        for i in range(n_d)
    ]
    with np.errstate(invalid="ignore", divide="ignore"):
        offset = intercept / slope if slope > 0 else np.full(n_d, np.nan)
    return {
        **{key: np.array([fit[key] for fit in per_d]) for key in per_d[0]},
        "extrapolated": crossing,
        "slope": np.full(n_d, slope),
        "intercept": intercept,
        "offset": offset,
        "n_detected": detected.sum(-1),
        "boot": boot,
        "shared_slope": slope,
        "slope_p": p_value,
        "shared": True,
    }


_SCALARS = (
    "estimate",
    "ci_low",
    "ci_high",
    "extrapolated",
    "slope",
    "intercept",
    "offset",
    "n_detected",
)


def estimate_thresholds(
    cells: xr.Dataset,
    *,
    margin: float = DEFAULT_MARGIN,
    n_boot: int = DEFAULT_N_BOOT,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
    curves: bool | None = None,
) -> xr.Dataset:
    """Both empirical thresholds for every snr curve of a sweep (module estimator).

    Parameters
    ----------
    cells : xarray.Dataset
        Contract-shaped ``cells.zarr`` dataset.
    margin, n_boot, level : see :func:`fit_threshold`.
    seed : int
        Seed of the bootstrap generator (one generator per curve, derived from ``seed``).
    curves : bool, optional
        Resample whole replicate curves (:func:`fit_threshold`); default: when the cells
        are of a ``noise: shared`` sweep (attribute ``noise``, :func:`shares_noise`).

    Returns
    -------
    xarray.Dataset
        On the curve axes (all axes but ``snr``) and ``transition``: ``threshold_estimate``,
        ``threshold_ci_low``, ``threshold_ci_high``, ``threshold_extrapolated``,
        ``threshold_bound`` (str), ``theta_slope``, ``theta_intercept``, ``theta_offset``,
        ``threshold_n_detected``, ``theta_critical``; ``threshold_boot`` (+ ``boot``); and
        ``theta_hat`` (with ``snr`` and ``replicate``). With several ``d`` the curves of all
        ``d`` are fitted together (:func:`fit_thresholds_shared_slope`), adding
        ``theta_slope_shared`` and ``slope_consistency_p`` (curve axes without ``d``) and
        the attribute ``slope_consistency_min_p``; a single-``d`` sweep uses
        :func:`fit_threshold` per curve. O(curves x n_boot x snr x replicates).
    """
    curves = shares_noise(cells) if curves is None else bool(curves)
    th = theta_hat(cells)
    delta, gamma = effective_ratios(cells)
    curve_dims = [d for d in CURVE_AXES if d in th.dims]
    th = th.transpose(*curve_dims, "transition", "snr", "replicate")
    snr = np.asarray(th["snr"].values, dtype=float)
    shape = tuple(th.sizes[d] for d in curve_dims)
    n_tr = th.sizes["transition"]
    out = {name: np.full((*shape, n_tr), np.nan) for name in _SCALARS}
    bound = np.full((*shape, n_tr), "", dtype=object)
    boot = np.full((*shape, n_tr, n_boot), np.nan)
    theta_c = np.full((*shape, n_tr), np.nan)
    # effective ratios per curve (constant along snr; take the mean over what is there)
    dmean = delta.mean([d for d in delta.dims if d not in curve_dims]) if delta.dims else delta
    gmean = gamma.mean([d for d in gamma.dims if d not in curve_dims]) if gamma.dims else gamma
    dmean = dmean.broadcast_like(th.isel(transition=0, snr=0, replicate=0, drop=True))
    gmean = gmean.broadcast_like(th.isel(transition=0, snr=0, replicate=0, drop=True))
    dvals = np.asarray(dmean.transpose(*curve_dims).values, dtype=float)
    gvals = np.asarray(gmean.transpose(*curve_dims).values, dtype=float)
    values = np.asarray(th.values, dtype=float)
    ratios = np.asarray(
        outlier_ratios(cells).transpose(*curve_dims, "transition", "snr", "replicate").values,
        dtype=float,
    )
    multi_d = "d" in curve_dims and th.sizes["d"] >= 2
    d_axis = curve_dims.index("d") if multi_d else 0
    rest_shape = shape[:d_axis] + shape[d_axis + 1 :] if multi_d else ()
    # one generator per curve keyed by its coordinates but the law's (docs/data-contract.md,
    # "Seeds of the analysis"): order-free, and a law's CIs are a one-law sweep's
    loop_dims = [dim for dim in curve_dims if not (multi_d and dim == "d")]
    shared_slope = np.full((*rest_shape, n_tr), np.nan)
    slope_p = np.full((*rest_shape, n_tr), np.nan)
    for index in np.ndindex(*shape):
        for t, transition in enumerate(th["transition"].values):
            if np.isfinite(dvals[index]) and np.isfinite(gvals[index]):
                theta_c[(*index, t)] = float(
                    critical_theta(dvals[index], gvals[index], str(transition))
                )
    theta_c, th = own_critical(th, curve_dims, theta_c)  # general bulks: their own theta_c
    for index in np.ndindex(*(rest_shape if multi_d else shape)):
        setting = {
            dim: plain(th[dim].values[i])
            for dim, i in zip(loop_dims, index, strict=True)
            if dim != TABLE_AXIS
        }
        for t in range(n_tr):
            rng = setting_rng(seed, {**setting, "transition": str(th["transition"].values[t])})
            # every d of the curve at once (one shared slope), or the single curve
            at = (
                [(*index[:d_axis], i, *index[d_axis:], t) for i in range(shape[d_axis])]
                if multi_d
                else [(*index, t)]
            )
            usable = [i for i in at if np.isfinite(theta_c[i]) and np.isfinite(values[i]).any()]
            if not usable:
                continue
            options: dict[str, Any] = {
                "margin": margin,
                "n_boot": n_boot,
                "level": level,
                "rng": rng,
            }
            if multi_d:
                fit = fit_thresholds_shared_slope(
                    snr,
                    np.stack([values[i] for i in usable]),
                    np.array([theta_c[i] for i in usable]),
                    curves=curves,
                    outliers=np.stack([ratios[i] for i in usable]),
                    **options,
                )
                shared_slope[(*index, t)] = fit["shared_slope"]
                slope_p[(*index, t)] = fit["slope_p"]
            else:
                one = fit_threshold(
                    snr,
                    values[usable[0]],
                    float(theta_c[usable[0]]),
                    curves=curves,
                    outliers=ratios[usable[0]],
                    **options,
                )
                fit = {name: [value] for name, value in one.items()}
            for row, i in enumerate(usable):
                for name in (*_SCALARS, "bound", "boot"):
                    target = bound if name == "bound" else boot if name == "boot" else out[name]
                    target[i] = fit[name][row]
    bound[np.isposinf(theta_c)] = "hidden"  # a general law's signal out of reach: no estimate
    dims = [*curve_dims, "transition"]
    coords = {d: th[d] for d in dims}

    def da(values: np.ndarray, long_name: str, units: str = "snr") -> xr.DataArray:
        return xr.DataArray(
            values, dims=dims, coords=coords, attrs={"long_name": long_name, "units": units}
        )

    ds = xr.Dataset(
        {
            "threshold_estimate": da(out["estimate"], "empirical threshold (NaN when a bound)"),
            "threshold_ci_low": da(out["ci_low"], "lower end of CI or bound"),
            "threshold_ci_high": da(out["ci_high"], "upper end of CI or bound"),
            "threshold_extrapolated": da(out["extrapolated"], "line crossing theta_c"),
            "threshold_bound": da(
                bound.astype(str), "none | below | above | interval | failed | hidden", "1"
            ),
            "theta_slope": da(out["slope"], "d theta_hat / d snr", "kappa per snr"),
            "theta_intercept": da(out["intercept"], "theta_hat at snr = 0", "kappa"),
            "theta_offset": da(out["offset"], "intercept / slope (paper 0, finite_vocab delta)"),
            "threshold_n_detected": da(out["n_detected"], "detected snr points", "count"),
            "theta_critical": da(theta_c, "critical theta", "kappa"),
            "threshold_boot": xr.DataArray(
                boot,
                dims=[*dims, "boot"],
                coords=coords,
                attrs={"long_name": "bootstrap crossings", "units": "snr"},
            ),
            "theta_hat": th,
        },
        attrs={"threshold_margin": margin, "n_boot": n_boot, "ci_level": level},
    )
    if multi_d:
        rest_dims = [dim for dim in dims if dim != "d"]
        rest_coords = {dim: th[dim] for dim in rest_dims}
        ds["theta_slope_shared"] = xr.DataArray(
            shared_slope,
            dims=rest_dims,
            coords=rest_coords,
            attrs={
                "long_name": "slope of theta_hat in snr shared by every d",
                "units": "kappa per snr",
            },
        )
        ds["slope_consistency_p"] = xr.DataArray(
            slope_p,
            dims=rest_dims,
            coords=rest_coords,
            attrs={"long_name": "p-value of equal slopes across d", "units": "1"},
        )
        ds.attrs["slope_consistency_min_p"] = SLOPE_CONSISTENCY_P
    if curves:  # independent sweeps keep their attributes
        ds.attrs["bootstrap_resamples"] = CURVE_RESAMPLING
    return ds


# --------------------------------------------------------------------------- shared noise

#: ``bootstrap_resamples`` attribute of thresholds resampled by whole replicate curves.
CURVE_RESAMPLING = "whole replicate curves"


def shares_noise(cells: xr.Dataset) -> bool:
    """Whether ``cells`` are of a ``noise: shared`` sweep (attribute ``noise``, written by
    the store, docs/data-contract.md, "Shared-noise sweeps"): the snr values of one
    replicate share one noise realisation, so CIs resample whole replicate curves. O(1)."""
    return str(cells.attrs.get("noise", "independent")) == "shared"


def finite_size_weights(boot: np.ndarray | None, n: int) -> np.ndarray:
    """Inverse-variance weights of ``n`` per-``d`` threshold estimates for the finite-size
    fits (docs/thresholds.md, "Finite-size scaling").

    ``w_d = 1 / s_d^2`` with ``s_d`` half the 16-84% range of ``d``'s bootstrap crossings
    (a robust standard deviation: at small ``d`` a resample can nearly flatten the line fit
    and throw its crossing far out). Falls back to equal weights when ``boot`` is None or
    any ``s_d`` is not finite and positive (exact data, too few resamples), so a weighted
    fit is never built on a made-up variance. O(n B) time for ``boot`` of shape (n, B).
    """
    if boot is None:
        return np.ones(n)
    samples = np.asarray(boot, dtype=float).reshape(n, -1)
    with np.errstate(invalid="ignore"), _all_nan_rows_stay_nan():
        q16, q84 = np.nanquantile(samples, [0.16, 0.84], axis=1)
    scale = 0.5 * (q84 - q16)
    if not np.all(np.isfinite(scale) & (scale > 0)):
        return np.ones(n)
    return 1.0 / scale**2


def _law_lines(
    d: np.ndarray, y: np.ndarray, weights: np.ndarray, laws: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Weighted least-squares lines ``y = a_k + b_k d^(-w_k)``, one per law ``w_k``
    (vectorised over the leading axes of ``y`` (..., n); weight 0 leaves a point out).
    Returns ``(a, b, chi2)``, each (..., K), ``chi2`` the weighted squared residual.
    O(K x size of y)."""
    x = d[None, :] ** (-laws[:, None])  # (K, n)
    ys = y[..., None, :]
    a, b, _ = _weighted_line(x, ys, weights)
    residual = np.where(weights > 0, ys - a[..., None] - b[..., None] * x, 0.0)
    return a, b, np.sum(weights * residual**2, axis=-1)


def law_weights(chi2: np.ndarray) -> np.ndarray:
    """Akaike weights ``exp(-chi2_k / 2)``, normalised over the last axis: the laws have
    the same number of parameters, so AIC differs by ``chi2`` alone (docs/thresholds.md,
    "Finite-size law"). O(size of chi2)."""
    excess = chi2 - np.min(chi2, axis=-1, keepdims=True)
    weight = np.exp(-0.5 * excess)
    return weight / weight.sum(-1, keepdims=True)


def mixture_interval(values: np.ndarray, probabilities: np.ndarray, level: float) -> np.ndarray:
    """Central ``level`` interval of the mixture whose component ``k`` is the sample
    ``values[:, k]`` (B draws) with probability ``probabilities[k]``: every draw of
    component ``k`` weighs ``probabilities[k] / B``. O(B K log(B K))."""
    flat = values.reshape(-1)
    mass = np.broadcast_to(probabilities / values.shape[0], values.shape).reshape(-1)
    order = np.argsort(flat)
    cumulative = np.cumsum(mass[order])
    tail = (1.0 - level) / 2.0
    at = np.searchsorted(cumulative, [tail, 1.0 - tail])
    return flat[order][np.minimum(at, flat.size - 1)]


def finite_size_fit(
    d: np.ndarray,
    estimates: np.ndarray,
    boot: np.ndarray | None = None,
    *,
    level: float = DEFAULT_LEVEL,
    weights: np.ndarray | None = None,
    n_replicates: int | None = None,
    laws: tuple[float, ...] = FSS_LAWS,
) -> dict[str, float]:
    """The ``d -> inf`` limit with the finite-size law chosen by the data: each law
    ``estimate(d) = a_k + b_k d^(-w_k)`` of ``laws`` fitted by weighted least squares,
    averaged with Akaike weights (:func:`law_weights`); the CI is the central interval of
    the mixture of the laws' bootstrap limits in those proportions, so the law's own
    uncertainty is inside it (docs/thresholds.md, "Finite-size law").

    Parameters
    ----------
    d : ndarray (n,)
        Dimensions (at least two distinct finite estimates are needed).
    estimates : ndarray (n,)
        Threshold estimates (use the extrapolated crossings so bounds still carry a value).
    boot : ndarray (n, B), optional
        Bootstrap samples per d; every law refitted on each complete column (same weights)
        gives its bootstrap limits, widened about its ``a_k`` by ``sqrt(n/(n-1))`` for
        ``n_replicates`` (``a_k`` is linear in the per-``d`` estimates, whose resamples are
        under-dispersed) before they are mixed.
    level : float
        CI level.
    weights : ndarray (n,), optional
        Inverse variances of the estimates (:func:`finite_size_weights`); default equal.
    n_replicates : int, optional
        Replicates per point behind ``boot``.
    laws : tuple of float
        Exponents ``w_k`` of the candidate laws.

    Returns
    -------
    dict
        ``a`` (averaged limit), ``b`` and ``law`` (coefficient and exponent of the law of
        largest weight), ``law_weight`` (its weight), ``ci_low``, ``ci_high`` (NaN without
        ``boot``), ``n_d``. O(K n B) time.
    """
    d = np.asarray(d, dtype=float)
    y = np.asarray(estimates, dtype=float)
    w = np.ones(d.size) if weights is None else np.asarray(weights, dtype=float)
    ok = np.isfinite(y) & (d > 0)
    nan = float("nan")
    result = {"a": nan, "b": nan, "law": nan, "law_weight": nan, "ci_low": nan, "ci_high": nan}
    result["n_d"] = float(np.unique(d[ok]).size)
    if result["n_d"] < 2:
        return result
    exponents = np.asarray(laws, dtype=float)
    w_ok = np.where(ok, w, 0.0)
    a_k, b_k, chi2 = _law_lines(d, np.where(ok, y, 0.0), w_ok, exponents)
    p = law_weights(chi2)
    best = int(np.argmax(p))
    result.update(
        a=float(p @ a_k), b=float(b_k[best]), law=float(exponents[best]), law_weight=float(p[best])
    )
    if boot is None:
        return result
    samples = np.asarray(boot, dtype=float).T  # (B, n)
    samples = samples[np.all(np.isfinite(samples[:, ok]), axis=1)]
    if samples.shape[0] < 2:
        return result
    boot_a, _, _ = _law_lines(d, np.where(ok, samples, 0.0), w_ok, exponents)  # (B, K)
    n = n_replicates or 0
    spread = np.sqrt(n / (n - 1.0)) if n >= 2 else 1.0
    boot_a = a_k + spread * (boot_a - a_k)
    ci = mixture_interval(boot_a, p, level)
    result.update(ci_low=float(ci[0]), ci_high=float(ci[1]))
    return result


def finite_size_thresholds(
    thresholds: xr.Dataset, *, level: float = DEFAULT_LEVEL
) -> xr.Dataset | None:
    """Apply :func:`finite_size_fit` along ``d`` to every curve of
    :func:`estimate_thresholds`, each ``d`` weighted by the inverse variance of its
    bootstrap crossings (:func:`finite_size_weights`).

    Returns
    -------
    xarray.Dataset or None
        ``fss_limit``, ``fss_slope``, ``fss_ci_low``, ``fss_ci_high``, ``fss_n_d``,
        ``fss_law``, ``fss_law_weight`` on the curve axes without ``d`` (plus
        ``transition``); None when the sweep has a single ``d``. O(curves x K x d x B).
    """
    if "d" not in thresholds.dims or thresholds.sizes["d"] < 2:
        return None
    est = thresholds["threshold_extrapolated"]
    other = [dim for dim in est.dims if dim != "d"]
    est = est.transpose("d", *other)
    boot = thresholds["threshold_boot"].transpose("d", *other, "boot")
    n_rep = np.full(est.shape[1:], thresholds.sizes.get("replicate", 0))
    if "theta_hat" in thresholds:  # the fewest replicates at a d (a ragged grid)
        counts = thresholds["theta_hat"].notnull().any("snr").sum("replicate").min("d")
        n_rep = counts.broadcast_like(est.isel(d=0)).transpose(*other).values
    d = np.asarray(est["d"].values, dtype=float)
    shape = tuple(est.sizes[o] for o in other)
    out = {name: np.full(shape, np.nan) for name in FSS_FIELDS}
    for index in np.ndindex(*shape):
        sel = (slice(None), *index)
        fit = finite_size_fit(
            d,
            est.values[sel],
            boot.values[sel],
            level=level,
            weights=finite_size_weights(boot.values[sel], d.size),
            n_replicates=int(n_rep[index]),
        )
        for name, key in FSS_FIELDS.items():
            out[name][index] = fit[key]
    coords = {o: est[o] for o in other}
    # attributes come from the contract's table (attnrmt.contract.VARIABLE_ATTRS)
    return xr.Dataset(
        {name: xr.DataArray(values, dims=other, coords=coords) for name, values in out.items()},
        attrs={
            "fss_laws": list(FSS_LAWS),
            "fss_min_d": MIN_FSS_D,
            "fss_weights": "inverse variance of the per-d bootstrap crossings",
        },
    )


#: analysis.zarr variables of :func:`finite_size_thresholds` -> keys of
#: :func:`finite_size_fit`.
FSS_FIELDS = {
    "fss_limit": "a",
    "fss_slope": "b",
    "fss_ci_low": "ci_low",
    "fss_ci_high": "ci_high",
    "fss_n_d": "n_d",
    "fss_law": "law",
    "fss_law_weight": "law_weight",
}
