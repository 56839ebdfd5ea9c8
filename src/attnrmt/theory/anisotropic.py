"""Theory of an anisotropic table, ``z_v ~ N(0, Sigma)`` (docs/model.md, "Anisotropic tables").

The bulk of ``S / kappa`` is ``MP_gamma ⊠ MP_delta ⊠ nu_Sigma`` (:mod:`attnrmt.theory.free`,
``nu_Sigma`` the ``d`` eigenvalues of ``Sigma``). A spike along ``v`` sees the bulk through
``v^T (s - Sigma)^(-1) v`` at the subordination point ``s``: with the weights ``w_i`` of ``v``
in ``Sigma``'s eigenbasis, ``U_w(s) = sum_i w_i lambda_i / (s - lambda_i)``. The signal
direction ``u`` has the weights ``e_1`` (``top``/``bottom``) or ``1/d`` (``random``); the noise
part ``eta ~ N(0, Sigma / V)`` of ``Dlt`` and the table mean have the size-biased weights
``lambda_i / d``. Spike of the signal: ``(alpha/kappa) D(s) = x_pop(s)`` with
``D = snr (1 + U_u) + b delta (1 + U_sized)`` (``b = 1`` for ``finite_vocab``, 0 for ``paper``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from attnrmt.model.table_laws import covariance_spectrum
from attnrmt.theory.free import DiscreteLaw, FreeProduct, critical_points

_BISECTION_STEPS = 100


@dataclass(frozen=True)
class AnisotropicBulk:
    """The bulk of one ``(Sigma, delta, gamma)``: population ``MP_delta ⊠ nu_Sigma`` and
    sample ``MP_gamma ⊠ MP_delta ⊠ nu_Sigma`` laws, their top critical points
    ``s_pop``, ``s_sample`` and the sample law's edges (units of kappa)."""

    population: FreeProduct
    sample: FreeProduct
    signal: NDArray[np.float64]  # weights of u on the atoms
    sized: NDArray[np.float64]  # size-biased weights lambda w / sum
    s_pop: float
    s_sample: float
    edges: NDArray[np.float64]
    pop_edge: float

    def transform(self, weights: NDArray, s: NDArray) -> tuple[NDArray, NDArray]:
        """``U_w(s)`` and ``U_w'(s)`` for weights on the atoms. O(s.size x atoms)."""
        atoms = self.population.population.atoms  # type: ignore[union-attr]
        diff = s[..., None] - atoms
        ratio = atoms / diff
        return ratio @ weights, -(ratio / diff) @ weights


def anisotropic_bulk(lam: NDArray, signal: str, delta: float, gamma: float) -> AnisotropicBulk:
    """:class:`AnisotropicBulk` of the eigenvalues ``lam`` (coordinate order, the signal's
    at 0 unless ``signal == "random"``). Equal eigenvalues are merged into one atom.
    Cost: two critical-point scans of :mod:`attnrmt.theory.free` (O(atoms x 5000))."""
    atoms, inverse = np.unique(np.round(lam, 12), return_inverse=True)
    weights = np.bincount(inverse, minlength=atoms.size) / lam.size
    law = DiscreteLaw.of(atoms, weights)
    if signal == "random":
        on_u = law.weights
    else:
        on_u = np.zeros(atoms.size)
        on_u[inverse[0]] = 1.0
    population = FreeProduct((float(delta),), law)
    sample = population.sampled(float(gamma))
    s_pop, kind_pop = critical_points(population)
    s_smp, kind_smp = critical_points(sample)
    x_smp = np.sort(sample.inverse_map(s_smp)[0])
    if kind_smp[np.argsort(sample.inverse_map(s_smp)[0])][0] == 1:
        x_smp = np.concatenate([[0.0], x_smp])
    edges = x_smp.reshape(-1, 2)
    edges[-1, 1] = _top_eigenvalue(sample, s_smp, kind_smp, lam.size)
    return AnisotropicBulk(
        population=population,
        sample=sample,
        signal=on_u,
        sized=law.atoms * law.weights / np.dot(law.atoms, law.weights),
        s_pop=float(s_pop[kind_pop == 1].max()),
        s_sample=float(s_smp[kind_smp == 1].max()),
        edges=edges,
        pop_edge=_top_eigenvalue(population, s_pop, kind_pop, lam.size),
    )


