"""Numerical free probability for the bulk ``MP_c1 ⊠ ... ⊠ MP_ck ⊠ nu``: the subordination
map ``x(s) = s prod_i (1 + c_i u_nu(s))``, its density and edges, for a discrete or
Marchenko–Pastur population ``nu`` (docs/model.md, "A general bulk by subordination").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from attnrmt._validation import check_finite_array, check_positive
from attnrmt.theory.bulk import bisect

_LADDER = 10.0 ** np.arange(1.0, -14.5, -0.5)  # eta / scale, then eta = 0
_LEVEL_STEPS = 4
_FINAL_STEPS = 30
_HALVINGS = 12
_GRID = 64  # samples of x'(s) per interval between poles when bracketing critical points
_GRID_UNBOUNDED = 4096  # the same on the (at most two) unbounded intervals
_LOGIT = 32.0  # samples reach exp(-_LOGIT) of an interval's ends
_BISECTION_STEPS = 80
_BLOCK = 2**17  # array elements per block of a discrete transform (fits in cache)
_BRANCH_TOL = 1e-4  # relative distance of a critical point to the physical s(x)


@dataclass(frozen=True)
class DiscreteLaw:
    """A discrete population law ``sum_j weights_j delta_{atoms_j}`` (atoms >= 0)."""

    atoms: NDArray[np.float64]
    weights: NDArray[np.float64]

    @classmethod
    def of(cls, atoms: ArrayLike, weights: ArrayLike | None = None) -> DiscreteLaw:
        """Validated law; ``weights`` default to uniform and are normalised to sum 1."""
        a = check_positive("atoms", atoms, allow_zero=True).ravel()
        w = np.ones_like(a) if weights is None else check_positive("weights", weights).ravel()
        if a.size == 0 or w.shape != a.shape:
            raise ValueError(f"weights={weights!r}: must match atoms={atoms!r} (non-empty)")
        return cls(atoms=a, weights=w / w.sum())

    def transform(self, s: NDArray) -> tuple[NDArray, NDArray]:
        """``u(s) = sum_j w_j t_j/(s - t_j)`` and ``u'(s)``, in blocks of :data:`_BLOCK`
        elements; O(s.size x atoms)."""
        flat, pull = np.asarray(s).ravel(), self.weights * self.atoms
        u = np.empty(flat.shape, np.result_type(flat, float))
        du = np.empty_like(u)
        step = max(1, _BLOCK // self.atoms.size)
        for i in range(0, flat.size, step):
            inverse = 1.0 / (flat[i : i + step, None] - self.atoms)
            u[i : i + step] = inverse @ pull
            du[i : i + step] = -(np.square(inverse, out=inverse) @ pull)
        return u.reshape(np.shape(s)), du.reshape(np.shape(s))

    def poles(self) -> NDArray[np.float64]:
        """Sorted distinct positive atoms (where ``u`` is singular)."""
        return np.unique(self.atoms[self.atoms > 0.0])

    def scale(self) -> float:
        """Largest atom (bounds the support)."""
        return float(self.atoms.max())


@dataclass(frozen=True)
class MarchenkoPastur:
    """``MP_c`` of mean 1 in closed form: ``u`` solves ``c u^2 + (1 + c - s) u + 1 = 0``."""

    ratio: float

    def __post_init__(self) -> None:
        check_positive("ratio", self.ratio)

    def transform(self, s: NDArray) -> tuple[NDArray, NDArray]:
        """``u(s)`` (the root with ``|u| < 1/sqrt(c)``, the physical one) and ``u'(s)``; O(size)."""
        c = self.ratio
        b = 1.0 + c - np.asarray(s, dtype=complex)
        root = np.sqrt(b * b - 4.0 * c)
        denominator = np.where(np.abs(b + root) >= np.abs(b - root), b + root, b - root)
        with np.errstate(all="ignore"):  # u' is infinite at the support's ends
            u = -2.0 / denominator
            slope = u / (2.0 * c * u + b)
        if not np.iscomplexobj(s):
            u, slope = u.real, slope.real
        return u, slope

    def poles(self) -> NDArray[np.float64]:
        """The support ``[(1 - sqrt c)^2, (1 + sqrt c)^2]`` (``u`` is real only outside it)."""
        return np.array([(1.0 - np.sqrt(self.ratio)) ** 2, (1.0 + np.sqrt(self.ratio)) ** 2])

    def scale(self) -> float:
        return float((1.0 + np.sqrt(self.ratio)) ** 2)


