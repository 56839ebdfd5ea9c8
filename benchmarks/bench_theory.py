"""Benchmark of the theory engine (targets: >= 1e5 spike predictions per second).

``main()`` returns ``{"theory_predictions_per_second": ..., "bulk_density_2000_seconds": ...}``
and prints it; ``python -m benchmarks`` calls every ``bench_*.py``'s ``main()``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import numpy as np

from attnrmt.theory import bulk_density, bulk_edges, spike

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


def main() -> dict[str, float]:
    """Run both benchmarks, print and return the results."""
    results = {
        "theory_predictions_per_second": bench_spike(),
        "bulk_density_2000_seconds": bench_bulk_density(),
    }
    print(json.dumps(results))
    return results


if __name__ == "__main__":
    main()
