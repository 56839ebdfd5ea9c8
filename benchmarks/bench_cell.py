"""simulate_cell against its floor: the unavoidable dense work, timed in the same process.

Floor (per d): ``S = C^T C / N`` and ``G = E^T E / V`` plus ``eigvalsh(S)``, on Gaussian
matrices of the cell's shapes, timed in two implementations - numpy (``@``, which uses BLAS
``syrk``, and ``numpy.linalg.eigvalsh``) and scipy (``blas.dsyrk`` and
``scipy.linalg.eigvalsh``; numpy and scipy bundle different OpenBLAS builds whose speed
differs, most of all under load) - and the faster of the two is the floor of that repeat.
The cell does all of that plus sampling, pooling, eigenvectors, the population matrix and
its eigenpairs. Floor and cell are timed alternately (paired) ``repeats`` times; the
reported ratio is the median of the paired ratios, with the medians of each time.

Two runs:

- ``default_threads``: this process, BLAS with its default thread count (the target:
  median ratio <= 1.5);
- ``single_thread``: a subprocess with ``OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=1`` (how a
  sweep worker pinned to one core runs), timed by wall clock and by process CPU time.
  CPU time excludes the time the process waits for a core, so ``cpu_median_ratio`` is the
  figure least disturbed by other jobs on a shared machine.

Besides the median of paired ratios (``median_ratio``, the target), each row reports the
range of the paired ratios and ``best_ratio`` = fastest cell / fastest floor (timing noise
on a shared machine only ever adds time, so the minima are the least disturbed).

Before every timed call the process sleeps ``PAUSE_S``: numpy and scipy each bundle their
own OpenBLAS, whose worker threads keep spinning for a while after a call; without the
pause the floor (numpy) and the cell (scipy) would each pay for the other's spinning
threads.

Setting: delta = gamma = 0.5, T = 16, prefix L = 4, mean weights, snr = 2, centred,
top_k = 3.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np
import scipy.linalg
from scipy.linalg import blas

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
SINGLE_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _timed(work: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of ``work()`` after a pause."""
    time.sleep(PAUSE_S)
    wall, cpu = time.perf_counter(), time.process_time()
    work()
    return time.perf_counter() - wall, time.process_time() - cpu


def floor_numpy(pooled: np.ndarray, embeddings: np.ndarray) -> None:
    """``S = C^T C / N``, ``G = E^T E / V`` and ``eigvalsh(S)`` with numpy."""
    sample = pooled.T @ pooled / pooled.shape[0]
    gram = embeddings.T @ embeddings / embeddings.shape[0]
    np.linalg.eigvalsh(sample)
    del gram


def floor_scipy(pooled: np.ndarray, embeddings: np.ndarray) -> None:
    """The same with scipy's BLAS/LAPACK (one triangle of each product)."""
    sample = blas.dsyrk(1.0 / pooled.shape[0], pooled.T, trans=0, lower=1)
    gram = blas.dsyrk(1.0 / embeddings.shape[0], embeddings.T, trans=0, lower=1)
    scipy.linalg.eigvalsh(sample, lower=True, overwrite_a=True, check_finite=False)
    del gram


def compare(d: int, repeats: int, rng: np.random.Generator) -> dict[str, float]:
    """Paired cell/floor timings at dimension ``d``."""
    V, N = realised_sizes(d, CELL["delta"], CELL["gamma"])
    pooled = rng.standard_normal((N, d))
    embeddings = rng.standard_normal((V, d))
    numpy_floor = lambda: floor_numpy(pooled, embeddings)  # noqa: E731
    scipy_floor = lambda: floor_scipy(pooled, embeddings)  # noqa: E731

    def floor() -> tuple[float, float]:
        return min(_timed(numpy_floor), _timed(scipy_floor))

    numpy_floor()  # warm-up (thread pools, page faults)
    scipy_floor()
    simulate_cell(d, seed=10_000, **CELL)
    floors, cells = [], []
    for repeat in range(repeats):
        cell = lambda seed=repeat: simulate_cell(d, seed=seed, **CELL)  # noqa: E731
        if repeat % 2:  # alternate the order so that load drift hits both alike
            cells.append(_timed(cell))
            floors.append(floor())
        else:
            floors.append(floor())
            cells.append(_timed(cell))
    cell_walls, floor_walls = np.asarray(cells)[:, 0], np.asarray(floors)[:, 0]
    walls = cell_walls / floor_walls
    cpus = np.asarray(cells)[:, 1] / np.asarray(floors)[:, 1]
    return {
        "median_ratio": round(float(np.median(walls)), 3),
        "cell_s": round(float(np.median(np.asarray(cells)[:, 0])), 4),
        "floor_s": round(float(np.median(np.asarray(floors)[:, 0])), 4),
        "min_ratio": round(float(walls.min()), 3),
        "max_ratio": round(float(walls.max()), 3),
        "cpu_median_ratio": round(float(np.median(cpus)), 3),
        "best_ratio": round(float(cell_walls.min() / floor_walls.min()), 3),
        "repeats": repeats,
    }


def measure(repeats: int, dimensions: tuple[int, ...], label: str) -> dict[str, dict]:
    """Run :func:`compare` for every d and print a table."""
    rng = np.random.default_rng(0)
    results = {}
    print(f"[{label}]", flush=True)
    header = ("d", "cell_s", "floor_s", "median_ratio", "range", "cpu_ratio")
    print("{:>6} {:>9} {:>9} {:>13} {:>14} {:>10}".format(*header))
    for d in dimensions:
        row = compare(d, repeats, rng)
        results[f"d={d}"] = row
        print(
            f"{d:>6} {row['cell_s']:>9.4f} {row['floor_s']:>9.4f} {row['median_ratio']:>13.3f}"
            f"   [{row['min_ratio']:.2f}, {row['max_ratio']:.2f}] {row['cpu_median_ratio']:>10.3f}",
            flush=True,
        )
    return results


def _single_thread(repeats: int, dimensions: tuple[int, ...]) -> dict[str, dict]:
    """:func:`measure` in a subprocess with one BLAS thread."""
    command = [
        sys.executable,
        "-m",
        "benchmarks.bench_cell",
        "--json",
        str(repeats),
        *map(str, dimensions),
    ]
    output = subprocess.run(
        command, env={**os.environ, **SINGLE_THREAD_ENV}, check=True, capture_output=True, text=True
    ).stdout
    for line in output.splitlines():
        if not line.startswith("{"):
            print(line)
    return json.loads(output.splitlines()[-1])


def main(repeats: int = 7, dimensions: tuple[int, ...] = DIMENSIONS) -> dict:
    """Both runs; returns ``{"cell_vs_floor": ..., "cell_vs_floor_single_thread": ...}``."""
    default = measure(repeats, dimensions, "default BLAS threads")
    single = _single_thread(repeats, dimensions)
    return {
        "cell_vs_floor": default,
        "cell_vs_floor_single_thread": single,
        "setting": {**CELL, "centered": True, "top_k": 3, "pause_s": PAUSE_S},
        "load_average_1min_after": round(os.getloadavg()[0], 2),
    }


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--json":
        repeats_arg = int(sys.argv[2])
        dims = tuple(int(value) for value in sys.argv[3:]) or DIMENSIONS
        print(json.dumps(measure(repeats_arg, dims, "single BLAS thread")))
    else:
        main()