def _top_eigenvalue(law: FreeProduct, s: NDArray, kind: NDArray, d: int) -> float:
    """The largest noise eigenvalue: the top component's upper edge, or, when that component
    holds one eigenvalue of ``Sigma`` (an atom of weight ``1/d`` alone between its critical
    points), that eigenvalue's spike map ``x_rest(lambda_j)`` (docs/model.md, "Anisotropic
    tables"). O(atoms x critical points)."""
    x = law.inverse_map(s)[0]
    order = np.argsort(x)
    s, kind, x = s[order], kind[order], x[order]
    low = s[-2] if s.size > 1 and kind[-2] == -1 else -np.inf
    population = law.population
    assert isinstance(population, DiscreteLaw)
    inside = (population.atoms > low) & (population.atoms < s[-1])
    if inside.sum() != 1 or population.weights[inside][0] * d > 1.5:
        return float(x[-1])
    rest = FreeProduct(
        law.ratios, DiscreteLaw(population.atoms[~inside], population.weights[~inside])
    )
    return float(rest.inverse_map(population.atoms[inside])[0][0])


def spike_solution(
    bulk: AnisotropicBulk, strength: NDArray, target: NDArray, weight: NDArray, rest: NDArray
) -> dict[str, NDArray]:
    """Outliers (units of kappa) and squared overlaps with the target direction of the spike
    ``strength * D(s) = x_pop(s)``, ``D = target (1 + U_w) + rest (1 + U_sized)`` (docs/model.md,
    "Anisotropic tables"), ``weight`` the target's weights on the atoms. Bisection on
    ``s > s_pop``; NaN / 0 where absent. O(points x atoms x 100)."""
    strength, target, rest = np.broadcast_arrays(strength, target, rest)

    def parts(s: NDArray) -> tuple[NDArray, ...]:
        x, dx, _ = bulk.population.inverse_map(s)
        u_w, du_w = bulk.transform(weight, s)
        u_r, du_r = bulk.transform(bulk.sized, s)
        return x, dx, target * (1 + u_w) + rest * (1 + u_r), target * du_w + rest * du_r, u_w

    low = np.full(strength.shape, bulk.s_pop)
    x0, _, d0, _, _ = parts(low)
    present = (strength * d0 > x0) & (strength > 0)
    high = low + strength * d0 + 1.0  # x(s) >= s and D decreases beyond s_pop
    for _ in range(_BISECTION_STEPS):
        mid = 0.5 * (low + high)
        x, _, dd, _, _ = parts(mid)
        below = x < strength * dd
        low, high = np.where(below, mid, low), np.where(below, high, mid)
    s = 0.5 * (low + high)
    x, dx, dd, ddd, u_w = parts(s)
    x_smp, dx_smp, _ = bulk.sample.inverse_map(s)
    sampled = present & (s > bulk.s_sample)
    with np.errstate(all="ignore"):
        slope = dd / x**2 - ddd / (x * dx)  # (target + rest) m_v'(ell)
        overlap = np.where(present, target * (1 + u_w) ** 2 / (x**2 * slope), 0.0)
        lift = (dx_smp / x_smp) / (dx / x)
    return {
        "pop_outlier": np.where(present, x, np.nan),
        "sample_outlier": np.where(sampled, x_smp, np.nan),
        "pop_overlap": np.maximum(overlap, 0.0),
        "sample_overlap": np.where(sampled, np.maximum(overlap * lift, 0.0), 0.0),
    }


