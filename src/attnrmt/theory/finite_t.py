"""The noise bulk at finite sequence length ``T`` (docs/model.md, "Where the large-T bulk
holds", "The bulk at finite T").

``S0 = Z A Z^T`` with ``A = Q Q^T / N`` and ``Q`` the ``V x N`` matrix of pooled token
counts: each token is drawn about ``N T / V = T delta / gamma`` times, and the large-T bulk
``MP_delta ⊠ MP_gamma`` (:mod:`attnrmt.theory.bulk`) is accurate only when that count is
large; :func:`finite_t_stieltjes` gives the bulk at any ``N T / V``,
:func:`noise_top` the largest noise eigenvalue that replaces ``f(u*)`` at finite ``d``
(docs/model.md, "What replaces the edge"), and :func:`finite_t_spike` the sample outlier and overlap
(docs/model.md, "Outliers and overlaps at finite T").
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import numpy as np
import xarray as xr
from numpy.typing import ArrayLike, NDArray

from attnrmt._validation import check_finite_array, check_positive
from attnrmt.theory.bulk import bisect

#: ``N T / V`` from which the large-T bulk is accurate
#: (docs/model.md, "Where the large-T bulk holds"): below it the largest noise
#: eigenvalue exceeds the usual finite-``d`` offset below the edge ``f(u*)``, increasingly
#: with ``d``.
FINITE_T_BOUND = 8.0
#: Smallest ``d`` at which the finite-``T`` tail is worth a warning: below it the largest
#: eigenvalue's own fluctuations (``O(d^(-2/3))``, ~5% at ``d`` = 100) exceed the tail the
#: measurement finds (+2.2% at ``N T / V`` = 1, ``d`` = 400; docs/model.md).
FINITE_T_MIN_D = 100
#: Fraction of the token draws at the realised sizes whose spike root must be separated
#: for :func:`finite_d_spike` to give a value: below it the separated draws' mean misses
#: the simulated overlap (docs/model.md, "Outliers and overlaps at finite T").
SEPARATED = 0.75


def tokens_per_vocab(delta: ArrayLike, gamma: ArrayLike, T: ArrayLike) -> NDArray[np.float64]:
    """Mean number of draws of each token, ``N T / V = T delta / gamma`` (docs/model.md,
    "Where the large-T bulk holds"); broadcast, O(size)."""
    return check_positive("T", T) * check_positive("delta", delta) / check_positive("gamma", gamma)


def large_t_bulk_holds(delta: ArrayLike, gamma: ArrayLike, T: ArrayLike) -> NDArray[np.bool_]:
    """Whether ``MP_delta ⊠ MP_gamma`` describes the noise bulk: ``T delta / gamma >=``
    :data:`FINITE_T_BOUND` (docs/model.md, "Where the large-T bulk holds"); broadcast, O(size)."""
    return np.asarray(tokens_per_vocab(delta, gamma, T) >= FINITE_T_BOUND)


def _token_cavity_sweep(
    g: NDArray, zeta: NDArray, weights2: NDArray, tokens: float, rng: np.random.Generator
) -> NDArray:
    """One population-dynamics sweep of the token cavity variables of ``Q Q^T`` at ``zeta``
    (docs/model.md, "The bulk at finite T"); ``g`` has shape (points, population).

    A sequence seen from one of its tokens (at a uniform position ``t``) returns
    ``w_t^2 h`` with ``h = 1/(-1 - sum_{s != t} w_s^2 g_s)``; a token with ``K ~ Poisson(N T/V)``
    sequences has ``g = 1/(-zeta - sum_k w_{t_k}^2 h_k)``. O(points x population x
    (T + N T/V)).
    """
    points, size = g.shape
    T = weights2.size
    row = np.arange(points)[:, None, None]
    draws = g[row, rng.integers(0, size, (points, size, T))]
    position = rng.integers(0, T, (points, size))
    total = draws @ weights2
    own = weights2[position] * np.take_along_axis(draws, position[..., None], -1)[..., 0]
    returned = weights2[position] / (-1.0 - (total - own))
    k_max = int(tokens + 8.0 * np.sqrt(tokens) + 8.0)
    counts = rng.poisson(tokens, (points, size))
    picked = returned[row, rng.integers(0, size, (points, size, k_max))]
    used = np.arange(k_max) < np.minimum(counts, k_max)[..., None]
    return 1.0 / (-zeta[:, None] - np.sum(np.where(used, picked, 0.0), axis=-1))


def finite_t_stieltjes(
    z: ArrayLike,
    delta: float,
    gamma: float,
    weights: ArrayLike,
    population: int = 2000,
    sweeps: int = 60,
    seed: int = 0,
) -> NDArray[np.complex128]:
    """Stieltjes transform ``m(z) = E[1/(x - z)]`` of the noise bulk of ``S / kappa`` at
    finite ``T`` (docs/model.md, "The bulk at finite T"), for ``Im z > 0``.

    Solves ``m = 1/(-z + (1 - m_A(zeta)/(delta m))/(delta m))``, ``zeta = -1/(delta m)``, with
    ``m_A`` the Stieltjes transform of ``V A / kappa`` from the cavity equations of the
    sparse token-sequence graph, by population dynamics (``population`` members per point,
    ``sweeps`` damped sweeps, the second half averaged). Monte-Carlo error
    ~ ``1/sqrt(population x sweeps / 2)`` relative. O(points x population x sweeps x
    (T + N T/V)).
    """
    z_arr = np.atleast_1d(np.asarray(z, dtype=complex))
    w = check_finite_array("weights", weights)
    T = w.size
    kappa = float(w @ w)
    tokens = float(tokens_per_vocab(delta, gamma, T))
    scale = T / (tokens * kappa)  # V A / kappa = scale * Q Q^T
    rng = np.random.default_rng(seed)
    m = -1.0 / z_arr  # outside-the-support start
    g = np.broadcast_to(-1.0 / (-1.0 / (delta * m) / scale)[:, None], (z_arr.size, population))
    g = np.array(g)
    total, kept = np.zeros_like(m), 0
    for sweep in range(sweeps):
        zeta = -1.0 / (delta * m)
        g = _token_cavity_sweep(g, zeta / scale, w * w, tokens, rng)
        m_a = g.mean(axis=1) / scale
        m_new = 1.0 / (-z_arr + (1.0 - m_a / (delta * m)) / (delta * m))
        m = 0.5 * (m + m_new)
        if sweep >= sweeps // 2:
            total, kept = total + m_new, kept + 1
    return np.asarray(total / kept, dtype=np.complex128)


def noise_top(
    d: int, V: int, N: int, weights: ArrayLike, samples: int = 24, seed: int = 0
) -> tuple[float, float]:
    """Mean and standard deviation of the largest eigenvalue of the centred noise part
    ``S0 / kappa`` at the realised ``d, V, N`` (docs/model.md, "What replaces the edge"),
    over ``samples`` draws of ``N`` sequences of uniform tokens and a Gaussian table: the iid
    positional model's law, and a correlated one's bulk (its classes add the spike formulas'
    rank-one part along ``s`` and change a repeat's chance ``1/V`` to ``(1 + R_tt')/V``).
    Lanczos on ``C C^T`` with ``C = Z Q (I - 1 1^T / N)`` from a start vector of its own
    generator (so the result is a function of the arguments, bit for bit). O(samples x d (V +
    N T + N m)) for ``m`` Lanczos vectors."""
    from scipy.sparse.linalg import LinearOperator, eigsh

    w = check_finite_array("weights", weights)
    scale = 1.0 / (N * float(w @ w))
    rng = np.random.default_rng(seed)
    start = np.random.default_rng([seed, 1]).standard_normal(d)
    tops = np.empty(samples)
    for i in range(samples):
        z = rng.standard_normal((d, V))
        tokens = rng.integers(0, V, (N, w.size))
        c = sum(w[t] * z[:, tokens[:, t]] for t in range(w.size))
        c = np.asarray(c) - np.mean(c, axis=1, keepdims=True)
        gram = LinearOperator((d, d), matvec=lambda v, c=c: c @ (c.T @ v), dtype=float)
        top = eigsh(gram, k=1, which="LA", v0=start, tol=1e-8, return_eigenvectors=False)
        tops[i] = top[0] * scale
    return float(tops.mean()), float(tops.std(ddof=1))


def _gauss_rules(matvec: Any, starts: NDArray, steps: int, first: NDArray) -> list[NDArray]:
    """Gauss quadrature rules (nodes, weights, per column) of the spectral measures of a
    symmetric operator at the columns of ``starts``, from ``steps`` three-term Lanczos steps
    on each; a finite ``first`` replaces a column's first moment (docs/model.md, "Outliers
    and overlaps at finite T"). O(columns x steps x (matvec + length))."""
    from scipy.linalg import eigh_tridiagonal
    from scipy.linalg.blas import daxpy

    rules = []
    for start, known in zip(starts.T, first, strict=True):
        norm = float(np.linalg.norm(start))
        q, previous = start / norm, np.zeros(start.size)
        a, b = np.zeros(steps), np.zeros(steps)
        for j in range(steps):
            r = daxpy(previous, matvec(q), a=-b[j - 1])  # b[-1] = 0 at j = 0
            a[j] = q @ r
            r = daxpy(q, r, a=-a[j])
            b[j] = np.linalg.norm(r)
            previous, q = q, r / (b[j] if b[j] > 0 else 1.0)
        a[0] = known if np.isfinite(known) else a[0]  # exact first moment: rank one at q_0
        nodes, vectors = eigh_tridiagonal(a, b[:-1])
        rules += [nodes, vectors[0] ** 2 * norm**2]
    return rules


