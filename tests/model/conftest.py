"""Shared helpers of the model tests."""

from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import numpy as np

from attnrmt.model import simulate_cell

#: Rounding of a product of O(50) unit-size terms in each precision, relative to its largest
#: entry (measured: 0 in float64, <= 2.7e-7 in float32).
PRODUCT_TOLERANCE = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-5}


def assert_products_in_precision(
    pairs: Iterable[tuple[np.ndarray, np.ndarray]], dtype: type
) -> None:
    """Each ``(found, expected)``: ``found`` is in ``dtype``, has ``expected``'s shape and
    equals it to ``dtype``'s rounding (:data:`PRODUCT_TOLERANCE`)."""
    tolerance = PRODUCT_TOLERANCE[np.dtype(dtype)]
    for found, expected in pairs:
        assert found.dtype == dtype and found.shape == expected.shape
        np.testing.assert_allclose(found, expected, rtol=0, atol=tolerance * np.abs(expected).max())


#: Fields of a CellResult compared as squared overlaps (absolute tolerance).
OVERLAP_FIELDS = (
    "overlap_signal",
    "overlap_class_mean",
    "overlap_table_mean",
    "pop_overlap_signal",
)


def assert_same_cell(
    found, expected, *, value_rtol: float, value_atol: float, overlap_atol: float
) -> None:
    """Two :class:`attnrmt.model.CellResult` of the same cell agree: eigenvalue fields to
    ``value_rtol`` relative plus ``value_atol`` times the largest eigenvalue of ``S``
    (rounding of a backward-stable eigensolver is absolute, ~eps ||S||, so zero and small
    eigenvalues need the absolute part), overlaps to ``overlap_atol``, the rest exactly."""
    scale = value_atol * float(np.abs(expected.eigenvalues).max())
    for name in ("eigenvalues", "top_eigenvalues", "pop_top_eigenvalues"):
        found_values, expected_values = getattr(found, name), getattr(expected, name)
        assert found_values.shape == expected_values.shape, name
        np.testing.assert_allclose(
            found_values, expected_values, rtol=value_rtol, atol=scale, err_msg=name
        )
    for name in OVERLAP_FIELDS:
        np.testing.assert_allclose(
            getattr(found, name), getattr(expected, name), rtol=0, atol=overlap_atol, err_msg=name
        )
    for name in ("alpha", "kappa", "sigma", "V", "N"):
        assert getattr(found, name) == getattr(expected, name), name
    np.testing.assert_array_equal(found.effective_weights, expected.effective_weights)
    np.testing.assert_equal(found.downstream_accuracy, expected.downstream_accuracy)


def classes_cell(
    d: int,
    delta: float,
    gamma: float,
    T: int,
    K: int,
    means: Any,
    labels: Any,
    weights: Any,
    snr: float,
    centered: bool = True,
    top_k: int | None = None,
    seed: int = 0,
) -> SimpleNamespace:
    """A K-class :func:`attnrmt.model.simulate_cell` (positional ``{"kind": "classes", K,
    means, labels}``): its record fields and its ``classes`` details as attributes."""
    spec = {"kind": "classes", "K": K, "means": means, "labels": labels}
    result = simulate_cell(d, delta, gamma, T, spec, weights, snr, centered, top_k, seed)
    assert result.classes is not None
    return SimpleNamespace(**result.to_dict(), **result.classes)