def thresholds(bulk: AnisotropicBulk, ratio: NDArray, rest: NDArray) -> tuple[NDArray, NDArray]:
    """Population and sample threshold snr of the signal spike: ``D`` is linear in snr, so
    ``snr = (x_pop(s*)/ratio - rest (1 + U_sized(s*))) / (1 + U_u(s*))`` at ``s* = s_pop``
    resp. ``s_sample`` (``inf`` where ``ratio = alpha/kappa = 0``). O(points x atoms)."""
    out = []
    for s in (bulk.s_pop, bulk.s_sample):
        point = np.array([s])
        x = bulk.population.inverse_map(point)[0][0]
        u_u = bulk.transform(bulk.signal, point)[0][0]
        u_r = bulk.transform(bulk.sized, point)[0][0]
        with np.errstate(divide="ignore"):
            out.append((x / ratio - rest * (1 + u_r)) / (1 + u_u))
    return out[0], out[1]


def anisotropic_parts(
    law: Mapping[str, Any],
    arrays: Mapping[str, NDArray],
    uncentred: NDArray,
    variants: Sequence[str],
    valid: NDArray,
) -> dict[Any, Any]:
    """Every prediction of :func:`attnrmt.theory.predict` for an anisotropic table on flat
    point arrays (``d``, ``delta``, ``gamma``, ``snr``, ``alpha``, ``kappa``, ``sigma``):
    the bulk once per distinct ``(d, delta, gamma)`` of the ``valid`` points, the spikes
    vectorised over the rest (NaN elsewhere).
    O(distinct bulks x 5000 x atoms + points x atoms x 100)."""
    shape = np.broadcast_shapes(*(np.shape(a) for a in arrays.values()), np.shape(uncentred))
    flat = {name: np.broadcast_to(a, shape).ravel() for name, a in arrays.items()}
    uncentred = np.broadcast_to(uncentred, shape).ravel()
    names = ("lower", "upper", "pop_edge", "mean_pop", "mean_sample", "mean_overlap")
    out: dict[Any, Any] = {name: np.full(flat["delta"].size, np.nan) for name in names}
    fields = ("pop_outlier", "sample_outlier", "pop_overlap", "sample_overlap")
    for variant in variants:
        for name in (*fields, "threshold_population", "threshold_sample", "theta"):
            out[(variant, name)] = np.full(flat["delta"].size, np.nan)
    keys = np.stack([flat["d"], flat["delta"], flat["gamma"]], axis=1)
    for key in np.unique(keys[np.broadcast_to(valid, shape).ravel()], axis=0):
        at = np.all(keys == key, axis=1)
        d, delta, gamma = int(key[0]), float(key[1]), float(key[2])
        lam = covariance_spectrum(law, d)
        assert lam is not None
        bulk = anisotropic_bulk(lam, law["signal"], delta, gamma)
        kappa, snr = flat["kappa"][at], flat["snr"][at]
        ratio = flat["alpha"][at] / kappa
        out["lower"][at] = kappa * bulk.edges[0, 0]
        out["upper"][at] = kappa * bulk.edges[-1, 1]
        out["pop_edge"][at] = kappa * bulk.pop_edge
        for variant in variants:
            rest = delta * float(variant == "finite_vocab")
            spike = spike_solution(bulk, ratio, snr, bulk.signal, np.asarray(rest))
            for name in fields:
                scale = kappa if name.endswith("outlier") else 1.0
                out[(variant, name)][at] = scale * spike[name]
            low, high = thresholds(bulk, ratio, np.asarray(rest))
            out[(variant, "threshold_population")][at] = low
            out[(variant, "threshold_sample")][at] = high
            out[(variant, "theta")][at] = ratio * (snr + rest)
        mean = spike_solution(
            bulk, flat["sigma"][at] ** 2 / kappa, np.asarray(delta), bulk.sized, np.asarray(0.0)
        )
        out["mean_pop"][at] = kappa * mean["pop_outlier"]
        out["mean_sample"][at] = kappa * mean["sample_outlier"]
        out["mean_overlap"][at] = mean["sample_overlap"]
    for name in ("mean_pop", "mean_sample", "mean_overlap"):
        out[name] = np.where(uncentred, out[name], np.nan)
    return {name: value.reshape(shape) for name, value in out.items()}


__all__ = [
    "AnisotropicBulk",
    "anisotropic_bulk",
    "anisotropic_parts",
    "spike_solution",
    "thresholds",
]
