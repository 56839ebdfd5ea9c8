"""The finite-d edge of a grid's cells (docs/model.md, "What replaces the edge")."""

from __future__ import annotations

import numpy as np
import xarray as xr

from attnrmt.analysis.noise_edge import finite_d_edges
from attnrmt.theory import bulk_edges


def test_finite_d_edges_only_below_the_bound() -> None:
    # T = 2 (N T / V = 2) gets an edge, T = 8 (N T / V = 8) keeps the large-T one (NaN);
    # the padded positions of the shorter T are ignored
    grid = xr.Dataset(
        {
            "V": ("T", [200, 200]),
            "N": ("T", [200, 200]),
            "effective_weights": (("T", "position"), [[0.5, 0.5] + [np.nan] * 6, [1 / 8] * 8]),
        },
        coords={"d": 100, "T": [2, 8]},
    )
    edges = finite_d_edges(grid)
    assert np.isnan(edges.sel(T=8)) and np.isfinite(edges.sel(T=2))
    assert float(edges.sel(T=2)) > float(bulk_edges(0.5, 0.5)[1])
