"""Theory of an anisotropic table, ``z_v ~ N(0, Sigma)``, and of a table from a file: the
bulk ``MP_gamma ⊠ MP_delta ⊠ nu_Sigma`` by :mod:`attnrmt.theory.free`, and the spikes through
the Sigma-weighted transforms ``U_w(s) = sum_i w_i lambda_i / (s - lambda_i)`` at the
subordination point (docs/model.md, "Anisotropic tables", "Tables from a file").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from attnrmt.model.table_laws import covariance_spectrum
from attnrmt.theory.free import DiscreteLaw, FreeProduct, free_components

_STEPS = 100  # at most; safeguarded Newton converges in ~10


@dataclass(frozen=True)
class AnisotropicBulk:
    """The bulk of one ``(Sigma, delta, gamma)`` (docs/model.md, "Anisotropic tables"):
    population ``MP_delta ⊠ nu`` and sample ``MP_gamma ⊠ MP_delta ⊠ nu`` laws of the
    eigenvalues ``nu`` of ``Sigma`` that are not isolated, their top critical points
    ``s_pop``, ``s_sample``, the largest isolated eigenvalue ``floor`` (-inf: none), the
    sample edges and the largest population noise eigenvalue (units of kappa); ``outer`` and
    ``outer_sample`` give ``x(s)`` above a floor beyond ``s_pop``: the laws of every
    eigenvalue but the floor's (the isolated eigenvalue is a spike of the others)."""

    population: FreeProduct
    sample: FreeProduct
    atoms: NDArray[np.float64]  # every distinct eigenvalue of Sigma
    signal: NDArray[np.float64]  # weights of u on the atoms
    sized: NDArray[np.float64]  # size-biased weights lambda w
    isolated: NDArray[np.float64]  # signal weights on the isolated atoms, times delta/d
    s_pop: float
    s_sample: float
    floor: float
    edges: NDArray[np.float64]
    pop_edge: float
    outer: FreeProduct
    outer_sample: FreeProduct

    def transform(self, weights: NDArray, s: NDArray) -> tuple[NDArray, NDArray]:
        """``U_w(s)`` and ``U_w'(s)`` for weights on the atoms. O(s.size x atoms)."""
        return DiscreteLaw(self.atoms, weights).transform(s)


def signal_weights(law: Mapping[str, Any], d: int) -> NDArray[np.float64]:
    """The weights of ``u`` on the eigenvalues of an anisotropic law's ``Sigma`` (in the
    order of :func:`attnrmt.model.table_laws.covariance_spectrum`): ``1/d`` each for a
    random ``u``, all on its own eigenvalue (laid out first) otherwise (docs/model.md,
    "Anisotropic tables"). O(d)."""
    if law["signal"] == "random":
        return np.full(d, 1.0 / d)
    weights = np.zeros(d)
    weights[0] = 1.0
    return weights


