"""K token classes: class means from a Gram matrix, label models over the classes, the
pooled label moments, and the K-class route of :func:`attnrmt.model.simulate_cell`
(docs/model.md, "K classes", where the model, the label laws and the K = 2 reduction, the
same numbers as the two-class cell of the same seed, are written out)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import numpy as np

from attnrmt._validation import (
    check_choice,
    check_int,
    check_numeric,
    check_positive,
    spec_dict,
    split_model_spec,
)
from attnrmt.model._cell_steps import (
    cell_streams,
    sample_spectrum_from_samples,
)
from attnrmt.model._linalg import (
    add_rank_one,
    lower_gram,
    spectrum_and_top_eigenvectors,
    top_eigenpairs,
)
from attnrmt.model.cell import pool, squared_overlaps
from attnrmt.model.readout import ridge_readout_accuracy_multiclass
from attnrmt.model.table import child_seeds, in_threads, row_blocks
from attnrmt.model.table_laws import load_file_table
from attnrmt.model.weights import (
    causal_attention_weights,
    optimal_weights,
    pooling_weights,
    validate_weights,
)

MEANS_PRESETS = ("orthogonal", "simplex")
LABEL_KINDS = ("iid", "prefix", "markov", "custom")
#: Largest number of classes (labels are stored as int8).
MAX_CLASSES = 127

_LABEL_PARAMS = {
    "iid": ("p",),
    "prefix": ("L", "p"),
    "markov": ("P", "r"),
    "custom": ("sequences", "probabilities"),
}
# Entries of G, P, p and probabilities are O(1): absolute tolerances for rounding of
# hand-written or computed numbers (a row of P summing to 1 - 1e-13 is a stochastic row).
_SUM_ATOL = 1e-10
_SYMMETRY_ATOL = 1e-10
_PSD_RTOL = 1e-9
# Semidefinite Cholesky: a pivot below this times the largest diagonal entry is zero.
_PIVOT_RTOL = 1e-10
# Eigenvalues of the signal matrix B below this times its largest are zero (its rank).
_RANK_RTOL = 1e-10
# Alternating maximisation of the top spike (optimal_class_weights): starts and stop rule.
_OPTIMAL_STARTS = 3
_OPTIMAL_MAX_STEPS = 500
_OPTIMAL_RTOL = 1e-14


# ------------------------------------------------------------------------------ means


def class_mean_gram(means: str | Any, K: int) -> np.ndarray:
    """The class-mean Gram matrix ``G`` (K x K, ``mu_k . mu_l = snr G_kl``; docs/model.md,
    "K-class model") of ``means``: ``orthogonal`` ``I``, ``simplex`` ``(K delta_kl - 1)/(K -
    1)``, or a symmetric positive semidefinite (K, K) array. ValueError otherwise. O(K^3)."""
    K = check_int("K", K, minimum=2)
    if isinstance(means, str):
        check_choice("means", means, MEANS_PRESETS)
        if means == "orthogonal":
            return np.eye(K)
        return (K * np.eye(K) - 1.0) / (K - 1)
    G = check_numeric("means", means)
    if G.shape != (K, K):
        raise ValueError(f"means={means!r}: a Gram matrix must be {K} x {K} (K={K})")
    scale = max(1.0, float(np.abs(G).max()))
    if not np.allclose(G, G.T, rtol=0.0, atol=_SYMMETRY_ATOL * scale):
        raise ValueError(f"means={means!r}: a Gram matrix must be symmetric")
    G = 0.5 * (G + G.T)
    smallest = float(np.linalg.eigvalsh(G)[0])
    if smallest < -_PSD_RTOL * scale:
        raise ValueError(
            f"means={means!r}: a Gram matrix must be positive semidefinite "
            f"(smallest eigenvalue {smallest:.3g})"
        )
    return G


def class_mean_factor(G: np.ndarray) -> np.ndarray:
    """Lower-triangular ``F`` with ``F F^T = G`` (row ``k``: the coordinates of ``mu_k /
    sqrt(snr)``; docs/model.md, "K-class model"): semidefinite Cholesky, a pivot below
    ``_PIVOT_RTOL`` giving a zero column. ValueError when ``G`` is not positive
    semidefinite. O(K^3)."""
    G = np.asarray(G, dtype=np.float64)
    K = G.shape[0]
    factor = np.zeros((K, K))
    scale = max(float(np.max(np.diag(G))), 1e-300)
    for j in range(K):
        pivot = G[j, j] - factor[j, :j] @ factor[j, :j]
        if pivot > _PIVOT_RTOL * scale:
            factor[j, j] = np.sqrt(pivot)
            factor[j + 1 :, j] = (G[j + 1 :, j] - factor[j + 1 :, :j] @ factor[j, :j]) / factor[
                j, j
            ]
    if not np.allclose(factor @ factor.T, G, rtol=0.0, atol=1e-8 * scale):
        raise ValueError(f"G={G!r}: not positive semidefinite (no factor F F^T = G)")
    return factor


# ---------------------------------------------------------------------- label models


def _check_probabilities(name: str, value: Any, size: int) -> np.ndarray:
    p = check_numeric(name, value)
    if p.shape != (size,):
        raise ValueError(f"{name}={value!r}: must be a list of length {size}")
    if np.any(p < 0) or abs(float(p.sum()) - 1.0) > _SUM_ATOL:
        raise ValueError(f"{name}={value!r}: must be non-negative and sum to 1")
    return p


def _floats(values: np.ndarray) -> list[Any]:
    """Nested lists of plain floats (``-0.0`` -> ``0.0``)."""
    return (np.asarray(values, dtype=np.float64) + 0.0).tolist()


def _symmetric_transition(r: float, K: int) -> np.ndarray:
    """``P = r I + (1 - r) 11^T / K`` (``K = 2``: keep probability ``(1 + r)/2``)."""
    P = np.full((K, K), (1.0 - r) / K)
    np.fill_diagonal(P, (1.0 + (K - 1) * r) / K)
    return P


def _stationary_law(P: np.ndarray) -> np.ndarray | None:
    """The unique stationary law ``pi P = pi`` of a stochastic ``P`` (uniform when ``P`` is
    doubly stochastic), or None when it is not unique. O(K^3)."""
    K = P.shape[0]
    singular = np.linalg.svd(P.T - np.eye(K), compute_uv=False)
    if K > 1 and singular[-2] <= 1e-9:
        return None
    if np.allclose(P.sum(axis=0), 1.0, rtol=0.0, atol=_SUM_ATOL):
        return np.full(K, 1.0 / K)
    system = np.vstack([P.T - np.eye(K), np.ones((1, K))])
    pi = np.linalg.lstsq(system, np.concatenate([np.zeros(K), [1.0]]), rcond=None)[0]
    pi = np.clip(pi, 0.0, None)
    return pi / pi.sum()


def validate_label_model(spec: Mapping[str, Any] | str, T: int, K: int) -> dict[str, Any]:
    """The canonical dict of a label model over ``K`` classes and length ``T`` (docs/model.md,
    "K-class label models"): keys sorted, ``p`` filled (uniform) for ``iid`` and ``prefix``,
    ``markov``'s ``r`` unexpanded, plain numbers and lists. ValueError naming the argument
    and value for an unknown kind or parameter or an invalid value. O(K^3 + m T)."""
    T = check_int("T", T, minimum=1)
    K = check_int("K", K, minimum=2)
    if K > MAX_CLASSES:
        raise ValueError(f"K={K!r}: must be <= {MAX_CLASSES}")
    required = {"prefix": ("L",), "custom": ("sequences", "probabilities")}
    kind, params = split_model_spec("labels", spec, _LABEL_PARAMS, required)
    canonical: dict[str, Any] = {"kind": kind}
    if kind in ("iid", "prefix"):
        p = (
            np.full(K, 1.0 / K)
            if "p" not in params
            else _check_probabilities("labels.p", params["p"], K)
        )
        canonical["p"] = _floats(p)
        if kind == "prefix":
            L = check_int("labels.L", params["L"], minimum=1)
            if L > T:
                raise ValueError(f"labels.L={params['L']!r}: must be <= T={T}")
            canonical["L"] = L
    elif kind == "markov":
        if ("P" in params) == ("r" in params):
            raise ValueError(f"labels={spec_dict(spec)!r}: markov needs exactly one of 'P', 'r'")
        if "r" in params:
            r = check_numeric("labels.r", params["r"])
            if r.ndim != 0 or not -1.0 / (K - 1) <= float(r) < 1.0:
                raise ValueError(
                    f"labels.r={params['r']!r}: must be a number in "
                    f"[-1/(K-1), 1) = [{-1.0 / (K - 1):.6g}, 1) (K={K})"
                )
            canonical["r"] = float(r) + 0.0
        else:
            P = check_numeric("labels.P", params["P"])
            if P.shape != (K, K):
                raise ValueError(f"labels.P={params['P']!r}: must be a {K} x {K} matrix")
            if np.any(P < 0) or not np.allclose(P.sum(axis=1), 1.0, rtol=0.0, atol=_SUM_ATOL):
                raise ValueError(
                    f"labels.P={params['P']!r}: rows must be probability "
                    "distributions (non-negative, summing to 1)"
                )
            if _stationary_law(P) is None:
                raise ValueError(
                    f"labels.P={params['P']!r}: has no unique stationary law "
                    "(the stationary start is not defined)"
                )
            canonical["P"] = _floats(P)
    else:
        sequences = check_numeric("labels.sequences", params["sequences"])
        if (
            sequences.ndim != 2
            or sequences.shape[1] != T
            or sequences.shape[0] < 1
            or np.any(sequences != np.round(sequences))
            or np.any((sequences < 0) | (sequences > K - 1))
        ):
            raise ValueError(
                f"labels.sequences={params['sequences']!r}: must be a non-empty "
                f"list of length-{T} lists of labels in 0..{K - 1}"
            )
        probabilities = _check_probabilities(
            "labels.probabilities", params["probabilities"], sequences.shape[0]
        )
        canonical["sequences"] = sequences.astype(int).tolist()
        canonical["probabilities"] = _floats(probabilities)
    return dict(sorted(canonical.items()))


def transition_matrix(spec: Mapping[str, Any], K: int) -> np.ndarray:
    """``P`` (K x K) of a ``markov`` label model (``r`` expanded, module docstring)."""
    if "r" in spec:
        return _symmetric_transition(float(spec["r"]), K)
    return np.asarray(spec["P"], dtype=np.float64)


def label_pair_law(spec: Mapping[str, Any] | str, T: int, K: int) -> np.ndarray:
    """Exact pair law ``C[t, s, k, l] = P(l_t = k, l_s = l)`` (T, T, K, K) of a label model
    (docs/model.md, "K-class label models"); ``C[t, t] = diag(p_t)``. O(T^2 K^2) memory,
    O(T K^3 + T^2 K^2) time (O(m T^2 K^2) for ``custom``)."""
    spec = validate_label_model(spec, T, K)
    kind = spec["kind"]
    if kind == "custom":
        sequences = np.asarray(spec["sequences"])
        one_hot = (sequences[:, :, None] == np.arange(K)).astype(np.float64)  # (m, T, K)
        return np.einsum("i,itk,isl->tskl", np.asarray(spec["probabilities"]), one_hot, one_hot)
    if kind == "markov":
        P = transition_matrix(spec, K)
        pi = _stationary_law(P)
        assert pi is not None  # validated
        powers = [np.eye(K)]
        for _ in range(T - 1):
            powers.append(powers[-1] @ P)
        pairs = np.empty((T, T, K, K))
        for t, s in itertools.product(range(T), repeat=2):
            forward = pi[:, None] * powers[abs(s - t)]  # P(l_min = k, l_max = l)
            pairs[t, s] = forward if s >= t else forward.T
        return pairs
    p = np.asarray(spec["p"], dtype=np.float64)
    pairs = np.broadcast_to(np.outer(p, p), (T, T, K, K)).copy()
    shared = spec["L"] if kind == "prefix" else 1
    pairs[:shared, :shared] = np.diag(p)
    pairs[np.arange(T), np.arange(T)] = np.diag(p)
    return pairs


def label_marginals(pairs: np.ndarray) -> np.ndarray:
    """``p[t, k] = P(l_t = k)`` (T, K): the diagonals of ``C[t, t]``."""
    return np.einsum("ttkk->tk", pairs)


def labels_are_balanced(pairs: np.ndarray) -> bool:
    """Whether every position's label is uniform over the classes (to ``_SUM_ATOL``), the
    condition of the K-class theory (docs/model.md, "K-class population covariance")."""
    K = pairs.shape[-1]
    return bool(np.allclose(label_marginals(pairs), 1.0 / K, rtol=0.0, atol=_SUM_ATOL))


def _categorical(p: np.ndarray, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """Independent int8 labels from ``p``; uniform ``p`` as ``K - 1 - integers(0, K)`` (for
    ``K = 2`` the two-class model's fair signs), else by inverting the cumulative law."""
    K = p.size
    if np.all(p == p[0]):
        return (K - 1 - rng.integers(0, K, size=shape, dtype=np.int8)).astype(np.int8)
    found = np.searchsorted(np.cumsum(p), rng.random(shape), side="right")
    return np.minimum(found, K - 1).astype(np.int8)


def _markov_steps(first: np.ndarray, P: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """Chain from ``first`` (n,) with one uniform a step (n, T-1): stay when ``u < P_kk``, else
    the other states in ascending order (the law ``P``; ``K = 2``: the two-class rule).
    O(n T K)."""
    K = P.shape[0]
    order = np.array([[k, *(j for j in range(K) if j != k)] for k in range(K)])
    cumulative = np.cumsum(np.take_along_axis(P, order, axis=1), axis=1)
    labels = np.empty((first.size, uniforms.shape[1] + 1), dtype=np.int8)
    labels[:, 0] = first
    for step in range(uniforms.shape[1]):
        current = labels[:, step]
        position = np.sum(uniforms[:, step, None] >= cumulative[current], axis=1)
        labels[:, step + 1] = order[current, np.minimum(position, K - 1)]
    return labels


def sample_labels(
    spec: Mapping[str, Any] | str, T: int, K: int, n: int, rng: np.random.Generator
) -> np.ndarray:
    """Draw ``n`` label sequences (n, T) of int8 in ``0..K-1`` (docs/model.md, "K-class label
    models", where the draw order is fixed). O(n T) time and memory."""
    spec = validate_label_model(spec, T, K)
    n = check_int("n", n, minimum=0)
    kind = spec["kind"]
    if kind == "custom":
        sequences = np.asarray(spec["sequences"], dtype=np.int8)
        index = rng.choice(sequences.shape[0], size=n, p=np.asarray(spec["probabilities"]))
        return sequences[index]
    if kind == "markov":
        P = transition_matrix(spec, K)
        pi = _stationary_law(P)
        assert pi is not None  # validated
        first = _categorical(pi, (n, 1), rng)[:, 0]
        return _markov_steps(first, P, rng.random((n, T - 1)))
    p = np.asarray(spec["p"], dtype=np.float64)
    labels = _categorical(p, (n, T), rng)
    if kind == "prefix":
        labels[:, : spec["L"]] = _categorical(p, (n, 1), rng)
    return labels


# ------------------------------------------------------------------- pooled moments


def pooled_label_moments(
    w: np.ndarray, pairs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean (K,), second moment (K, K) and class noise weights ``q_k = sum_t w_t^2 p_t(k)`` (K,)
    of the pooled label histogram ``Y = sum_t w_t e_{l_t}`` (docs/model.md, "Pooled signal
    matrix"). O(T^2 K^2)."""
    marginals = label_marginals(pairs)
    second = np.einsum("t,s,tskl->kl", w, w, pairs)
    return w @ marginals, 0.5 * (second + second.T), (w * w) @ marginals


def signal_matrix(w: np.ndarray, pairs: np.ndarray, centered: bool = True) -> np.ndarray:
    """The pooled signal matrix ``B`` (K x K; docs/model.md, "Pooled signal matrix"):
    ``Cov(Y)`` for centred ``S``, ``E[Y Y^T]`` uncentred. O(T^2 K^2)."""
    mean, second, _ = pooled_label_moments(np.asarray(w, dtype=np.float64), pairs)
    return second - np.outer(mean, mean) if centered else second


def _psd_sqrt(matrix: np.ndarray) -> np.ndarray:
    """Symmetric square root of a PSD matrix (eigenvalues clipped at 0). O(K^3)."""
    values, vectors = np.linalg.eigh(0.5 * (matrix + matrix.T))
    return (vectors * np.sqrt(np.clip(values, 0.0, None))) @ vectors.T


def _top_spike(weights: np.ndarray, projected: np.ndarray) -> tuple[float, np.ndarray]:
    """``max_x x^T A~(w) x`` and its unit ``x``, ``A~(w) = sum w_t w_s D~_ts``."""
    values, vectors = np.linalg.eigh(np.einsum("t,tskl,s->kl", weights, projected, weights))
    return float(values[-1]), vectors[:, -1]


def optimal_class_weights(pairs: np.ndarray, mean_gram: np.ndarray) -> np.ndarray:
    """Pooling that maximises the top spike strength ``theta_1(w)`` (docs/model.md, "K-class optimal
    weights", where the biquadratic form and its alternating maximisation are written out):
    ``pairs`` the label pair law, ``mean_gram`` the class-mean Gram the spike sees (``snr G + K
    delta I``; only its centred part matters). Alternates the two exact partial maximisations from
    ``_OPTIMAL_STARTS`` starts and returns :func:`attnrmt.model.optimal_weights` of ``R^(x)`` at the
    best ``x``. O(T^3 K^3 + steps (T^3 + T^2 K^2))."""
    T, K = pairs.shape[0], pairs.shape[-1]
    marginals = label_marginals(pairs)
    centred_pairs = pairs - np.einsum("tk,sl->tskl", marginals, marginals)
    J = np.eye(K) - 1.0 / K
    root = _psd_sqrt(J @ mean_gram @ J)
    projected = np.einsum("ka,tsab,bl->tskl", root, centred_pairs, root)
    _, big_vectors = np.linalg.eigh(projected.transpose(0, 2, 1, 3).reshape(T * K, T * K))
    best_value, best_x = -np.inf, np.zeros(K)
    for column in range(1, min(_OPTIMAL_STARTS, T * K) + 1):
        left, _, right = np.linalg.svd(big_vectors[:, -column].reshape(T, K))
        w, x = left[:, 0], right[0]
        value = -np.inf
        for _ in range(_OPTIMAL_MAX_STEPS):
            w = np.linalg.eigh(np.einsum("k,tskl,l->ts", x, projected, x))[1][:, -1]
            new_value, x = _top_spike(w, projected)
            converged = new_value - value <= _OPTIMAL_RTOL * max(abs(new_value), 1e-300)
            value = new_value
            if converged:
                break
        if value > best_value:
            best_value, best_x = value, x
    return optimal_weights(np.einsum("k,tskl,l->ts", best_x, projected, best_x))


def class_pooling_weights(
    weights: Mapping[str, Any] | str, T: int, pairs: np.ndarray, mean_gram: np.ndarray
) -> np.ndarray:
    """The weights ``w`` (T,) of a spec for a K-class label law: ``optimal`` by
    :func:`optimal_class_weights`, the others by :func:`attnrmt.model.pooling_weights`
    (docs/model.md, "K-class optimal weights"). O(T^3 K^3) for ``optimal``."""
    spec = validate_weights(weights, T)
    if spec["kind"] == "optimal":
        return optimal_class_weights(pairs, mean_gram)
    return pooling_weights(spec, T)


def class_theory_inputs(
    labels: Mapping[str, Any] | str,
    weights: Mapping[str, Any] | str,
    T: int,
    K: int,
    means: str | Any,
    snr: float,
    delta: float,
    centered: bool = True,
) -> dict[str, Any]:
    """What :mod:`attnrmt.theory.classes` takes, from model specs (docs/model.md, "K
    classes"): ``{"signal_matrix", "kappa", "sigma", "weights", "gram"}``; ``optimal``
    weights at ``snr``, ``delta``. ValueError for an invalid spec or unbalanced labels (the
    bulk is then not ``MP_delta``). O(T^2 K^2 + T^3 K^3)."""
    K = check_int("K", K, minimum=2)
    G = class_mean_gram(means, K)
    pairs = label_pair_law(labels, T, K)
    if not labels_are_balanced(pairs):
        raise ValueError(
            f"labels={labels!r}: the K-class theory needs balanced labels "
            "(every position uniform over the classes); its noise is then "
            "kappa times one Wishart matrix of ratio delta"
        )
    snr_value = float(check_positive("snr", snr, allow_zero=True))
    delta_value = float(check_positive("delta", delta))
    w = class_pooling_weights(weights, T, pairs, snr_value * G + K * delta_value * np.eye(K))
    return {
        "signal_matrix": signal_matrix(w, pairs, centered),
        "kappa": float(w @ w),
        "sigma": float(w.sum()),
        "weights": w,
        "gram": G,
    }


# ----------------------------------------------------------------------- the table


def class_sizes(d: int, delta: float, gamma: float, K: int) -> tuple[int, int]:
    """``V = K round(d / (K delta))`` and ``N = round(d / gamma)`` (docs/model.md, "K-class
    model")."""
    return K * round(d / (K * delta)), round(d / gamma)


def sample_class_table(
    d: int, V: int, K: int, snr: float, factor: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw the table ``e_v = mu_{k(v)} + z_v`` (docs/model.md, "K-class model"): the noise in
    ``TABLE_BLOCKS_PER_CLASS`` SFC64 row blocks per class as
    :func:`attnrmt.model.table.sample_table` fills it (``K = 2``: its numbers bit for bit),
    then ``mu_k`` on the first ``K`` coordinates. Returns the embeddings (V, d), the class
    means of the rows (d, K) and ``mu_k`` (d, K). O(V d) time, 8 V d bytes."""
    size = V // K
    embeddings = np.empty((V, d))
    blocks = row_blocks(size, K)
    generators = [
        np.random.Generator(np.random.SFC64(child)) for child in child_seeds(rng, len(blocks))
    ]

    def fill(index: int) -> None:
        start, stop = blocks[index]
        generators[index].standard_normal(out=embeddings[start:stop])

    in_threads(fill, len(blocks))
    signal_means = np.zeros((d, K))
    signal_means[:K] = np.sqrt(snr) * factor.T
    for k in range(K):
        embeddings[k * size : (k + 1) * size, :K] += signal_means[:K, k]
    class_means = embeddings.reshape(K, size, d).mean(axis=1).T
    return embeddings, class_means, signal_means


def file_class_table(
    law: Mapping[str, Any], K: int, snr: float, shape: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A ``file`` table of ``K`` classes (docs/model.md, "Tables from a file"): the file's rows
    by class, each row plus ``(sqrt(snr)/rho) c_k`` (``c_k`` its class's centred mean, ``rho``
    their root mean square norm: ``K = 2`` gives the two-class ``||Dlt_0|| + sqrt(snr)``).
    Returns as :func:`sample_class_table`, the signal means being the centred class means.
    ValueError when the file has not ``K`` classes or the shape ``(V, d)``. O(V d)."""
    rows, index = load_file_table(law)
    if index[-1] + 1 != K or rows.shape != shape:
        raise ValueError(
            f"table.path={law['path']!r}: {index[-1] + 1} classes, shape {rows.shape}; the "
            f"cell needs K = {K} and (V, d) = {shape}: d = {rows.shape[1]}, delta = "
            f"{rows.shape[1]}/{rows.shape[0]}"
        )
    means = rows.reshape(K, -1, shape[1]).mean(axis=1).T
    centred = means - means.mean(axis=1, keepdims=True)
    push = np.sqrt(snr) * centred / max(float(np.sqrt(np.mean(centred**2) * shape[1])), 1e-300)
    rows += np.repeat(push.T, shape[0] // K, axis=0)
    return rows, means + push, centred + push


def class_tokens(labels: np.ndarray, V: int, K: int, rng: np.random.Generator) -> np.ndarray:
    """Token indices (int64), uniform among the ``V/K`` tokens of each label's class
    (docs/model.md, "K-class model"). O(n T)."""
    size = V // K
    within = rng.integers(0, size, size=labels.shape, dtype=np.int64)
    return labels.astype(np.int64) * size + within


def class_population_matrix(
    embeddings: np.ndarray,
    class_means: np.ndarray,
    moments: tuple[np.ndarray, ...],
    centered: bool,
) -> np.ndarray:
    """The population matrix given the table on the lower triangle (docs/model.md, "K-class
    population covariance"): ``E^T diag(K q_{k(v)} / V) E + M (B - diag(q)) M^T`` with ``M``
    the class means and ``moments`` of :func:`pooled_label_moments`. O(V d^2 + K d^2) time,
    O(d^2) memory."""
    V, K = embeddings.shape[0], class_means.shape[1]
    mean, second, noise = moments
    core = second - np.outer(mean, mean) if centered else second
    if np.all(noise == noise[0]):
        population = lower_gram(embeddings, K * float(noise[0]) / V)
    else:
        row_scales = np.sqrt(K * np.repeat(noise, V // K) / V)
        population = lower_gram(embeddings * row_scales[:, None], 1.0)
    values, vectors = np.linalg.eigh(core - np.diag(noise))
    for value, vector in zip(values, vectors.T, strict=True):
        add_rank_one(population, float(value), class_means @ vector)
    return population


def spike_directions(
    means: np.ndarray, core: np.ndarray, rank: int
) -> tuple[np.ndarray, np.ndarray]:
    """The top ``rank`` eigenpairs of ``M core M^T`` (``M`` d x K) through ``M = Q R``: values
    descending (rank,), unit directions (d, rank), NaN where the value is at rounding level
    (``_RANK_RTOL``). O(d K^2)."""
    Q, R = np.linalg.qr(means)
    values, vectors = np.linalg.eigh(R @ core @ R.T)
    values, vectors = values[::-1][:rank], vectors[:, ::-1][:, :rank]
    directions = Q @ vectors
    scale = float(np.abs(core).max()) * float(np.sum(means**2))
    absent = values <= _RANK_RTOL * max(scale, 1e-300)
    directions[:, absent] = np.nan
    return np.where(absent, 0.0, values), directions


# ----------------------------------------------------------------------------- cell


def _sample_spectrum(pooled: np.ndarray, centered: bool, top_k: int) -> tuple[np.ndarray, ...]:
    """All eigenvalues of ``S`` (ascending) and its top-k unit eigenvectors, through the N x N
    Gram for ``top_k < N < d`` (docs/model.md, "Full cells"). O(min(N, d)^2 max(N, d))."""
    n_samples, d = pooled.shape
    if top_k < n_samples < d:
        return sample_spectrum_from_samples(pooled, centered, top_k)
    sample = lower_gram(pooled, 1.0 / n_samples)
    if centered:
        add_rank_one(sample, -1.0, pooled.mean(axis=0))
    return spectrum_and_top_eigenvectors(sample, top_k)


def sequence_classes(spec: Mapping[str, Any], labels: np.ndarray) -> np.ndarray:
    """The class of each sequence (docs/model.md, "K-class readout"): for ``prefix`` the label
    of positions ``1..L``; ValueError for the other label models. O(n)."""
    if spec["kind"] != "prefix":
        raise ValueError(f"labels={spec!r}: only prefix label models have a sequence class")
    return np.asarray(labels[:, 0], dtype=np.int64)


def _spike_diagonal(overlaps: np.ndarray, spikes: int) -> np.ndarray:
    """``overlaps[j, j]`` for ``j < spikes`` ((k, r) table; NaN beyond its rows/columns)."""
    out = np.full(spikes, np.nan)
    size = min(spikes, *overlaps.shape) if overlaps.size else 0
    out[:size] = np.diagonal(overlaps)[:size]
    return out


def _subspace_overlap(overlaps: np.ndarray) -> np.ndarray:
    """Row sums over the directions that exist (NaN when none does)."""
    present = ~np.isnan(overlaps[0]) if overlaps.shape[0] else np.zeros(0, dtype=bool)
    if not np.any(present):
        return np.full(overlaps.shape[0], np.nan)
    return np.clip(overlaps[:, present].sum(axis=1), 0.0, 1.0)


def simulate_classes(
    sizes: tuple[int, float, float, int, float, bool, int, int, int],
    K: int,
    spec: Mapping[str, Any],
    weights: Mapping[str, Any] | str,
    seed: Any,
    table: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The K-class route of :func:`attnrmt.model.simulate_cell` (docs/model.md, "K-class
    cell"; docs/data-contract.md, "K-class sweeps", where every field's K-class meaning is
    written): ``spec`` the K-class positional spec, ``sizes`` the checked arguments,
    ``table`` a canonical ``file`` law (:func:`file_class_table`) or None (Gaussian). Returns
    the fields of :class:`attnrmt.model.CellResult` and its ``classes`` details. O(N T d + N
    d^2 + V d^2 + d^3) time, O(d^2 + (N + V) d) memory; full route only."""
    d, _, _, T, snr, centered, top_k, V, N = sizes
    G = class_mean_gram(spec["means"], K)
    factor = class_mean_factor(G)
    label_spec = validate_label_model(spec["labels"], T, K)
    weights_spec = validate_weights(weights, T)
    table_stream, label_stream, token_stream, solver_stream = cell_streams(seed)
    pairs = label_pair_law(label_spec, T, K)
    if table is None:
        embeddings, class_means, signal_means = sample_class_table(
            d, V, K, snr, factor, table_stream
        )
        mean_gram = snr * G + K * (d / V) * np.eye(K)
    else:
        embeddings, class_means, signal_means = file_class_table(table, K, snr, (V, d))
        mean_gram = class_means.T @ class_means
    labels_drawn = sample_labels(label_spec, T, K, N, label_stream)
    tokens = class_tokens(labels_drawn, V, K, token_stream)

    if weights_spec["kind"] == "causal_attention":
        token_weights = causal_attention_weights(embeddings, tokens, weights_spec["tau"])
        effective_weights = token_weights.mean(axis=0)
    else:
        effective_weights = class_pooling_weights(weights_spec, T, pairs, mean_gram)
        token_weights = effective_weights
    moments = pooled_label_moments(effective_weights, pairs)
    core = signal_matrix(effective_weights, pairs, centered)
    kappa = float(effective_weights @ effective_weights)

    pooled = pool(tokens, token_weights, embeddings)
    eigenvalues, top_vectors = _sample_spectrum(pooled, centered, top_k)
    downstream_accuracy = (
        ridge_readout_accuracy_multiclass(pooled, sequence_classes(label_spec, labels_drawn), K)
        if label_spec["kind"] == "prefix"
        else float("nan")
    )
    table_mean = class_means.mean(axis=1)
    start = solver_stream.standard_normal(d)
    for direction in (*(class_means[:, : K - 1] - table_mean[:, None]).T, table_mean):
        start += np.sqrt(d) * direction / max(np.sqrt(np.sum(direction**2)), 1e-300)
    pop_values, pop_vectors = top_eigenpairs(
        class_population_matrix(embeddings, class_means, moments, centered), top_k, start
    )

    core_values = np.linalg.eigvalsh(core)
    rank = int(np.sum(core_values > _RANK_RTOL * max(float(core_values[-1]), 1e-300)))
    table_values, table_directions = spike_directions(class_means, core, rank)
    signal_values, signal_directions = spike_directions(signal_means, core, rank)
    tables = {
        f"{prefix}overlap_{kind}_spikes": np.clip((vectors.T @ directions) ** 2, 0.0, 1.0)
        for prefix, vectors in (("", top_vectors), ("pop_", pop_vectors))
        for kind, directions in (("table", table_directions), ("signal", signal_directions))
    }
    subspaces = {
        name.replace("_spikes", "_subspace"): _subspace_overlap(value)
        for name, value in tables.items()
    }
    spikes = table_values.size
    fields = {
        "eigenvalues": eigenvalues,
        "top_eigenvalues": eigenvalues[::-1][:top_k],
        "overlap_signal": subspaces["overlap_signal_subspace"],
        "overlap_class_mean": subspaces["overlap_table_subspace"],
        "overlap_table_mean": squared_overlaps(top_vectors, table_mean),
        "pop_top_eigenvalues": pop_values,
        "pop_overlap_signal": subspaces["pop_overlap_signal_subspace"],
        "alpha": float(K / (K - 1) * np.trace(signal_matrix(effective_weights, pairs))),
        "kappa": kappa,
        "sigma": float(effective_weights.sum()),
        "effective_weights": effective_weights,
        "downstream_accuracy": float(downstream_accuracy),
        "spike_strength_table": table_values / kappa,
        "spike_strength_signal": signal_values / kappa,
        **{
            f"spike_{prefix}overlap_{kind}": _spike_diagonal(
                tables[f"{prefix}overlap_{kind}_spikes"], spikes
            )
            for prefix in ("", "pop_")
            for kind in ("table", "signal")
        },
    }
    details = {
        "K": K,
        **tables,
        **subspaces,
        "class_mean_gram": class_means.T @ class_means,
        "signal_matrix": core,
    }
    return fields, details
