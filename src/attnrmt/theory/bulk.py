"""The bulk law ``MP_delta ⊠ MP_gamma`` in mean-1 units (``kappa = 1``): edges, atom,
moments, density and the closed-form distribution function (docs/model.md, "Bulk law").

``u = x g(x) - 1`` solves ``x = f(u) = (1+u)(1+delta u)(1+gamma u)/u``; the edges are ``f`` at
the roots of ``h(u) = 2 delta gamma u^3 + (delta+gamma+delta gamma) u^2 - 1``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from attnrmt._validation import check_finite_array, check_positive

_BISECTION_STEPS = 64
_POLISH_STEPS = 6
_HARD_EDGE_SWITCH = 1e-4  # |w| below which the hard-edge asymptote seeds Newton
_NEWTON_MAX_STEPS = 100
_EDGE_BISECTION_STEPS = 130  # the (z2, z1) bracket can be ~1/delta wide when delta -> 0


def scalar_or_array(values: NDArray[np.float64]) -> np.float64 | NDArray[np.float64]:
    """0-d arrays become numpy scalars; anything else is returned unchanged."""
    return values[()] if values.ndim == 0 else values


def bisect(
    moves_low: Callable[[NDArray], NDArray], low: NDArray, high: NDArray, steps: int
) -> NDArray:
    """Midpoint after ``steps`` vectorised bisection steps: ``low`` moves to the midpoint
    where ``moves_low(mid)``, ``high`` elsewhere. O(steps x cost of ``moves_low``)."""
    for _ in range(steps):
        mid = 0.5 * (low + high)
        below = moves_low(mid)
        low, high = np.where(below, mid, low), np.where(below, high, mid)
    return 0.5 * (low + high)


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
    """Positive root ``u*`` of ``h`` by Newton from ``1/sqrt(c)`` (``h >= 0`` there, ``h``
    increasing and convex on ``u > 0``: monotone convergence); validated float arrays."""
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
    u_lower = bisect(
        lambda u: (2.0 * dg * u + c) * u * u - 1.0 > 0.0, z2, z1, _EDGE_BISECTION_STEPS
    )
    degenerate = z1 <= z2  # the two largest of {1, delta, gamma} coincide
    with np.errstate(invalid="ignore", divide="ignore"):
        edge = np.where(degenerate, 0.0, _f(u_lower, delta, gamma))
    return np.maximum(edge, 0.0)


def _complex_root(x: NDArray, delta: NDArray, gamma: NDArray) -> _ShiftedRoot:
    """Root ``u`` of ``x = f(u)`` with ``Im u >= 0`` for 1-d float arrays, ``x > 0``, as
    ``u = shift + w`` (``shift = -1/max(1, delta, gamma)``: the factors ``1 + a u`` stay exact
    at a hard edge).

    Seed: the real root ``r`` in ``(-min(1, delta, gamma), 0)`` of the monic cubic
    ``(v+1)(v+delta)(v+gamma) - x v^2`` in ``v = 1/u`` is bisected and deflated, whose complex
    pair gives ``u``; near a hard edge at 0 the leading-order root
    ``w = (x / (M K))^{1/k} e^{i pi/k}`` instead (``k`` the multiplicity of the zero).
    Then Newton on the factored cubic, a step kept only where it lowers the residual.
    O(size x 70).
    """
    scales = (np.ones_like(x), delta, gamma)
    largest = np.maximum(np.maximum(delta, gamma), 1.0)
    offsets = tuple(1.0 - a / largest for a in scales)  # exactly 0 where a == largest
    shift = -1.0 / largest

    b_coef = 1.0 + delta + gamma - x
    c_coef = delta + gamma + delta * gamma
    d_coef = delta * gamma
    low = -np.minimum(np.minimum(delta, gamma), 1.0)
    real_root = bisect(
        lambda v: ((v + b_coef) * v + c_coef) * v + d_coef < 0.0,
        low,
        np.zeros_like(low),
        _BISECTION_STEPS,
    )
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
    """Positive critical point ``u*`` of ``f``, the positive root of ``h`` (docs/model.md,
    "Bulk law"): the sample spike separates iff ``1/(theta - delta) < u*``. ``delta = d/V``,
    ``gamma = d/N`` > 0 broadcast; O(size x Newton steps)."""
    delta_arr, gamma_arr = _ratios(delta, gamma)
    return scalar_or_array(critical_u_of_arrays(delta_arr, gamma_arr).copy())


def bulk_edges(
    delta: ArrayLike, gamma: ArrayLike
) -> tuple[np.float64 | NDArray[np.float64], np.float64 | NDArray[np.float64]]:
    """Edges ``(lower, upper)`` of the continuous part of ``MP_delta ⊠ MP_gamma``, mean-1
    units (docs/model.md, "Bulk law"): ``upper = f(u*)``; ``lower`` the maximum of ``f``
    between its two zeros closest to 0 (bisection), 0 when they coincide. The atom at 0
    (:func:`bulk_atom`) is not part of this range. Ratios > 0 broadcast; O(size x 130).

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
    """Density ``|Im u(x)| / (pi x)`` of the continuous part of ``MP_delta ⊠ MP_gamma`` at
    ``x`` (mean-1 units; docs/model.md, "Bulk law"); 0 outside ``(lower, upper)``, without the
    atom (it integrates to ``1 - atom``). ``x``, ratios > 0 broadcast; O(size x 70)."""
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
    """``P(X <= x)`` for ``MP_delta ⊠ MP_gamma`` with the atom, in closed form inside the
    support (docs/model.md, "Bulk law"), clipped to ``[atom, 1]`` against round-off; 0 below
    0, the atom on ``[0, lower]``, 1 from ``upper``. ``x``, ratios > 0 broadcast;
    O(size x 70)."""
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
