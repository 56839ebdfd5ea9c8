"""Positional sign models: exact correlation ``R`` and a vectorised sampler
(docs/model.md, "Positional models", whose table lists the kinds, their parameters and
``R = E[xi xi^T]``). Every model has ``E[xi_t] = 0`` and ``R_tt = 1``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, SupportsFloat

import numpy as np

from attnrmt._validation import check_int, check_numeric, spec_dict, split_model_spec

POSITIONAL_KINDS = ("iid", "prefix", "markov", "label", "custom")

# Tolerances for a user-given custom R. Entries are O(1), so absolute tolerances suffice:
# symmetry / unit diagonal to rounding of a hand-written or computed matrix, and the
# arcsine covariance C = sin(pi R / 2) may have eigenvalues down to -1e-9 (rounding) before
# it is declared not positive semidefinite.
_SYMMETRY_ATOL = 1e-10
_PSD_ATOL = 1e-9

_PARAMS = {
    "iid": (),
    "prefix": ("L",),
    "markov": ("r",),
    "label": ("rho", "rho0", "L"),
    "custom": ("R",),
}


def _float(value: SupportsFloat) -> float:
    """Plain Python float with ``-0.0`` normalised to ``0.0``."""
    return float(value) + 0.0


def _check_T(T: Any) -> int:
    return check_int("T", T, minimum=1)


def _check_L(value: Any, T: int, name: str) -> int:
    L = check_int(name, value, minimum=1)
    if L > T:
        raise ValueError(f"{name}={value!r}: must be <= T={T}")
    return L


def _check_signed_unit(name: str, value: Any) -> np.ndarray:
    array = check_numeric(name, value)
    if np.any(np.abs(array) > 1):
        raise ValueError(f"{name}={value!r}: every entry must lie in [-1, 1]")
    return array


def _arcsine_covariance(R: np.ndarray) -> np.ndarray:
    """``C = sin(pi R / 2)``: Gaussian covariance whose sign vector has correlation ``R``."""
    return np.sin(0.5 * np.pi * R)


def _check_custom_R(value: Any, T: int) -> np.ndarray:
    R = check_numeric("positional.R", value)
    if R.shape != (T, T):
        raise ValueError(f"positional.R={value!r}: must be a {T} x {T} matrix (T={T})")
    if not np.allclose(R, R.T, rtol=0.0, atol=_SYMMETRY_ATOL):
        raise ValueError(f"positional.R={value!r}: must be symmetric")
    if not np.allclose(np.diag(R), 1.0, rtol=0.0, atol=_SYMMETRY_ATOL):
        raise ValueError(f"positional.R={value!r}: must have unit diagonal (R_tt = 1)")
    if np.any(np.abs(R) > 1 + _SYMMETRY_ATOL):
        raise ValueError(f"positional.R={value!r}: every entry must lie in [-1, 1]")
    R = np.clip(0.5 * (R + R.T), -1.0, 1.0)
    np.fill_diagonal(R, 1.0)
    smallest = float(np.linalg.eigvalsh(_arcsine_covariance(R))[0])
    if smallest < -_PSD_ATOL:
        raise ValueError(
            f"positional.R={value!r}: not realisable as the sign of a Gaussian vector: "
            f"C = sin(pi R / 2) is not positive semidefinite (smallest eigenvalue "
            f"{smallest:.3g})"
        )
    return R


def validate_positional(spec: Mapping[str, Any] | str, T: int) -> dict[str, Any]:
    """The canonical dict of a positional model for length ``T`` (docs/model.md, "Positional
    models"): keys sorted, plain numbers and (nested) lists, the ``label`` shorthand kept.
    ValueError naming the argument and value for an unknown kind or parameter or an invalid
    value (a custom ``R`` must be a correlation with ``sin(pi R / 2)`` positive
    semidefinite). O(T^3) for ``custom``, else O(T)."""
    T = _check_T(T)
    required = {"prefix": ("L",), "markov": ("r",), "custom": ("R",)}
    kind, params = split_model_spec("positional", spec, _PARAMS, required)
    canonical: dict[str, Any] = {"kind": kind}
    if kind == "prefix":
        canonical["L"] = _check_L(params["L"], T, "positional.L")
    elif kind == "markov":
        r = check_numeric("positional.r", params["r"])
        if r.ndim != 0 or not abs(float(r)) < 1:
            raise ValueError(f"positional.r={params['r']!r}: must be a number with |r| < 1")
        canonical["r"] = _float(r)
    elif kind == "label":
        if "rho" in params:
            if "rho0" in params or "L" in params:
                raise ValueError(
                    f"positional={spec_dict(spec)!r}: give either 'rho' or 'rho0' + 'L', not both"
                )
            rho = _check_signed_unit("positional.rho", params["rho"])
            if rho.shape != (T,):
                raise ValueError(
                    f"positional.rho={params['rho']!r}: must be a list of length T={T}"
                )
            canonical["rho"] = [_float(x) for x in rho]
        else:
            if "rho0" not in params or "L" not in params:
                raise ValueError(
                    f"positional={spec_dict(spec)!r}: label needs 'rho' or both 'rho0' and 'L'"
                )
            rho0 = _check_signed_unit("positional.rho0", params["rho0"])
            if rho0.ndim != 0:
                raise ValueError(f"positional.rho0={params['rho0']!r}: must be a number")
            canonical["L"] = _check_L(params["L"], T, "positional.L")
            canonical["rho0"] = _float(rho0)
    elif kind == "custom":
        R = _check_custom_R(params["R"], T)
        canonical["R"] = [[_float(x) for x in row] for row in R]
    return dict(sorted(canonical.items()))


def label_correlations(positional: Mapping[str, Any], T: int) -> np.ndarray:
    """``rho`` (T,) of a ``label`` model: ``rho_t = E[xi_t y]``
    (docs/model.md, "Positional models")."""
    spec = validate_positional(positional, T)
    if spec["kind"] != "label":
        raise ValueError(f"positional={positional!r}: not a label model")
    if "rho" in spec:
        return np.asarray(spec["rho"], dtype=np.float64)
    return np.where(np.arange(1, T + 1) <= spec["L"], spec["rho0"], 0.0)


def positional_correlation(positional: Mapping[str, Any] | str, T: int) -> np.ndarray:
    """Exact sign correlation ``R = E[xi xi^T]`` (T x T) of a positional model (docs/model.md,
    "Positional models"). O(T^2)."""
    spec = validate_positional(positional, T)
    kind = spec["kind"]
    if kind == "iid":
        return np.eye(T)
    if kind == "prefix":
        R = np.eye(T)
        R[: spec["L"], : spec["L"]] = 1.0
        return R
    if kind == "markov":
        lags = np.abs(np.subtract.outer(np.arange(T), np.arange(T)))
        return np.power(spec["r"], lags).astype(np.float64)
    if kind == "label":
        rho = label_correlations(spec, T)
        R = np.outer(rho, rho)
        np.fill_diagonal(R, 1.0)
        return R
    return np.asarray(spec["R"], dtype=np.float64)


def _random_signs(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Independent uniform ±1 signs (int8)."""
    return (2 * rng.integers(0, 2, size=shape, dtype=np.int8) - 1).astype(np.int8)


def _signs_with_probability(
    rng: np.random.Generator, probability_plus: np.ndarray, shape: tuple[int, ...]
) -> np.ndarray:
    """Independent signs, +1 with ``probability_plus`` (broadcast to ``shape``)."""
    return np.where(rng.random(shape) < probability_plus, 1, -1).astype(np.int8)


def sample_signs(
    positional: Mapping[str, Any] | str, T: int, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray | None]:
    """``n`` sign sequences of length ``T`` of a positional model from ``rng`` (docs/model.md,
    "Positional models"), vectorised over ``n``: ``signs`` int8 (n, T), ``xi in {-1, +1}`` with
    ``E[xi] = 0`` and ``E[xi xi^T] = R`` exactly, and the labels ``y`` int8 (n,) of a ``label``
    model (uniform ±1, ``E[xi_t y] = rho_t``), else None. O(n T) (O(n T^2) for ``custom``)."""
    spec = validate_positional(positional, T)
    n = check_int("n", n, minimum=0)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng={rng!r}: must be a numpy.random.Generator")
    kind = spec["kind"]
    labels = None
    if kind == "iid":
        signs = _random_signs(rng, (n, T))
    elif kind == "prefix":
        signs = _random_signs(rng, (n, T))
        shared = _random_signs(rng, (n, 1))
        signs[:, : spec["L"]] = shared
    elif kind == "markov":
        # Stationary chain: uniform start, keep the previous sign w.p. (1 + r)/2, so
        # E[xi_t xi_t'] = r^|t - t'|.
        first = _random_signs(rng, (n, 1))
        steps = _signs_with_probability(rng, 0.5 * (1.0 + spec["r"]), (n, T - 1))
        signs = np.concatenate([first, first * np.cumprod(steps, axis=1, dtype=np.int8)], 1)
        signs = signs.astype(np.int8)
    elif kind == "label":
        rho = label_correlations(spec, T)
        labels = _random_signs(rng, (n,))
        agree = _signs_with_probability(rng, 0.5 * (1.0 + rho), (n, T))
        signs = (agree * labels[:, None]).astype(np.int8)
    else:  # custom: sign of a Gaussian, arcsine covariance (docs/model.md, "Positional models")
        covariance = _arcsine_covariance(np.asarray(spec["R"], dtype=np.float64))
        eigenvalues, eigenvectors = np.linalg.eigh(covariance)
        factor = eigenvectors * np.sqrt(np.clip(eigenvalues, 0.0, None))
        gaussian = rng.standard_normal((n, T)) @ factor.T
        signs = np.where(gaussian >= 0, 1, -1).astype(np.int8)
    return signs, labels