Population = DiscreteLaw | MarchenkoPastur


@dataclass(frozen=True)
class FreeProduct:
    """The law ``MP_{ratios[0]} ⊠ ... ⊠ population`` (docs/model.md, "A general bulk by
    subordination"); ``ratios`` may be empty (then it is ``population`` itself)."""

    ratios: tuple[float, ...]
    population: Population

    def __post_init__(self) -> None:
        check_positive("ratios", list(self.ratios) or [1.0])

    def inverse_map(self, s: NDArray) -> tuple[NDArray, NDArray, NDArray]:
        """``x(s) = s prod_i (1 + c_i u(s))``, ``x'(s)`` and ``u(s)``; O(s.size x atoms)."""
        u, du = self.population.transform(s)
        x, dx = s, np.ones_like(s)
        for c in self.ratios:
            factor = 1.0 + c * u
            x, dx = x * factor, dx * factor + x * c * du
        return x, dx, u

    def scale(self) -> float:
        """An upper bound of the support: ``max(nu) prod_i (1 + sqrt c_i)^2``."""
        return self.population.scale() * float(
            np.prod([(1.0 + np.sqrt(c)) ** 2 for c in self.ratios])
        )

    def sampled(self, ratio: float) -> FreeProduct:
        """``MP_ratio ⊠ self``."""
        return FreeProduct((*self.ratios, float(ratio)), self.population)


def _newton(law: FreeProduct, s: NDArray, z: NDArray, steps: int, upper: bool) -> NDArray:
    """Damped Newton for ``x(s) = z``: a step is halved until ``|x(s) - z|`` does not grow
    (and ``Im s > 0`` when ``upper``); O(steps x halvings x size x atoms)."""
    x, dx, _ = law.inverse_map(s)
    residual = np.abs(x - z)
    for _ in range(steps):
        with np.errstate(all="ignore"):
            step = (x - z) / dx
        pending = np.isfinite(step)
        factor = 1.0
        for _ in range(_HALVINGS):
            if not np.any(pending):
                break
            candidate = s - factor * np.where(pending, step, 0.0)
            with np.errstate(all="ignore"):
                xc, dxc, _ = law.inverse_map(candidate)
                rc = np.abs(xc - z)
            ok = pending & np.isfinite(rc) & (rc <= residual)
            if upper:
                ok &= candidate.imag > 0.0
            s, x, dx = np.where(ok, candidate, s), np.where(ok, xc, x), np.where(ok, dxc, dx)
            residual = np.where(ok, rc, residual)
            pending &= ~ok
            factor *= 0.5
    return s


def subordination(law: FreeProduct, x: ArrayLike) -> NDArray[np.complex128]:
    """Subordination point ``s(x)`` on the real axis, ``Im s >= 0`` (docs/model.md,
    "A general bulk by subordination").

    Damped Newton along ``eta -> 0`` on ``z = x + i eta`` (``eta / scale`` from 10 down to
    ``1e-14`` by factors ``sqrt(10)``, each level started from the previous one, then
    ``eta = 0``), the branch folded to ``Im s >= 0``. O(x.size x atoms) per evaluation of
    ``x(s)``, about 250 evaluations.
    """
    x_arr = check_finite_array("x", x).astype(complex)
    scale = law.scale()
    s = x_arr + 1j * _LADDER[0] * scale
    for eta in _LADDER:
        s = _newton(law, s, x_arr + 1j * eta * scale, _LEVEL_STEPS, upper=True)
    s = _newton(law, s, x_arr, _FINAL_STEPS, upper=False)
    return s.real + 1j * np.abs(s.imag)


