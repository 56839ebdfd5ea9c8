"""Pooling weights and the pooling scalars alpha, kappa, sigma (docs/model.md, "Weights",
"Pooling scalars", where the kinds, formulas and normalisations are listed): a built-in
name (:data:`attnrmt.contract.BUILTIN_WEIGHTS`) or ``{"kind": "causal_limit" |
"causal_attention", "tau"}``, ``{"kind": "custom", "values"}``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from attnrmt._validation import (
    check_finite_array,
    check_int,
    check_numeric,
    split_model_spec,
)
from attnrmt.contract import BUILTIN_WEIGHTS

WEIGHT_KINDS = (*BUILTIN_WEIGHTS, "causal_limit", "causal_attention", "custom")

_PARAMS = {
    "mean": (),
    "last": (),
    "optimal": (),
    "harmonic": (),
    "causal_limit": ("tau",),
    "causal_attention": ("tau",),
    "custom": ("values",),
}

# Two top eigenvalues of R closer than this (relative to the largest) are treated as one
# degenerate eigenspace in optimal_weights, so that e.g. iid (R = I) gives a deterministic
# answer (the mean direction) instead of whatever LAPACK returns.
_DEGENERACY_RTOL = 1e-10


def _check_T(T: Any) -> int:
    return check_int("T", T, minimum=1)


def _check_tau(value: Any) -> float:
    tau = check_numeric("weights.tau", value)
    if tau.ndim != 0:
        raise ValueError(f"weights.tau={value!r}: must be a number")
    return float(tau) + 0.0


def validate_weights(spec: Mapping[str, Any] | str, T: int) -> dict[str, Any]:
    """The canonical dict of a weights spec for length ``T``: keys sorted, ``tau`` always
    present (default 0.0), ``custom`` values floats. ValueError for an unknown kind or
    parameter, a non-finite ``tau``, ``custom`` values not of length ``T``, not finite or
    all zero. O(T)."""
    T = _check_T(T)
    kind, params = split_model_spec("weights", spec, _PARAMS, {"custom": ("values",)})
    canonical: dict[str, Any] = {"kind": kind}
    if kind in ("causal_limit", "causal_attention"):
        canonical["tau"] = _check_tau(params.get("tau", 0.0))
    elif kind == "custom":
        values = check_numeric("weights.values", params["values"])
        if values.shape != (T,):
            raise ValueError(f"weights.values={params['values']!r}: must be a list of length T={T}")
        if not np.any(values):
            raise ValueError(f"weights.values={params['values']!r}: must not be all zero")
        canonical["values"] = [float(x) + 0.0 for x in values]
    return dict(sorted(canonical.items()))


def harmonic_weights(T: int) -> np.ndarray:
    """The seed's harmonic weights ``(H_{T-1} - H_{t-1}) / (T - 1)`` (docs/model.md,
    "Weights"; ``T = 1``: ``[1]``). O(T)."""
    T = _check_T(T)
    if T == 1:
        return np.ones(1)
    harmonic = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, T))])  # H_0..H_{T-1}
    return (harmonic[-1] - harmonic) / (T - 1)


def causal_limit_weights(T: int, tau: float = 0.0) -> np.ndarray:
    """Deterministic limit of causal self-attention pooling, ``sum(w) = 1`` (docs/model.md,
    "Weights"); for ``tau >= 0`` evaluated through ``q = e^{-tau}`` so that large ``tau``
    does not overflow. O(T)."""
    T = _check_T(T)
    tau = _check_tau(tau)
    positions = np.arange(1, T + 1, dtype=np.float64)
    if tau >= 0:
        q = np.exp(-tau)
        self_term = (1.0 - q) / (1.0 - q + positions * q)
        row_share = q / (1.0 - q + positions * q)
    else:
        c = np.expm1(tau)
        self_term = c / (c + positions)
        row_share = 1.0 / (c + positions)
    tail_sums = np.cumsum(row_share[::-1])[::-1]  # sum_{t=s}^{T} 1/(c+t)
    return (self_term + tail_sums) / T


def optimal_weights(R: np.ndarray) -> np.ndarray:
    """Top eigenvector of ``R`` (unit norm, ``sum(w) > 0``), maximising ``alpha/kappa``
    (docs/model.md, "Weights"); a degenerate top eigenspace gives the projection of the
    all-ones vector onto it (``R = I``: the mean), else its first basis vector. O(T^3)."""
    R = _check_correlation(R)
    eigenvalues, eigenvectors = np.linalg.eigh(R)
    top = eigenvalues[-1]
    in_top = eigenvalues >= top - _DEGENERACY_RTOL * max(abs(top), 1.0)
    basis = eigenvectors[:, in_top]
    ones = np.ones(R.shape[0])
    projection = basis @ (basis.T @ ones)
    norm = np.linalg.norm(projection)
    if norm > 1e-8 * np.sqrt(R.shape[0]):
        return projection / norm
    vector = basis[:, -1]
    if abs(vector.sum()) > 1e-12:
        return vector * np.sign(vector.sum())
    return vector * np.sign(vector[np.argmax(np.abs(vector))])


def _check_correlation(R: Any) -> np.ndarray:
    R = check_finite_array("R", R)
    if R.ndim != 2 or R.shape[0] != R.shape[1] or R.shape[0] < 1:
        raise ValueError(f"R={R!r}: must be a square T x T matrix")
    return R


def pooling_weights(
    weights: Mapping[str, Any] | str, T: int, R: np.ndarray | None = None
) -> np.ndarray:
    """The weights ``w`` (T,) of a spec (docs/model.md, "Weights"); ``R`` (the sign
    correlation) is needed for ``optimal``; ``causal_attention`` gives its deterministic
    limit ``causal_limit(tau)`` (the cell reports the measured weights). O(T^3)."""
    spec = validate_weights(weights, T)
    kind = spec["kind"]
    if kind == "mean":
        return np.full(T, 1.0 / T)
    if kind == "last":
        w = np.zeros(T)
        w[-1] = 1.0
        return w
    if kind == "harmonic":
        return harmonic_weights(T)
    if kind in ("causal_limit", "causal_attention"):
        return causal_limit_weights(T, spec["tau"])
    if kind == "custom":
        return np.asarray(spec["values"], dtype=np.float64)
    if R is None:
        raise ValueError("R=None: 'optimal' weights need the sign correlation R")
    R = _check_correlation(R)
    if R.shape != (T, T):
        raise ValueError(f"R shape {R.shape}: must be ({T}, {T}) for T={T}")
    return optimal_weights(R)


def pooling_scalars(w: np.ndarray, R: np.ndarray) -> tuple[float, float, float]:
    """``alpha = w^T R w``, ``kappa = ||w||^2``, ``sigma = sum_t w_t`` (docs/model.md,
    "Pooling scalars"). O(T^2)."""
    w = check_finite_array("w", w)
    R = _check_correlation(R)
    if w.ndim != 1 or R.shape != (w.size, w.size):
        raise ValueError(f"w shape {w.shape}, R shape {R.shape}: need w (T,) and R (T, T)")
    return float(w @ R @ w), float(w @ w), float(w.sum())


def causal_attention_weights(
    embeddings: np.ndarray, tokens: np.ndarray, tau: float, *, chunk_bytes: int = 2**25
) -> np.ndarray:
    """Per-sequence effective weights ``W_ns = (1/T) sum_{t >= s} A_ts`` (N, T) of real causal
    softmax self-attention on the sequences' embeddings (docs/model.md, "Weights"),
    vectorised over blocks of sequences whose gathered ``(chunk, T, d)`` embeddings fit in
    ``chunk_bytes``. O(N T^2 d) time."""
    tau = _check_tau(tau)
    n_sequences, T = tokens.shape
    d = embeddings.shape[1]
    causal = np.tril(np.ones((T, T), dtype=bool))
    chunk = max(1, chunk_bytes // (8 * T * d))
    effective = np.empty((n_sequences, T))
    for start in range(0, n_sequences, chunk):
        x = embeddings[tokens[start : start + chunk]]  # (b, T, d)
        scores = (tau / d) * (x @ x.transpose(0, 2, 1))  # (b, T, T)
        scores = np.where(causal, scores, -np.inf)
        scores -= scores.max(axis=2, keepdims=True)
        attention = np.exp(scores)
        attention /= attention.sum(axis=2, keepdims=True)
        effective[start : start + chunk] = attention.sum(axis=1) / T
    return effective
