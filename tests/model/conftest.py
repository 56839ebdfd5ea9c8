"""Shared helpers of the model tests."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

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