def anisotropic_bulk(
    lam: NDArray,
    on_u: NDArray,
    delta: float | None,
    gamma: float,
    on_mean: NDArray | None = None,
) -> AnisotropicBulk:
    """:class:`AnisotropicBulk` of the population eigenvalues ``lam`` with the weights
    ``on_u`` of ``u`` (and ``on_mean`` of the mean direction; default size-biased) on them.
    ``delta`` is the ratio of the table sampling ``Sigma`` (None: ``lam`` is the known
    population of a given table). Equal eigenvalues are merged into one atom; an eigenvalue
    alone in a component of ``MP_delta ⊠ nu`` (of ``MP_gamma ⊠ nu`` for a known table) is
    isolated (a spike) and leaves the bulk law. Cost: two to four critical-point scans of
    :mod:`attnrmt.theory.free` (O(atoms x 5000) each)."""
    atoms, inverse = np.unique(np.round(np.maximum(lam, 0.0), 12), return_inverse=True)
    d = lam.size
    weights = np.bincount(inverse, minlength=atoms.size) / d

    def merge(w: NDArray) -> NDArray[np.float64]:
        return np.bincount(inverse, weights=w, minlength=atoms.size).astype(float)

    on_u = merge(on_u)
    on_mean = atoms * weights / np.dot(atoms, weights) if on_mean is None else merge(on_mean)
    ratios = () if delta is None else (float(delta),)
    full = FreeProduct(ratios, DiscreteLaw(atoms, weights))
    probe = free_components(full if ratios else full.sampled(float(gamma)))
    s, kind, _ = probe
    alone = np.zeros(atoms.size, dtype=bool)
    for i in np.flatnonzero((kind[:-1] == -1) & (kind[1:] == 1)):  # a component's ends
        inside = (atoms > s[i]) & (atoms < s[i + 1])
        if inside.sum() == 1 and weights[inside][0] * d < 1.5:
            alone |= inside
    population = FreeProduct(ratios, DiscreteLaw(atoms[~alone], weights[~alone]))
    sample = population.sampled(float(gamma))
    reuse = not alone.any()  # the probe's scan is the population's (sample's) own
    s_smp, kind_smp, edges = probe if reuse and not ratios else free_components(sample)
    if ratios:
        s_pop, kind_pop, pop_edges = probe if reuse else free_components(population)
        top_pop, pop_edge = float(s_pop[kind_pop == 1].max()), float(pop_edges[-1, 1])
    else:  # a known population: x_pop(s) = s
        top_pop = pop_edge = float(atoms[~alone].max())
    top_smp = float(s_smp[kind_smp == 1].max())
    floor = float(atoms[alone].max()) if alone.any() else -np.inf
    outer = population
    if floor > top_pop:  # leave the floor's atom out, keep every other isolated one
        outer = FreeProduct(ratios, DiscreteLaw(atoms[atoms != floor], weights[atoms != floor]))
    outer_sample = outer.sampled(float(gamma))
    if alone.any():
        pop_edge = max(pop_edge, float(outer.inverse_map(np.array(floor))[0]))
        if floor > top_smp:
            edges[-1, 1] = max(edges[-1, 1], float(outer_sample.inverse_map(np.array(floor))[0]))
    return AnisotropicBulk(
        population=population,
        sample=sample,
        atoms=atoms,
        signal=on_u,
        sized=on_mean,
        isolated=np.where(alone, on_u, 0.0) * (0.0 if delta is None else delta / d),
        s_pop=top_pop,
        s_sample=top_smp,
        floor=floor,
        edges=edges,
        pop_edge=pop_edge,
        outer=outer,
        outer_sample=outer_sample,
    )


def file_bulk(
    law: Mapping[str, Any], gamma: float
) -> tuple[AnisotropicBulk, float, float, tuple[int, int]]:
    """The bulk of a ``file`` table (docs/model.md, "Tables from a file"): the within-class
    scatter ``W`` of the rotated table is the known population, ``u = e_1`` its class-mean
    direction; also ``||Dlt_0||``, ``||mbar||^2`` and ``(d, V)``. O(V d^2 + d^3) and the
    scans."""
    from attnrmt.model.table import file_table

    table = file_table(law)
    rows, V = table.embeddings, table.vocabulary_size
    mbar, dlt = table.table_mean, table.class_mean_difference
    scatter = rows.T @ rows / V - np.outer(mbar, mbar) - np.outer(dlt, dlt)
    lam, vectors = np.linalg.eigh(scatter)
    on_mean = (vectors.T @ mbar) ** 2 / max(float(mbar @ mbar), 1e-300)
    bulk = anisotropic_bulk(lam, vectors[0] ** 2, None, gamma, on_mean)
    return bulk, float(np.linalg.norm(dlt)), float(mbar @ mbar), (table.dimension, V)


