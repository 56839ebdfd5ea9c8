"""Benchmark of the theory engine (targets: >= 1e5 spike predictions per second).

``main()`` returns ``{"theory_predictions_per_second": ..., "bulk_density_2000_seconds": ...,
"predict_over_spike_floor": ...}`` and prints it; ``python -m benchmarks`` calls every
``bench_*.py``'s ``main()``.

``predict_over_spike_floor``: the median time of :func:`attnrmt.theory.predict` (every
variable of ``theory.zarr``, both variants, as an xarray Dataset on named dimensions) on a
theory.zarr-shaped grid (:data:`PREDICT_GRID`) divided by the median time of its floor, the
two bare ``spike`` calls (one per variant) on the same broadcast numpy arrays, measured in the
same run. It is what the single engine costs over the
formulas it assembles (bulk edges, mean spike, top eigenvalues, xarray wrapping).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import numpy as np
import xarray as xr

from attnrmt.contract import VARIANTS
from attnrmt.theory import bulk_density, bulk_edges, predict, spike

N_POINTS = 100_000
GRID_POINTS = 2000
REPEATS = 5


def _best_seconds(call: Callable[[], object], repeats: int = REPEATS) -> float:
    """Best wall time of ``repeats`` calls (robust to a loaded machine)."""
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return float(best)


def bench_spike(n_points: int = N_POINTS, seed: int = 0) -> float:
    """Spike predictions per second (``finite_vocab``) on ``n_points`` random parameters."""
    rng = np.random.default_rng(seed)
    delta = rng.uniform(0.05, 4.0, n_points)
    gamma = rng.uniform(0.05, 4.0, n_points)
    snr = rng.uniform(0.0, 10.0, n_points)
    alpha = rng.uniform(0.0, 4.0, n_points)
    kappa = rng.uniform(0.05, 1.0, n_points)
    seconds = _best_seconds(lambda: spike(delta, gamma, snr, alpha, kappa))
    return n_points / seconds


def bench_bulk_density(n_grid: int = GRID_POINTS, delta: float = 0.5, gamma: float = 0.5) -> float:
    """Seconds for ``bulk_density`` on an ``n_grid``-point grid spanning the support."""
    upper = bulk_edges(delta, gamma)[1]
    x = np.linspace(0.0, 1.05 * upper, n_grid)
    return _best_seconds(lambda: bulk_density(x, delta, gamma))


def median_seconds(call: Callable[[], object], repeats: int = REPEATS) -> float:
    """Median wall time of ``repeats`` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


#: Shape of a theory.zarr-like grid: ratios on (d, delta, gamma), pooling scalars on weights,
#: then snr and centered (100,000 points).
PREDICT_GRID = {"d": 4, "delta": 5, "gamma": 5, "weights": 10, "snr": 50, "centered": 2}


def bench_predict(seed: int = 0) -> dict[str, float]:
    """Median seconds of ``predict`` on a :data:`PREDICT_GRID` grid and of its floor (bare
    ``spike`` per variant on the same broadcast numpy arrays), and their ratio."""
    rng = np.random.default_rng(seed)
    ratio_dims = ("d", "delta", "gamma")
    ratio_shape = tuple(PREDICT_GRID[d] for d in ratio_dims)
    named = {
        "delta": xr.DataArray(rng.uniform(0.05, 4.0, ratio_shape), dims=ratio_dims),
        "gamma": xr.DataArray(rng.uniform(0.05, 4.0, ratio_shape), dims=ratio_dims),
        "snr": xr.DataArray(np.linspace(0.0, 10.0, PREDICT_GRID["snr"]), dims="snr"),
        "alpha": xr.DataArray(rng.uniform(0.0, 4.0, PREDICT_GRID["weights"]), dims="weights"),
        "kappa": xr.DataArray(rng.uniform(0.05, 1.0, PREDICT_GRID["weights"]), dims="weights"),
        "sigma": xr.DataArray(rng.uniform(-1.0, 1.0, PREDICT_GRID["weights"]), dims="weights"),
    }
    centered = xr.DataArray([True, False], dims="centered")
    arrays = [a.values for a in xr.broadcast(*named.values(), centered)[:5]]
    floor = median_seconds(lambda: [spike(*arrays, variant=v) for v in VARIANTS])
    engine = median_seconds(lambda: predict(**named, centered=centered))
    return {
        "predict_grid_points": float(np.prod(list(PREDICT_GRID.values()))),
        "predict_seconds": engine,
        "spike_floor_seconds": floor,
        "predict_over_spike_floor": engine / floor,
    }


def main() -> dict[str, float]:
    """Run the benchmarks, print and return the results."""
    results = {
        "theory_predictions_per_second": bench_spike(),
        "bulk_density_2000_seconds": bench_bulk_density(),
        **bench_predict(),
    }
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