def free_stieltjes(law: FreeProduct, x: ArrayLike) -> tuple[NDArray, NDArray]:
    """``m(x) = ∫ dmu(t)/(t - x)`` (limit from ``Im x > 0``) and ``m'(x)``, the latter
    meaningful outside the support (docs/model.md, "A general bulk by subordination").

    ``m = -(1 + u(s))/x``; cost as :func:`subordination`.
    """
    x_arr = check_finite_array("x", x)
    s = subordination(law, x_arr)
    _, dxs, u = law.inverse_map(s)
    _, du = law.population.transform(s)
    m = -(1.0 + u) / x_arr
    with np.errstate(all="ignore"):
        dm = (1.0 + u) / x_arr**2 - du / (x_arr * dxs)
    return m, dm


def free_density(law: FreeProduct, x: ArrayLike) -> NDArray[np.float64]:
    """Density of the continuous part at ``x > 0``: ``Im m(x) / pi`` (docs/model.md,
    "A general bulk by subordination"); 0 for ``x <= 0``. Cost as :func:`subordination`."""
    x_arr = check_finite_array("x", x)
    positive = x_arr > 0.0
    density = np.zeros(x_arr.shape)
    if np.any(positive):
        m, _ = free_stieltjes(law, x_arr[positive])
        density[positive] = np.maximum(m.imag, 0.0) / np.pi
    return density


def _intervals(law: FreeProduct) -> tuple[NDArray, NDArray]:
    """Ends ``(low, high)`` of the real intervals of ``s`` on which ``u`` is real and smooth."""
    poles = law.population.poles()
    if isinstance(law.population, MarchenkoPastur):
        return np.array([-np.inf, poles[1]]), np.array([poles[0], np.inf])
    ends = np.concatenate([[-np.inf], poles, [np.inf]])
    return ends[:-1], ends[1:]


def _may_turn(law: FreeProduct, low: NDArray, high: NDArray) -> NDArray[np.bool_]:
    """Which bounded intervals ``(low, high)`` between poles can hold a critical point that
    passes :func:`critical_points`' test ``1 + c u + c s u' = 1 - c g(s) > -tol`` for every
    ratio ``c``, ``g(s) = sum_j w_j t_j^2/(s - t_j)^2``: ``g`` is at least its two end
    poles' terms ``A/(s - low)^2 + B/(high - s)^2``, whose minimum on the interval is
    ``(A^(1/3) + B^(1/3))^3 / (high - low)^2`` (docs/model.md, "A general bulk by
    subordination"). O(atoms)."""
    population = law.population
    if not isinstance(population, DiscreteLaw) or not law.ratios:
        return np.ones(low.shape, dtype=bool)
    poles, inverse = np.unique(population.atoms, return_inverse=True)
    pull = np.bincount(inverse, weights=population.weights) * poles**2  # w_j t_j^2 per pole
    at = np.searchsorted(poles, low)  # low is a pole; high the next one
    least = (np.cbrt(pull[at]) + np.cbrt(pull[np.minimum(at + 1, poles.size - 1)])) ** 3
    with np.errstate(divide="ignore"):
        return max(law.ratios) * least / (high - low) ** 2 <= 1.0 + 10.0 * _BRANCH_TOL


def _on_intervals(low: NDArray, high: NDArray, y: NDArray, scale: float) -> NDArray:
    """Map the logit-like ``y`` onto ``(low, high)`` (broadcast), dense at finite ends."""
    finite_low, finite_high = np.isfinite(low), np.isfinite(high)
    lo, hi = np.where(finite_low, low, 0.0), np.where(finite_high, high, 0.0)
    with np.errstate(over="ignore"):
        return np.where(
            finite_low & finite_high,
            lo + (hi - lo) / (1.0 + np.exp(-y)),
            np.where(
                finite_low,
                lo + scale * np.exp(y),
                np.where(finite_high, hi - scale * np.exp(-y), scale * np.sinh(y)),
            ),
        )