def spike_solution(
    bulk: AnisotropicBulk,
    strength: NDArray,
    target: NDArray,
    weight: NDArray,
    rest: NDArray,
    cross: float = 0.0,
) -> dict[str, NDArray]:
    """Outliers (units of kappa) and squared overlaps with the target direction of the top
    eigenvalue solving ``strength * D(s) = x_pop(s)``, ``D = target (1 + U_w) + rest
    (1 + U_sized)`` (docs/model.md, "Anisotropic tables"), ``weight`` the target's weights on
    the atoms; ``cross`` (1 or 0) adds the class-mean noise's part along the target at
    isolated eigenvalues. Safeguarded Newton on ``s`` above ``s_pop`` and every isolated
    eigenvalue; NaN / 0 where absent. O(points x atoms x ~10)."""
    strength, target, rest = np.broadcast_arrays(strength, target, rest)

    def parts(s: NDArray) -> tuple[NDArray, ...]:
        x, dx, _ = bulk.outer.inverse_map(s)
        u_w, du_w = bulk.transform(weight, s)
        u_r, du_r = bulk.transform(bulk.sized, s)
        return x, dx, target * (1 + u_w) + rest * (1 + u_r), target * du_w + rest * du_r, u_w

    start = max(bulk.s_pop, bulk.floor * (1 + 1e-12) + 1e-300)
    low = np.full(strength.shape, start)
    with np.errstate(all="ignore"):  # f = x/D - strength increases, ~linearly at a pole of D
        x, _, dd, _, _ = parts(low)
        present = (strength > 0) & ~(strength * dd <= x)
        f_low = x / dd - strength
    high = low + 1.0
    for _ in range(200):  # x(s) >= s and D decreases beyond start: double until above
        x, _, dd, _, _ = parts(high)
        short = present & (x < strength * dd)
        if not short.any():
            break
        high = np.where(short, low + 2.0 * (high - low), high)
    with np.errstate(all="ignore"):
        f_high, s, step, moving = x / dd - strength, low, np.full_like(low, np.nan), present.copy()
    for _ in range(_STEPS):  # Newton from s, else the bracket's secant, else its midpoint
        with np.errstate(all="ignore"):
            secant = low - f_low * (high - low) / (f_high - f_low)
        for fallback in (secant, 0.5 * (low + high)):
            step = np.where((step >= low) & (step <= high), step, fallback)
        moving &= np.abs(step - s) > 4e-15 * np.abs(s)
        if not moving.any():
            break
        s = np.where(moving, step, s)
        x, dx, dd, ddd, _ = parts(s)
        with np.errstate(all="ignore"):
            f = x / dd - strength
            low, f_low = np.where(f < 0, s, low), np.where(f < 0, f, f_low)
            high, f_high = np.where(f < 0, high, s), np.where(f < 0, f_high, f)
            step = s - f * dd**2 / (dx * dd - x * ddd)
    x, dx, dd, ddd, u_w = parts(s)
    x_smp, dx_smp, _ = bulk.outer_sample.inverse_map(s)
    sampled = present & (s > bulk.s_sample)
    with np.errstate(all="ignore"):
        slope = dd / x**2 - ddd / (x * dx)  # (target + rest) m_v'(ell)
        noise = cross * (
            (s[..., None] / (s[..., None] - bulk.atoms)) ** 2 @ (bulk.isolated * bulk.atoms)
        )
        overlap = np.where(present, (target * (1 + u_w) ** 2 + noise) / (x**2 * slope), 0.0)
        lift = (dx_smp / x_smp) / (dx / x)
    return {
        "population_outlier": np.where(present, x, np.nan),
        "sample_outlier": np.where(sampled, x_smp, np.nan),
        "population_overlap": np.clip(overlap, 0.0, 1.0),
        "sample_overlap": np.where(sampled, np.clip(overlap * lift, 0.0, 1.0), 0.0),
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


def spike_strength(
    bulk: AnisotropicBulk, pop: NDArray, sample: NDArray, noise: NDArray, points: int = 4096
) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """Inverse spike maps of a general bulk (docs/thresholds.md, "General bulks"): the
    strength ``theta = (alpha/kappa)(snr + delta)`` whose signal spike has the population
    (sample) outlier ``pop`` (``sample``, units of kappa), ``noise = (alpha/kappa) delta``
    the class-mean noise's part: ``theta = x_pop(s)/(1 + U_u) + noise (U_u - U_sized)/(1 +
    U_u)`` at the ``s`` of the outlier; and the critical strengths ``theta_c`` (the same at
    the edge). An eigenvalue at or inside the edge gives ``theta_c``, NaN gives NaN. ``x``
    increases in ``s`` above the edge: it is tabulated on ``points`` values of ``s`` (dense
    at the edge), ``s`` interpolated at the outlier and polished by one Newton step.
    O(points x atoms + outliers x (log points + atoms))."""
    noise = np.asarray(noise, dtype=float)

    def strength(s: NDArray) -> NDArray:
        u_u, u_r = bulk.transform(bulk.signal, s)[0], bulk.transform(bulk.sized, s)[0]
        return (bulk.outer.inverse_map(s)[0] + noise * (u_u - u_r)) / (1 + u_u)

    out: list[NDArray] = []
    with np.errstate(all="ignore"):  # a known population's edge is a pole (file tables)
        for law, edge, x in (
            (bulk.outer, bulk.s_pop, pop),
            (bulk.outer_sample, bulk.s_sample, sample),
        ):
            x = np.asarray(x, dtype=float)
            start = max(edge, bulk.floor * (1 + 1e-12) + 1e-300)
            top = 1.1 * max(2 * start, float(np.nanmax(x, initial=0.0))) + 1.0  # x(s) >= s
            s = start + (top - start) * np.linspace(0.0, 1.0, points) ** 2
            grid = law.inverse_map(s)[0]
            at = np.interp(x, grid, s)
            value, slope, _ = law.inverse_map(at)
            # one Newton step; at the edge x'(s) = 0
            at = np.where(slope > 0, np.clip(at - (value - x) / slope, start, top), at)
            out += [np.where(np.isnan(x), np.nan, strength(at)), strength(np.full(x.shape, start))]
    return out[0], out[2], out[1], out[3]


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
    fields = ("population_outlier", "sample_outlier", "population_overlap", "sample_overlap")
    for variant in variants:
        for name in (*fields, "threshold_snr_population", "threshold_snr_sample", "theta"):
            out[(variant, name)] = np.full(flat["delta"].size, np.nan)
    keys = np.stack([flat["d"], flat["delta"], flat["gamma"]], axis=1)
    for key in np.unique(keys[np.broadcast_to(valid, shape).ravel()], axis=0):
        at = np.all(keys == key, axis=1)
        d, delta, gamma = int(key[0]), float(key[1]), float(key[2])
        kappa, snr = flat["kappa"][at], flat["snr"][at]
        ratio = flat["alpha"][at] / kappa
        if law["kind"] == "file":  # the given table: D = (|Dlt_0| + sqrt(snr))^2 (1 + U_u)
            bulk, norm, mean_norm, size = file_bulk(law, gamma)
            if size != (d, round(d / delta)):  # the grid's (d, V) is not the table's
                continue
            target, rests = (norm + np.sqrt(snr)) ** 2, {v: 0.0 for v in variants}
        else:
            lam = covariance_spectrum(law, d)
            assert lam is not None
            bulk, mean_norm = anisotropic_bulk(lam, signal_weights(law, d), delta, gamma), delta
            target, rests = snr, {v: delta * float(v == "finite_vocab") for v in variants}
        out["lower"][at] = kappa * bulk.edges[0, 0]
        out["upper"][at] = kappa * bulk.edges[-1, 1]
        out["pop_edge"][at] = kappa * bulk.pop_edge
        for variant in variants:
            rest = rests[variant]
            spike = spike_solution(bulk, ratio, target, bulk.signal, np.asarray(rest), rest / delta)
            for name in fields:
                scale = kappa if name.endswith("outlier") else 1.0
                out[(variant, name)][at] = scale * spike[name]
            with np.errstate(all="ignore"):
                low, high = thresholds(bulk, ratio, np.asarray(rest))
            if law["kind"] == "file":  # no population transition; at s_sample
                root = np.sqrt(high) - norm  # sqrt(snr*) = sqrt(x / (ratio (1 + U_u))) - |Dlt_0|
                low, high = np.full_like(low, np.nan), np.sign(root) * root**2
            out[(variant, "threshold_snr_population")][at] = low
            out[(variant, "threshold_snr_sample")][at] = high
            out[(variant, "theta")][at] = ratio * (target + rest)
        mean = spike_solution(
            bulk, flat["sigma"][at] ** 2 / kappa, np.asarray(mean_norm), bulk.sized, np.asarray(0.0)
        )
        out["mean_pop"][at] = kappa * mean["population_outlier"]
        out["mean_sample"][at] = kappa * mean["sample_outlier"]
        out["mean_overlap"][at] = mean["sample_overlap"]
    for name in ("mean_pop", "mean_sample", "mean_overlap"):
        out[name] = np.where(uncentred, out[name], np.nan)
    return {name: value.reshape(shape) for name, value in out.items()}
