"""The bulk law ``MP_delta ⊠ MP_gamma`` (docs/model.md, "Bulk law").

Everything is in mean-1 units (``kappa = 1``): the eigenvalues of ``S / kappa``.

The unknown ``u = x g(x) - 1`` (``g`` the Cauchy transform) solves

    delta*gamma*u^3 + (delta+gamma+delta*gamma)*u^2 + (1+delta+gamma-x)*u + 1 = 0,      (C)

equivalently ``x = f(u) = (1+u)(1+delta*u)(1+gamma*u)/u``.  Numerically we work with
``v = 1/u``, which turns (C) into the *monic* cubic

    P(v) = (v+1)(v+delta)(v+gamma) - x*v^2 = 0,                                           (P)

well conditioned even when ``delta`` or ``gamma`` tends to 0.  For every ``x > 0``,
(P) has exactly one real root in ``(-m, 0)`` with ``m = min(1, delta, gamma)``
(``P(-m) = -x m^2 < 0 < P(0) = delta*gamma``); it is found by bisection, and deflating it
leaves a quadratic whose complex pair (present exactly inside the support) gives
``Im u`` and hence the density ``|Im u| / (pi x)``.

The cumulative distribution is in closed form: along the support ``x = f(u)`` is real, so
``∫ Im(u) dx/x = Im ∫ u f'(u)/f(u) du`` and ``u f'/f = 2 - 1/(1+u) - 1/(1+du) - 1/(1+gu)``.
With ``Im u > 0`` this gives, for ``x`` inside the support,

    CDF(x) = 1 + [2 Im u - arg(1+u) - arg(1+delta u)/delta - arg(1+gamma u)/gamma] / pi,  (F)

which equals the atom at the lower edge and 1 at the upper edge.  Its first-order
sensitivity to ``u`` vanishes at the edges (critical points of ``f``), so it stays accurate
where the roots of (P) are ill conditioned.

Edges are ``f`` at the real critical points of ``f``, the roots of

    h(u) = 2*delta*gamma*u^3 + (delta+gamma+delta*gamma)*u^2 - 1 = 0.                     (H)

The positive root ``u*`` gives the upper edge.  ``f`` vanishes at ``-1, -1/delta, -1/gamma``;
with ``z1 >= z2`` the two largest of these, ``f > 0`` on ``(z2, z1)`` and its maximum there
(a root of (H)) is the lower edge of the continuous part.  When ``z1 == z2`` — i.e. the two
largest of ``{1, delta, gamma}`` coincide (``delta == gamma >= 1``, ``delta == 1 >= gamma``
or ``gamma == 1 >= delta``) — the lower edge is 0 and the density is singular there.

Note: for ``delta == gamma < 1`` the lower edge is *positive* (e.g. 0.02835 at 0.5), not 0
as the source summary of the model states; ``MP_delta`` and ``MP_gamma`` are both
supported away from 0 then, so their free product is too (support within
``[(1-√δ)²(1-√γ)², (1+√δ)²(1+√γ)²]``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from attnrmt._validation import check_finite_array, check_positive

__all__ = [
    "bulk_atom",
    "bulk_cdf",
    "bulk_density",
    "bulk_edges",
    "bulk_moments",
    "critical_u",
    "critical_u_of_arrays",
    "scalar_or_array",
]

_BISECTION_STEPS = 64
_POLISH_STEPS = 6
_HARD_EDGE_SWITCH = 1e-4  # |w| below which the hard-edge asymptote seeds Newton
_NEWTON_MAX_STEPS = 100
_EDGE_BISECTION_STEPS = 130  # the (z2, z1) bracket can be ~1/delta wide when delta -> 0


def scalar_or_array(values: NDArray[np.float64]) -> np.float64 | NDArray[np.float64]:
    """0-d arrays become numpy scalars; anything else is returned unchanged."""
    return values[()] if values.ndim == 0 else values


def _ratios(delta: ArrayLike, gamma: ArrayLike) -> tuple[NDArray, NDArray]:
    return check_positive("delta", delta), check_positive("gamma", gamma)


def _on_varying_axes(solver: Callable[[NDArray, NDArray], NDArray]) -> Callable:
    """Run an iterative per-(delta, gamma) ``solver`` only along axes where they vary.

    Grids often broadcast ``(delta, gamma)`` against many other axes (``x``, ``snr``, ...);
    axes along which neither varies (stride 0 after broadcasting, or length 1) are
    evaluated once and broadcast back.  The result is a read-only broadcast view.
    """

    def solve(delta: NDArray, gamma: NDArray) -> NDArray:
        delta, gamma = np.broadcast_arrays(delta, gamma)
        index = tuple(
            slice(0, 1) if (delta.strides[axis] == 0 and gamma.strides[axis] == 0) else slice(None)
            for axis in range(delta.ndim)
        )
        compact = solver(np.array(delta[index], dtype=float), np.array(gamma[index], dtype=float))
        return np.broadcast_to(compact, delta.shape)

    solve.__doc__ = solver.__doc__
    return solve


@_on_varying_axes
def critical_u_of_arrays(delta: NDArray, gamma: NDArray) -> NDArray:
    """Positive root ``u*`` of (H) by Newton from the right (validated float arrays).

    ``h`` is increasing and convex on ``u > 0`` with ``h(0) = -1``, and
    ``h(1/sqrt(c)) = 2 delta gamma c^{-3/2} >= 0`` (``c = delta+gamma+delta gamma``), so Newton
    started there decreases monotonically to the root.
    """
    delta, gamma = np.broadcast_arrays(delta, gamma)
    dg = delta * gamma
    c = delta + gamma + dg
    u = 1.0 / np.sqrt(c)
    for _ in range(_NEWTON_MAX_STEPS):
        h = (2.0 * dg * u + c) * u * u - 1.0
        slope = (6.0 * dg * u + 2.0 * c) * u
        step = np.maximum(h / slope, 0.0)  # monotone from the right; clip round-off
        u = u - step
        if np.all(step <= 4.0 * np.finfo(float).eps * u):
            break
    return u


def _f(u: NDArray, delta: NDArray, gamma: NDArray) -> NDArray:
    """``f(u) = (1+u)(1+delta u)(1+gamma u)/u``."""
    return (1.0 + u) * (1.0 + delta * u) * (1.0 + gamma * u) / u


@_on_varying_axes
def _lower_edge(delta: NDArray, gamma: NDArray) -> NDArray:
    """Lower edge of the continuous part: max of ``f`` on ``(z2, z1)``, 0 if empty."""
    delta, gamma = np.broadcast_arrays(delta, gamma)
    scales = np.sort(np.stack([np.ones_like(delta), delta, gamma]), axis=0)
    largest, middle = scales[2], scales[1]
    z1 = -1.0 / largest  # closest zero of f to 0
    z2 = -1.0 / middle
    dg = delta * gamma
    c = delta + gamma + dg
    # h > 0 on (z2, u_L) and h < 0 on (u_L, z1): bisection keeps that bracket.
    low, high = z2.copy(), z1.copy()
    for _ in range(_EDGE_BISECTION_STEPS):
        mid = 0.5 * (low + high)
        h = (2.0 * dg * mid + c) * mid * mid - 1.0
        positive = h > 0.0
        low = np.where(positive, mid, low)
        high = np.where(positive, high, mid)
    u_lower = 0.5 * (low + high)
    degenerate = z1 <= z2  # the two largest of {1, delta, gamma} coincide
    with np.errstate(invalid="ignore", divide="ignore"):
        edge = np.where(degenerate, 0.0, _f(u_lower, delta, gamma))
    return np.maximum(edge, 0.0)


def _complex_root(x: NDArray, delta: NDArray, gamma: NDArray) -> _ShiftedRoot:
    """Root of (C) with ``Im u >= 0`` (``Im u = 0`` where all roots are real).

    Inputs are 1-d float arrays with ``x > 0``.  Returned as ``u = z1 + w`` with
    ``z1 = -1/max(1, delta, gamma)`` (the zero of ``f`` closest to 0) so that the factors
    ``1 + a u = (1 - a/M) + a w`` are exact where they vanish at a hard edge.

    1. Initial guess: the real root ``r`` of (P) in ``(-m, 0)`` is bisected; deflation
       leaves ``v^2 + (B + r) v - delta gamma / r`` (``B = 1 + delta + gamma - x``), whose
       complex pair gives ``u = 1/v``: ``|v|^2 = c1 = -delta gamma/r``,
       ``Im u = sqrt(4 c1 - b1^2) / (2 c1)``, ``Re u = -b1 / (2 c1)``.  Its relative error
       is ~eps/x near a hard edge at 0, so there the leading-order root
       ``w = (x / (M K))^{1/k} e^{i pi/k}`` is used instead (``k`` = multiplicity of the
       zero ``z1``, ``K = M^k prod_{a != M} (1 - a/M)``).
    2. Newton on the factored cubic ``Q = prod_a ((1 - a/M) + a w) - x (z1 + w)``,
       keeping a step only where it lowers ``|Q|``.
    """
    scales = (np.ones_like(x), delta, gamma)
    largest = np.maximum(np.maximum(delta, gamma), 1.0)
    offsets = tuple(1.0 - a / largest for a in scales)  # exactly 0 where a == largest
    shift = -1.0 / largest

    b_coef = 1.0 + delta + gamma - x
    c_coef = delta + gamma + delta * gamma
    d_coef = delta * gamma
    low = -np.minimum(np.minimum(delta, gamma), 1.0)
    high = np.zeros_like(low)
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (low + high)
        value = ((mid + b_coef) * mid + c_coef) * mid + d_coef
        negative = value < 0.0
        low = np.where(negative, mid, low)
        high = np.where(negative, high, mid)
    real_root = 0.5 * (low + high)
    b1 = b_coef + real_root
    c1 = -d_coef / real_root
    gap = 4.0 * c1 - b1 * b1
    u_guess = -b1 / (2.0 * c1) + 1j * np.sqrt(np.maximum(gap, 0.0)) / (2.0 * c1)
    w = u_guess - shift

    vanishing = [offset == 0.0 for offset in offsets]
    multiplicity = sum(v.astype(int) for v in vanishing)
    hard_edge = multiplicity >= 2
    if np.any(hard_edge):
        k = np.where(hard_edge, multiplicity, 2)
        strength = np.ones_like(x)
        for a, offset, zero in zip(scales, offsets, vanishing, strict=True):
            strength = strength * np.where(zero, a, offset)
        radius = (x / (largest * strength)) ** (1.0 / k)
        asymptotic = radius * np.exp(1j * np.pi / k)
        w = np.where(hard_edge & (radius < _HARD_EDGE_SWITCH), asymptotic, w)

    def cubic(w: NDArray) -> tuple[NDArray, NDArray]:
        f1, f2, f3 = (offset + a * w for a, offset in zip(scales, offsets, strict=True))
        value = f1 * f2 * f3 - x * (shift + w)
        slope = f2 * f3 + delta * f1 * f3 + gamma * f1 * f2 - x
        return value, slope

    value, slope = cubic(w)
    residual = np.abs(value)
    for _ in range(_POLISH_STEPS):
        with np.errstate(all="ignore"):  # a non-finite step is simply rejected below
            candidate = w - value / slope
            candidate_value, candidate_slope = cubic(candidate)
            candidate_residual = np.abs(candidate_value)
        better = np.isfinite(candidate) & (candidate_residual < residual)
        w = np.where(better, candidate, w)
        value = np.where(better, candidate_value, value)
        slope = np.where(better, candidate_slope, slope)
        residual = np.where(better, candidate_residual, residual)
    w = w.real + 1j * np.abs(w.imag)
    return _ShiftedRoot(w=w, shift=shift, scales=scales, offsets=offsets)


@dataclass(frozen=True)
class _ShiftedRoot:
    """``u = shift + w``; ``offsets[i] + scales[i] * w == 1 + scales[i] * u``."""

    w: NDArray
    shift: NDArray
    scales: tuple[NDArray, NDArray, NDArray]
    offsets: tuple[NDArray, NDArray, NDArray]


def critical_u(delta: ArrayLike, gamma: ArrayLike) -> np.float64 | NDArray[np.float64]:
    """Positive critical point ``u*`` of ``f`` (docs/model.md, "Bulk law").

    The unique positive root of ``2 delta gamma u^3 + (delta+gamma+delta gamma) u^2 - 1 = 0``.
    The sample spike separates from the bulk iff ``u = 1/(theta - delta) < u*``.

    Parameters
    ----------
    delta, gamma : array_like
        Ratios ``d/V`` and ``d/N``, > 0; broadcast against each other.

    Returns
    -------
    numpy.ndarray or numpy.float64
        ``u*`` with the broadcast shape.
    """
    delta_arr, gamma_arr = _ratios(delta, gamma)
    return scalar_or_array(critical_u_of_arrays(delta_arr, gamma_arr).copy())


def bulk_edges(
    delta: ArrayLike, gamma: ArrayLike
) -> tuple[np.float64 | NDArray[np.float64], np.float64 | NDArray[np.float64]]:
    """Edges ``(lower, upper)`` of the continuous part of ``MP_delta ⊠ MP_gamma``
    (docs/model.md, "Bulk law").

    ``upper = f(u*)`` with ``u*`` from :func:`critical_u`; ``lower`` is ``f`` at the negative
    critical point with ``f > 0`` (the maximum of ``f`` between its two zeros closest to 0),
    and 0 when those zeros coincide (the two largest of ``{1, delta, gamma}`` equal, e.g.
    ``delta == gamma >= 1``).  An atom at 0 (:func:`bulk_atom`) is not part of this range.

    Parameters
    ----------
    delta, gamma : array_like
        Ratios > 0; broadcast.

    Returns
    -------
    lower, upper : numpy.ndarray or numpy.float64
        Mean-1 units (multiply by ``kappa`` for eigenvalues of ``S``).

    Examples
    --------
    >>> round(float(bulk_edges(0.5, 0.5)[1]), 3)
    4.409
    """
    delta_arr, gamma_arr = _ratios(delta, gamma)
    delta_arr, gamma_arr = np.broadcast_arrays(delta_arr, gamma_arr)
    upper = _f(critical_u_of_arrays(delta_arr, gamma_arr), delta_arr, gamma_arr)
    lower = _lower_edge(delta_arr, gamma_arr).copy()
    return scalar_or_array(lower), scalar_or_array(upper)


def bulk_atom(delta: ArrayLike, gamma: ArrayLike) -> np.float64 | NDArray[np.float64]:
    """Mass of the atom at 0: ``max(0, 1 - 1/delta, 1 - 1/gamma)`` (docs/model.md, "Bulk law")."""
    delta_arr, gamma_arr = _ratios(delta, gamma)
    atom = np.maximum(np.maximum(1.0 - 1.0 / delta_arr, 1.0 - 1.0 / gamma_arr), 0.0)
    return scalar_or_array(atom)


def bulk_moments(
    delta: ArrayLike, gamma: ArrayLike
) -> tuple[
    np.float64 | NDArray[np.float64],
    np.float64 | NDArray[np.float64],
    np.float64 | NDArray[np.float64],
]:
    """First three moments of ``MP_delta ⊠ MP_gamma`` (docs/model.md, "Bulk law").

    ``m1 = 1``, ``m2 = 1 + delta + gamma``,
    ``m3 = 1 + 3 (delta + gamma) + delta^2 + gamma^2 + 3 delta gamma``.
    """
    delta_arr, gamma_arr = _ratios(delta, gamma)
    delta_arr, gamma_arr = np.broadcast_arrays(delta_arr, gamma_arr)
    m1 = np.ones_like(delta_arr)
    m2 = 1.0 + delta_arr + gamma_arr
    m3 = (
        1.0
        + 3.0 * (delta_arr + gamma_arr)
        + delta_arr**2
        + gamma_arr**2
        + 3.0 * delta_arr * gamma_arr
    )
    return scalar_or_array(m1), scalar_or_array(m2), scalar_or_array(m3)


def _inside(x: NDArray, delta: NDArray, gamma: NDArray) -> tuple[NDArray, NDArray, NDArray]:
    """Broadcast ``x, delta, gamma`` and flag ``lower < x < upper`` (and ``x > 0``)."""
    # edges on the (delta, gamma) shape only, then broadcast against x
    delta, gamma = np.broadcast_arrays(delta, gamma)
    lower = _lower_edge(delta, gamma)
    upper = _f(critical_u_of_arrays(delta, gamma), delta, gamma)
    x, lower, upper = np.broadcast_arrays(x, lower, upper)
    inside = (x > lower) & (x < upper) & (x > 0.0)
    return inside, lower, upper


def bulk_density(
    x: ArrayLike, delta: ArrayLike, gamma: ArrayLike
) -> np.float64 | NDArray[np.float64]:
    """Density of the continuous part of ``MP_delta ⊠ MP_gamma`` at ``x``
    (docs/model.md, "Bulk law").

    ``rho(x) = |Im u(x)| / (pi x)`` with ``u`` the complex root of the cubic (C) in the
    module docstring; 0 outside ``(lower, upper)`` and for ``x <= 0``.  The atom at 0
    (:func:`bulk_atom`) is not included, so the density integrates to ``1 - atom``.

    Parameters
    ----------
    x : array_like
        Points (mean-1 units, i.e. eigenvalues of ``S / kappa``); finite.
    delta, gamma : array_like
        Ratios > 0.  ``x``, ``delta`` and ``gamma`` broadcast together.

    Returns
    -------
    numpy.ndarray or numpy.float64
        Density with the broadcast shape.
    """
    x_arr = check_finite_array("x", x)
    delta_arr, gamma_arr = _ratios(delta, gamma)
    inside, _, _ = _inside(x_arr, delta_arr, gamma_arr)
    x_b, delta_b, gamma_b = np.broadcast_arrays(x_arr, delta_arr, gamma_arr)
    density = np.zeros(inside.shape)
    if np.any(inside):
        xs, ds, gs = x_b[inside], delta_b[inside], gamma_b[inside]
        root = _complex_root(xs, ds, gs)
        density[inside] = root.w.imag / (np.pi * xs)
    return scalar_or_array(density)


def bulk_cdf(x: ArrayLike, delta: ArrayLike, gamma: ArrayLike) -> np.float64 | NDArray[np.float64]:
    """Cumulative distribution of ``MP_delta ⊠ MP_gamma`` including the atom
    (docs/model.md, "Bulk law").

    Closed form (F) of the module docstring inside the support; 0 for ``x < 0``,
    the atom ``max(0, 1-1/delta, 1-1/gamma)`` on ``[0, lower]``, 1 from ``upper`` on.
    Right-continuous, non-decreasing (clipped to ``[atom, 1]`` against round-off) and
    exact up to floating point (no quadrature).

    Parameters
    ----------
    x : array_like
        Points (mean-1 units); finite.
    delta, gamma : array_like
        Ratios > 0; broadcast with ``x``.

    Returns
    -------
    numpy.ndarray or numpy.float64
        ``P(X <= x)`` with the broadcast shape.
    """
    x_arr = check_finite_array("x", x)
    delta_arr, gamma_arr = _ratios(delta, gamma)
    inside, _, upper = _inside(x_arr, delta_arr, gamma_arr)
    x_b, delta_b, gamma_b = np.broadcast_arrays(x_arr, delta_arr, gamma_arr)
    atom = np.maximum(np.maximum(1.0 - 1.0 / delta_b, 1.0 - 1.0 / gamma_b), 0.0)
    cdf = np.where(x_b < 0.0, 0.0, np.where(x_b >= upper, 1.0, atom))
    if np.any(inside):
        xs, ds, gs = x_b[inside], delta_b[inside], gamma_b[inside]
        root = _complex_root(xs, ds, gs)
        imag_u = root.w.imag
        args = [
            np.arctan2(a * imag_u, offset + a * root.w.real) / a  # arg(1 + a u) / a
            for a, offset in zip(root.scales, root.offsets, strict=True)
        ]
        inner = 1.0 + (2.0 * imag_u - args[0] - args[1] - args[2]) / np.pi
        cdf[inside] = np.clip(inner, atom[inside], 1.0)
    return scalar_or_array(cdf)