def critical_points(law: FreeProduct) -> tuple[NDArray, NDArray]:
    """Real critical points ``s`` of ``x(s)`` with ``x > 0`` on the physical branch, and
    ``+1`` (local min: an upper edge) or ``-1`` (local max: a lower edge).

    ``x'`` is sampled at :data:`_GRID` logit-spaced points of every interval between poles
    that :func:`_may_turn` keeps (:data:`_GRID_UNBOUNDED` on the unbounded ones, where
    critical points can sit close together near ``s = 0``), sign changes are bisected to
    round-off, and a point is kept when ``s(x(s*))`` (:func:`subordination`) returns to it.
    O(atoms x (kept intervals x _GRID + _GRID_UNBOUNDED + brackets x _BISECTION_STEPS)).
    """
    scale = law.scale()

    def slope(low: NDArray, high: NDArray, y: NDArray) -> NDArray:
        with np.errstate(all="ignore"):  # an end rounds onto a pole: x' = -inf there
            return law.inverse_map(_on_intervals(low, high, y, scale))[1]

    ends, los, his, rising = [], [], [], []
    low_all, high_all = _intervals(law)
    bounded = np.isfinite(low_all) & np.isfinite(high_all)
    keep = ~bounded | _may_turn(
        law, np.where(bounded, low_all, 0.0), np.where(bounded, high_all, 1.0)
    )
    low_all, high_all, bounded = low_all[keep], high_all[keep], bounded[keep]
    for group, size in ((bounded, _GRID), (~bounded, _GRID_UNBOUNDED)):
        low, high = low_all[group], high_all[group]
        y = np.linspace(-_LOGIT, _LOGIT, size)
        d = slope(low[:, None], high[:, None], y)
        interval, column = np.nonzero(np.sign(d[:, :-1]) * np.sign(d[:, 1:]) < 0)
        ends.append((low[interval], high[interval]))
        los.append(y[column])
        his.append(y[column + 1])
        rising.append(d[interval, column] < 0)  # x' from - to +: a local minimum
    low = np.concatenate([e[0] for e in ends])
    high = np.concatenate([e[1] for e in ends])
    lo, hi, is_min = np.concatenate(los), np.concatenate(his), np.concatenate(rising)
    y = bisect(lambda mid: (slope(low, high, mid) < 0) == is_min, lo, hi, _BISECTION_STEPS)
    s_all = _on_intervals(low, high, y, scale)
    kind = np.where(is_min, 1, -1)
    x_all = law.inverse_map(s_all)[0]
    # s is physical for every intermediate law, so for each MP_c ⊠ nu alone x' >= 0 (a
    # cheap necessary test before the solver's; x' is dimensionless)
    u, du = law.population.transform(s_all)
    single = [1.0 + c * u + c * s_all * du > -_BRANCH_TOL for c in law.ratios]
    keep = (x_all > 0.0) & np.logical_and.reduce([np.ones_like(x_all, dtype=bool), *single])
    s_all, kind, x_all = s_all[keep], kind[keep], x_all[keep]
    physical = np.abs(subordination(law, x_all) - s_all) <= _BRANCH_TOL * (1.0 + np.abs(s_all))
    return s_all[physical], kind[physical]


def free_components(law: FreeProduct) -> tuple[NDArray, NDArray, NDArray]:
    """:func:`critical_points` sorted by ``x(s)`` and the edges of the continuous part,
    shape ``(components, 2)`` rows ``(lower, upper)``; a first component without a lower
    critical point starts at 0 (hard edge) (docs/model.md, "A general bulk by
    subordination"). Cost as :func:`critical_points`."""
    s, kind = critical_points(law)
    order = np.argsort(law.inverse_map(s)[0])
    s, kind = s[order], kind[order]
    x = law.inverse_map(s)[0]
    if kind.size and kind[0] == 1:
        x = np.concatenate([[0.0], x])
    return s, kind, x.reshape(-1, 2)


def free_edges(law: FreeProduct) -> NDArray[np.float64]:
    """The edges of :func:`free_components`."""
    return free_components(law)[2]
