"""Benchmark of the free-probability engine (target: a general-bulk density point in
<= 50 ms; docs/model.md, "A general bulk by subordination").

``main()`` returns ``{"density_point_seconds": ..., "density_grid_400_seconds": ...,
"edges_seconds": ..., "closed_form_density_point_seconds": ...}`` and prints it; ``python -m
benchmarks bench_free`` records it. The general bulk is ``MP_0.5 ⊠ MP_0.5 ⊠ nu`` with ``nu``
:data:`ATOMS` uniform atoms on ``[0.5, 2]`` (seed 0); times are medians of :data:`REPEATS`.
"""

from __future__ import annotations

import json

import numpy as np

from attnrmt.theory import bulk_density
from attnrmt.theory.free import DiscreteLaw, FreeProduct, free_density, free_edges
from benchmarks.bench_theory import median_seconds

ATOMS = 1000
REPEATS = 7
#: The target: seconds of one density point of the general bulk.
POINT_SECONDS_TARGET = 0.05


def main() -> dict[str, float | bool]:
    """Run the benchmarks, print and return the results."""
    rng = np.random.default_rng(0)
    law = FreeProduct((0.5, 0.5), DiscreteLaw.of(rng.uniform(0.5, 2.0, ATOMS)))
    upper = float(free_edges(law)[-1, 1])
    grid = np.linspace(0.01, 1.05 * upper, 400)
    point = median_seconds(lambda: free_density(law, [0.5 * upper]), REPEATS)
    results: dict[str, float | bool] = {
        "atoms": float(ATOMS),
        "density_point_seconds": point,
        "density_point_ok": point <= POINT_SECONDS_TARGET,
        "density_grid_400_seconds": median_seconds(lambda: free_density(law, grid), REPEATS),
        "edges_seconds": median_seconds(lambda: free_edges(law), 1),
        "closed_form_density_point_seconds": median_seconds(
            lambda: bulk_density([2.0], 0.5, 0.5), REPEATS
        ),
    }
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
