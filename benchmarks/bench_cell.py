"""simulate_cell against its floor: the unavoidable dense work, timed in the same process.

Floor (per d): ``S = C^T C / N`` and ``G = E^T E / V`` (numpy products, which use BLAS
``syrk``) plus ``numpy.linalg.eigvalsh(S)``, on Gaussian matrices of the cell's shapes.
The cell does all of that plus sampling, pooling, eigenvectors, the population matrix and
its eigenpairs. Floor and cell are timed alternately (paired) ``repeats`` times; the
reported ratio is the median of the paired ratios, with the medians of each time.
Before every timed call the process sleeps ``PAUSE_S``: numpy and scipy each bundle their
own OpenBLAS, whose worker threads keep spinning for a while after a call; without the
pause the floor (numpy) and the cell (scipy) would each pay for the other's spinning
threads on a 2-core machine.

Setting: delta = gamma = 0.5, T = 16, prefix L = 4, mean weights, snr = 2, centred,
top_k = 3. Target: median ratio <= 1.5.
"""

from __future__ import annotations

import time

import numpy as np

from attnrmt.model import realised_sizes, simulate_cell

DIMENSIONS = (500, 1000, 1500, 2000)
PAUSE_S = 0.3
CELL = {
    "delta": 0.5,
    "gamma": 0.5,
    "T": 16,
    "positional": {"kind": "prefix", "L": 4},
    "weights": "mean",
    "snr": 2.0,
}


def floor_seconds(pooled: np.ndarray, embeddings: np.ndarray) -> float:
    """Wall time of ``S = C^T C / N``, ``G = E^T E / V`` and ``eigvalsh(S)``."""
    time.sleep(PAUSE_S)
    start = time.perf_counter()
    sample = pooled.T @ pooled / pooled.shape[0]
    gram = embeddings.T @ embeddings / embeddings.shape[0]
    np.linalg.eigvalsh(sample)
    elapsed = time.perf_counter() - start
    del gram
    return elapsed


def cell_seconds(d: int, seed: int) -> float:
    """Wall time of one :func:`simulate_cell` call."""
    time.sleep(PAUSE_S)
    start = time.perf_counter()
    simulate_cell(d, seed=seed, **CELL)
    return time.perf_counter() - start


def compare(d: int, repeats: int, rng: np.random.Generator) -> dict[str, float]:
    """Paired cell/floor timings at dimension ``d``."""
    V, N = realised_sizes(d, CELL["delta"], CELL["gamma"])
    pooled = rng.standard_normal((N, d))
    embeddings = rng.standard_normal((V, d))
    floor_seconds(pooled, embeddings)  # warm-up (thread pools, page faults)
    cell_seconds(d, seed=10_000)
    floors, cells = [], []
    for repeat in range(repeats):
        if repeat % 2:  # alternate the order so that load drift hits both alike
            cells.append(cell_seconds(d, seed=repeat))
            floors.append(floor_seconds(pooled, embeddings))
        else:
            floors.append(floor_seconds(pooled, embeddings))
            cells.append(cell_seconds(d, seed=repeat))
    ratios = np.asarray(cells) / np.asarray(floors)
    return {
        "median_ratio": round(float(np.median(ratios)), 3),
        "cell_s": round(float(np.median(cells)), 4),
        "floor_s": round(float(np.median(floors)), 4),
        "min_ratio": round(float(ratios.min()), 3),
        "max_ratio": round(float(ratios.max()), 3),
        "repeats": repeats,
    }


def main(repeats: int = 7, dimensions: tuple[int, ...] = DIMENSIONS) -> dict:
    """Run the comparison for every d, print a table, return the results dict."""
    rng = np.random.default_rng(0)
    results = {}
    print(f"{'d':>6} {'cell_s':>9} {'floor_s':>9} {'median_ratio':>13} {'range':>15}")
    for d in dimensions:
        row = compare(d, repeats, rng)
        results[f"d={d}"] = row
        print(
            f"{d:>6} {row['cell_s']:>9.4f} {row['floor_s']:>9.4f} {row['median_ratio']:>13.3f}"
            f"   [{row['min_ratio']:.2f}, {row['max_ratio']:.2f}]",
            flush=True,
        )
    return {"cell_vs_floor": results, "setting": {**CELL, "centered": True, "top_k": 3}}


if __name__ == "__main__":
    main()
