"""simulate_cell of a 16-point snr list (one replicate, the curve route) against one
cell of the same replicate (docs/model.md, "Curves: one decomposition per replicate").

Both run with one BLAS thread (threadpoolctl) on the same seed, alternated (paired)
``repeats`` times with a pause before each call (``bench_cell.PAUSE_S``: the bundled
OpenBLAS threads of numpy and scipy spin for a while after a call). Each row reports the
median CPU seconds of the cell, of the 16-point curve and of a 1-point curve, the median
of the paired ratios curve / cell (the targets: <= 1.5 for the full route at d = 1000 and
2000, <= 2 for the top route at d = 4000 and 8000), the range of those ratios, and the
cost of one more snr point, ``(curve_16 - curve_1) / 15`` (median over the pairs). CPU time
excludes the time the process waits for a core on a loaded machine, so it is the figure
least disturbed by other jobs; wall-clock medians are reported next to it.

Settings: the full route as ``bench_cell`` (delta = gamma = 0.5, T = 16, prefix L = 4,
mean weights, centred, top_k = 3; the cell at snr 2), the top route as ``bench_cell``'s
top cells (T = 8, iid). The curve's snrs: 16 points from 0.25 to 4 (both thresholds of
these settings lie inside: finite_vocab population ~0.21 / sample ~1.28 for iid mean
pooling; they move with the pooling scalars).

Measured (``results.md``, load 4.7-9.6): full route 1.71 (d = 1000; pairs 1.35-2.01, 1.55
in a run at load ~6) and 1.44 (d = 2000), 3.3 and 19 ms a further snr; top route 1.61
(d = 4000) and 1.31 (d = 8000; 1.56 in another run). The fixed part at d = 1000 (a 1-point
curve costs ~1.3 cells): ``dstevd`` (~60-100 ms, where the cell's ``dsterf`` takes ~18)
and the population matrix's block Krylov run (~50 ms more than the cell's Lanczos: blocks
of 4 holding both vectors of ``w``, 160-190 columns). Tried and dropped: one
divide-and-conquer level by hand (``dstevd`` on the two halves, one secular merge carrying
only the tracked vectors): 2 x 15 ms + ~30 ms against 59 ms for ``dstevd`` at d = 1000;
``dsymm`` for the population products (1.8 against 1.0 ms a block of 4 at d = 1000 for two
``dtrmm``).

Usage: ``python -m benchmarks bench_curve`` (all rows), or ``python -m
benchmarks.bench_curve full|top [d ...]`` for one route (printed, not stored).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import numpy as np

from attnrmt.model import simulate_cell
from benchmarks.bench_cell import CELL, PAUSE_S, TOP_CELL

SNRS = tuple(float(snr) for snr in np.linspace(0.25, 4.0, 16))
CELL_SNR = 2.0
FULL_DIMENSIONS = (1000, 2000)
TOP_DIMENSIONS = (4000, 8000)
REPEATS = {1000: 5, 2000: 3, 4000: 3, 8000: 2}


def _timed(work: Callable[[], object]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of ``work()`` after a pause."""
    time.sleep(PAUSE_S)
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    return time.process_time() - cpu, time.perf_counter() - wall


def compare(d: int, spectrum: str, repeats: int) -> dict[str, float | int]:
    """One row: ``repeats`` alternated (cell, 16-point curve, 1-point curve) runs at ``d``
    on seeds 0, 1, ..., medians and paired ratios (module docstring)."""
    setting = {**(CELL if spectrum == "full" else TOP_CELL)}
    setting.pop("snr")
    times: dict[str, list[tuple[float, float]]] = {"cell": [], "curve": [], "one": []}
    for seed in range(repeats):

        def cell(seed: int = seed) -> object:
            return simulate_cell(d, snr=CELL_SNR, seed=seed, spectrum=spectrum, **setting)

        def whole(seed: int = seed) -> object:
            return simulate_cell(d, snr=SNRS, seed=seed, spectrum=spectrum, **setting)

        def one(seed: int = seed) -> object:
            return simulate_cell(d, snr=(CELL_SNR,), seed=seed, spectrum=spectrum, **setting)

        runs = {"cell": cell, "curve": whole, "one": one}
        for name, work in runs.items():
            times[name].append(_timed(work))
        print(
            f"  {spectrum} d={d} seed={seed}: "
            + ", ".join(
                f"{name} {cpu:.2f} s" for name, (cpu, _) in ((k, v[-1]) for k, v in times.items())
            ),
            flush=True,
        )
    cpu = {name: np.array([pair[0] for pair in rows]) for name, rows in times.items()}
    wall = {name: np.array([pair[1] for pair in rows]) for name, rows in times.items()}
    ratios = cpu["curve"] / cpu["cell"]
    extra = (cpu["curve"] - cpu["one"]) / (len(SNRS) - 1)
    return {
        "cell_cpu_s": round(float(np.median(cpu["cell"])), 3),
        "curve_cpu_s": round(float(np.median(cpu["curve"])), 3),
        "one_point_curve_cpu_s": round(float(np.median(cpu["one"])), 3),
        "median_ratio": round(float(np.median(ratios)), 3),
        "min_ratio": round(float(ratios.min()), 3),
        "max_ratio": round(float(ratios.max()), 3),
        "per_extra_snr_cpu_s": round(float(np.median(extra)), 4),
        "per_extra_snr_over_cell": round(float(np.median(extra / cpu["cell"])), 4),
        "wall_median_ratio": round(float(np.median(wall["curve"] / wall["cell"])), 3),
        "cell_wall_s": round(float(np.median(wall["cell"])), 3),
        "curve_wall_s": round(float(np.median(wall["curve"])), 3),
        "points": len(SNRS),
        "repeats": repeats,
    }


def measure(spectrum: str, dimensions: tuple[int, ...]) -> dict[str, dict]:
    """Rows ``d=...`` of :func:`compare` with one BLAS thread."""
    from threadpoolctl import threadpool_limits

    rows = {}
    with threadpool_limits(1):
        for d in dimensions:
            rows[f"d={d}"] = compare(d, spectrum, REPEATS.get(d, 2))
            print(f"{spectrum} d={d}: {rows[f'd={d}']}", flush=True)
    return rows


def main() -> dict:
    """``curve_vs_cell_full`` (d = 1000, 2000) and ``curve_vs_cell_top`` (d = 4000,
    8000)."""
    return {
        "curve_vs_cell_full": measure("full", FULL_DIMENSIONS),
        "curve_vs_cell_top": measure("top", TOP_DIMENSIONS),
        "snrs": list(SNRS),
    }


if __name__ == "__main__":
    route = sys.argv[1] if len(sys.argv) > 1 else "full"
    sizes = tuple(int(value) for value in sys.argv[2:]) or (
        FULL_DIMENSIONS if route == "full" else TOP_DIMENSIONS
    )
    measure(route, sizes)