def _token_matrix(
    T: int, positional: str, weights: str, V: int, N: int, seed: int
) -> tuple[Any, NDArray, float, float, np.random.Generator]:
    """One token model's sparse ``Q`` (``V x N``), class vector ``s``, ``alpha / kappa``,
    ``V / (N kappa)`` (so ``A~ = scale Q (I - 1 1^T / N) Q^T``) and its generator, from JSON
    specs ``positional``, ``weights`` (docs/model.md, "Outliers and overlaps at finite T").
    O(N T)."""
    from scipy.sparse import csr_matrix

    from attnrmt.model import pooling_weights, positional_correlation, sample_signs
    from attnrmt.model.table import sample_tokens

    pos, R = json.loads(positional), positional_correlation(json.loads(positional), T)
    w = pooling_weights(json.loads(weights), T, R)
    kappa, rng = float(w @ w), np.random.default_rng(seed)
    tokens = sample_tokens(sample_signs(pos, T, N, rng)[0], V, rng)
    Q = csr_matrix((np.tile(w, N), (tokens.ravel(), np.repeat(np.arange(N), T))), (V, N))
    s = np.where(np.arange(V) < V // 2, 1.0, -1.0)
    return Q, s, float(w @ R @ w / kappa), V / (N * kappa), rng


def _operator(Q: Any, scale: float) -> Any:
    """``v -> A~ v`` for ``A~ = scale Q (I - 1 1^T / N) Q^T``, never formed (the centring on
    the ``N`` side); O(nnz(Q) + V + N)."""
    QT = Q.T.tocsr()
    return lambda v: scale * (Q @ ((w := QT @ v) - w.mean()))


@lru_cache(maxsize=64)
def token_rules(
    T: int, positional: str, weights: str, ratio: float, nonzeros: int = 2**18, seed: int = 0
) -> tuple[NDArray, NDArray, NDArray, NDArray]:
    """Gauss rules ``(a_s, w_s, a_nu, w_nu)`` of the law of ``A~ = V A / kappa`` (centred) at
    the class vector ``s / sqrt(V)`` and averaged (one Rademacher probe), from one sampled
    token model (JSON specs ``positional``, ``weights``) with ``V / N = ratio`` and
    ``N T = nonzeros`` (docs/model.md, "Outliers and overlaps at finite T"). Cached;
    O(nonzeros x 40)."""
    N = max(nonzeros // T, 4096)
    V = 2 * max(round(N * ratio / 2), 2048)
    Q, s, r, scale, rng = _token_matrix(T, positional, weights, V, N, seed)
    matvec = _operator(Q, scale)
    starts = np.stack([s, rng.choice([-1.0, 1.0], V)], axis=1) / np.sqrt(V)
    a_s, w_s, a_nu, w_nu = _gauss_rules(matvec, starts, 40, np.array([r, np.nan]))
    return a_s, w_s, a_nu, w_nu


@lru_cache(maxsize=16)
def realised_rules(
    T: int, positional: str, weights: str, V: int, N: int, draws: int = 64
) -> tuple[tuple[NDArray, ...], ...]:
    """Per draw of the tokens at the realised ``V``, ``N``, the rules ``(a_s, w_s, a_nu,
    w_nu)`` of :func:`finite_t_spike` for the drawn ``A~`` (centred): ``nu`` its eigenvalues
    (from the smaller Gram matrix of ``Q (I - 1 1^T / N)``), each of mass ``1/V``, and
    ``mu_s`` a 60-step Gauss rule at ``s / sqrt(V)`` (docs/model.md, "Outliers and overlaps at
    finite T"). Cached; O(draws x min(V, N)^3)."""
    out = []
    for seed in range(draws):
        Q, s, _, scale, _ = _token_matrix(T, positional, weights, V, N, seed)
        gram = np.asarray((Q.T @ Q if N <= V else Q @ Q.T).todense())
        if N <= V:  # Q_c^T Q_c: double centring
            gram += gram.mean() - gram.mean(0) - gram.mean(1)[:, None]
        else:
            gram -= np.outer(Q.sum(axis=1), Q.sum(axis=1)) / N
        a_nu = scale * np.linalg.eigvalsh(gram)
        matvec = _operator(Q, scale)
        a_s, w_s = _gauss_rules(matvec, s[:, None] / np.sqrt(V), 60, np.array([np.nan]))
        out.append((a_s, w_s, a_nu, np.full(a_nu.size, 1 / V)))
    return tuple(out)


def finite_d_spike(
    d: int, V: int, N: int, snr: ArrayLike, draws: tuple[tuple[NDArray, ...], ...], r: float
) -> tuple[NDArray, NDArray]:
    """Mean sample outlier of ``S / kappa`` and squared overlap with ``u`` at the realised
    ``d, V, N`` (docs/model.md, "Outliers and overlaps at finite T", the tail regime): the
    equation of :func:`finite_t_spike` with ``delta = (d - 1) / V`` solved exactly given each
    draw of :func:`realised_rules`, averaged with ``s^T A~ s / V`` (mean ``r (1 - 1/N)``)
    as a control variate; NaN where fewer than :data:`SEPARATED` of the draws have a
    separated root.
    O(draws x snr x atoms x 100)."""
    snr_arr = np.atleast_1d(np.asarray(snr, dtype=float))
    pairs = [finite_t_spike((d - 1) / V, snr_arr, rules, 0) for rules in draws]
    first = np.array([rules[1] @ rules[0] for rules in draws]) - r * (1 - 1 / N)
    out = []
    for values in np.array(pairs).transpose(1, 2, 0):  # (quantity, snr, draws)
        for row in values:
            ok = np.isfinite(row)
            c, y = first[ok], row[ok]
            slope = (c - c.mean()) @ y / max((c - c.mean()) @ c, 1e-300) if ok.any() else 0
            out.append(y.mean() - slope * c.mean() if ok.mean() >= SEPARATED else np.nan)
    x, overlap = np.reshape(out, (2, *np.shape(snr)))
    return x, overlap


def _transform(nodes: NDArray, weights: NDArray, y: NDArray) -> tuple[NDArray, NDArray]:
    """``u(y) = sum_j w_j a_j / (y - a_j)`` and ``u'(y)``; O(y.size x nodes)."""
    r = 1.0 / (y[..., None] - nodes)
    return np.sum(weights * nodes * r, -1), -np.sum(weights * nodes * r * r, -1)


def finite_t_spike(
    delta: float, snr: ArrayLike, rules: tuple[NDArray, ...], rare: float = 1e-4
) -> tuple[NDArray, NDArray]:
    """Sample outlier of ``S / kappa`` and squared overlap of its eigenvector with ``u`` at
    finite ``T`` (docs/model.md, "Outliers and overlaps at finite T"): ``u_s(y) = delta/snr``
    above every node, ``x = y (delta + u_nu(y))``, overlap ``x'(y) / (y snr |u_s'(y)|)``; NaN
    where there is no such root with ``x'(y) > 0`` stable to 2% without the rare atoms (nodes
    of mass below ``rare``; below the threshold, or inside the tail of ``A~``). Broadcast over
    ``snr``; O(snr x nodes x 100).
    """
    a_s, w_s, a_nu, w_nu = rules
    snr_arr = np.asarray(snr, dtype=float)
    target = np.where(snr_arr > 0, delta / np.where(snr_arr > 0, snr_arr, 1.0), np.inf)
    top = max(a_s.max(), a_nu.max())
    low = np.full(snr_arr.shape, top + 1e-12 * abs(top))
    high = top + float(w_s @ np.abs(a_s)) / np.minimum(target, 1e300) + 1.0
    y = bisect(lambda m: _transform(a_s, w_s, m)[0] > target, low, high, 100)
    slope_s = _transform(a_s, w_s, y)[1]
    u_nu, slope_nu = _transform(a_nu, w_nu, y)
    x, slope_x = y * (delta + u_nu), delta + u_nu + y * slope_nu
    bulk = w_nu > rare * w_nu.sum()  # x'(y) without the nodes of the tail's rare atoms
    smooth = delta + u_nu + y * _transform(a_nu[bulk], w_nu[bulk], y)[1]
    ok = (slope_x > 0) & (np.abs(smooth - slope_x) < 0.02 * slope_x) & np.isfinite(target)
    with np.errstate(divide="ignore", invalid="ignore"):
        overlap = slope_x / (-y * snr_arr * slope_s)
    return np.where(ok, x, np.nan), np.where(ok, overlap, np.nan)


def with_finite_t(out: xr.Dataset, positional: Any, weights: Any) -> xr.Dataset:
    """``predict``'s dataset ``out`` with the finite_vocab sample outlier, top eigenvalue and
    overlap replaced by :func:`finite_t_spike` where ``N T / V <`` :data:`FINITE_T_BOUND`,
    ``d >=`` :data:`FINITE_T_MIN_D` (when ``out`` has ``d``), the closed forms have an
    outlier and it has a root; in the tail regime (no root) by :func:`finite_d_spike` at the
    realised sizes when ``out`` has ``d`` (docs/model.md, "Outliers and overlaps at finite
    T"). ``out`` has a ``T`` coordinate; ``positional``/``weights`` map ``(name, T)`` to a
    spec, or are one spec when ``out`` has no such dimension. O(settings x 1 s) for the rules
    and O(tail settings x max(min(128 n^3, 2e10), 8 n^3)), ``n = min(V, N)``, for the draws
    (both cached), then O(points x nodes x 100); O(d x delta x gamma) where none qualifies."""
    v = {k: out.variables[k].values for k in ("T", "delta_effective", "gamma_effective")}
    fewest = v["T"].min() / (v["gamma_effective"].max() / v["delta_effective"].min())  # N T/V
    if "finite_vocab" not in out.variables["variant"].values or fewest >= FINITE_T_BOUND:
        return out  # the closed forms' fast path
    ratio = out["gamma_effective"] / out["delta_effective"]
    small = (out["T"] / ratio < FINITE_T_BOUND) & (out["kappa"] > 0)
    above = out["sample_outlier"].sel(variant="finite_vocab").notnull()
    small = small & above.any([dim for dim in above.dims if dim not in small.dims])
    small = small & (out["d"] >= FINITE_T_MIN_D) if "d" in out.coords else small
    if not bool(small.any()):
        return out
    out, models = out.copy(deep=True), (positional, weights)

    def pick(name: str | xr.DataArray, at: dict) -> float:
        da = out[name] if isinstance(name, str) else name
        return float(da.sel({k: v for k, v in at.items() if k in da.dims}).item())

    for index in np.argwhere(small.values):
        at = {dim: small[dim].values[i] for dim, i in zip(small.dims, index, strict=True)}
        T = int(pick("T", at))
        names = ("positional", "weights")
        specs = (m[(at[k], T)] if k in at else m for k, m in zip(names, models, strict=True))
        keys = [json.dumps(spec, sort_keys=True, default=np.ndarray.tolist) for spec in specs]
        rules = token_rules(T, *keys, float(f"{pick(ratio, at):.3g}"))
        at["variant"] = "finite_vocab"
        point = out.sel(at)
        snr = point["snr"]
        x, overlap = finite_t_spike(pick("delta_effective", at), snr.values, rules)
        closed = point["sample_outlier"].notnull()
        tail = closed.any([k for k in closed.dims if k not in snr.dims]).values & np.isnan(x)
        if "d" in out.coords and tail.any():
            d, r = int(pick("d", at)), pick("alpha", at) / pick("kappa", at)
            V, N = (round(d / pick(f"{k}_effective", at)) for k in ("delta", "gamma"))
            draws = int(np.clip(2e10 / min(V, N) ** 3, 8, 128))  # a few seconds a setting
            atoms = realised_rules(T, *keys, V, N, draws)
            x_d, overlap_d = finite_d_spike(d, V, N, snr.values, atoms, r)
            x, overlap = np.where(tail, x_d, x), np.where(tail, overlap_d, overlap)
        found = point["sample_outlier"].notnull() & xr.DataArray(np.isfinite(x), dims=snr.dims)
        for name in ("sample_outlier", "sample_top_eigenvalue", "sample_overlap_signal"):
            value = overlap if "overlap" in name else x * pick("kappa", at)
            new = xr.where(found, xr.DataArray(value, dims=snr.dims), point[name])
            out[name].loc[at] = new.transpose(*point[name].dims)
    return out
