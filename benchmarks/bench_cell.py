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

Where the full cell's gap to the floor is (issue 9 part 2; d = 500, one BLAS thread, CPU
ms, medians of 15, under load ~14): floor 23.5 (two ``dsyrk`` 4.1 each, ``eigvalsh`` 11.9
of which ``dsytrd`` ~7); the cell adds the table draw 6.1, pooling 3.5, the top
eigenvectors of S 1.5 (``stebz``/``stein``/``dormqr`` after the shared reduction), the
population Lanczos 4.7 and ~1 of Python. Even with no overhead at all that is ~1.7x the
floor at d = 500; every extra is bit-pinned (the full route's results may not change), and
a vectorised gather-and-add pooling (bit-identical) measured 16.3 ms against 6.9 ms for the
sparse product at d = 500 (75 against 25 at d = 1000), so it was not adopted.

Second round (issue 9 part 2, d = 500 unless stated, one BLAS thread, CPU ms, load 4-8 from
other jobs, so every figure is inflated against the first round's; paired medians):

- Profile: table 10.4, pooling 11.2 in the cell (4.2-4.8 alone: the rest is the page
  faults of its fresh 4 MB output), the two ``dsyrk`` 18, ``dsytrd`` 10.8, ``stebz``/
  ``stein`` 2.1 (0.9 of it the Lanczos stop checks), ``dormqr`` 0.9, population Lanczos
  7.9 (64 steps, 8 checks; its ``dsymv`` 2.0 of 4.5 quiet), the rest 3.5. d = 2000: total
  1751, ``dsyrk`` 511, ``dsytrd`` 681, table 150, pooling 163, Lanczos 110, ``dormqr`` 18.
- Page faults (``ru_minflt``, steady state, cell alternating with the floor): 1490 a
  cell (the pooled output 1004, one d x d ``dsyrk`` output 488) against 945 (scipy floor)
  and 490 (numpy floor); ~2.4 us each on this VM, so ~3.6 ms of the cell. Raising glibc's
  ``MALLOC_MMAP_THRESHOLD_``/``MALLOC_TRIM_THRESHOLD_`` takes both to 0 (freed memory is
  kept); that is a setting of the worker process, not of the cell, and was not adopted.
- Tried, not adopted (all bit-identical unless stated): Lanczos without its Python
  overhead (running max, no recomputed norm, ``out=`` squares): 4.64 -> 4.34 and 4.40 ->
  4.54 ms (noise); row-blocked pooling into one ``np.empty`` output (128-256 rows):
  faults 3414 -> 2657 but cell time x0.997 (d = 500, 40 pairs) and x1.061 (d = 1000, 16
  pairs); column-blocked pooling at d = 500 (16-128 columns): 5.4-8.5 ms against 4.8
  (it is used above 32 MiB, 110 against 165 ms at d = 2000); the population matrix built
  into S's freed buffer: no fewer faults (glibc reuses that block already); S accumulated
  over row blocks of the pooled rows (``dsyrk`` with ``beta = 1``, no N x d array): not
  bit-identical with OpenBLAS's own blocking of the inner dimension; ``dgemv`` on a
  symmetrised P instead of ``dsymv``: 69 against 32 us at d = 500 (1435 against 779 at
  2000); LAPACK's two-stage reduction (``dsyev_2stage``, eigenvalues only, via ctypes):
  27.0 against 18.3 ms for ``dsytrd`` + ``dsterf`` at d = 500, 120 against 120 at 1000,
  572 against 786 at 2000, and it gives no eigenvectors; block products ``dsymm`` of 8
  columns: the same cost per column as ``dsymv`` at d = 500 (compute-bound in cache),
  14.9 against 21.1 ms at 1000 and 52 against 83 at 2000 for the Lanczos' ~100 columns,
  but a block iteration needs more columns and changes the results.
- Adopted: the smaller dimension when V < d (``delta > 1``) for the population part
  (:func:`attnrmt.model.cell._population_top_from_tokens`) and, when V < N too and it
  counts fewer flops, for S (:func:`attnrmt.model.cell._sample_spectrum_from_tokens`),
  measured by ``population_smaller_dimension`` (both parts). Neither touches
  delta = gamma = 0.5.
- So at d = 500 the gap is the table draw (the fixed random stream, drawn in
  ``model/table.py``), the scalar CSR pooling kernel (~1.9 GFLOP/s; no bit-identical numpy
  or scipy formulation measured faster) and page faults; the population Lanczos (~4.7 ms
  quiet) could only get cheaper by stopping earlier, which moves its overlaps by more
  than the 1e-10 the full route may change. Re-measured single-thread ratios (7 pairs,
  floors ~2x their quiet values under load): 1.97 / 1.62 / 1.39 / 1.33 at d = 500 / 1000
  / 1500 / 2000 (CPU 2.09 / 1.54 / 1.36 / 1.28; load ~5.5) and 2.27 / 1.80 / 1.36 / 1.32
  (CPU 2.17 / 1.61 / 1.45 / 1.30; load ~5.8, ``results.md``): d = 500 (and under this load
  d = 1000) stays above 1.5. Quiet re-run on the merged code (load < 1, ``results.md``):
  1.95 / 1.53 / 1.40 / 1.38; with 15 pairs (load 0.1-0.7): 2.13 / 1.54 / 1.36 / 1.35.
- The smaller dimension at delta = 2, gamma = 0.5 (``population_smaller_dimension``, CPU
  ms, median of 5 pairs, load ~5.8): population 43.9 -> 23.5 (d = 1000) and 162 -> 94
  (d = 2000); sample part 200 -> 70 and 1135 -> 299 (x2.85, x3.77).
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
    """Every run: ``cell_vs_floor`` (default threads and single thread), ``linalg_kernels``,
    ``krylov_methods``, ``top_warm_start``, ``top_block_widths``,
    ``population_smaller_dimension``,
    ``cell_top_vs_full``, ``cell_top_seconds_d1e4``, ``cell_top_peak_rss_mb_d1e4``."""
    default = measure(repeats, dimensions, "default BLAS threads")
    single = _single_thread(repeats, dimensions)
    kernels = linalg_kernels()
    krylov = krylov_methods()
    warm = top_warm_start()
    widths = top_block_widths()
    population = population_routes()
    top = top_vs_full()
    large = top_large_d()
    return {
        "cell_vs_floor": default,
        "cell_vs_floor_single_thread": single,
        "linalg_kernels": kernels,
        "krylov_methods": krylov,
        "top_warm_start": warm,
        "top_block_widths": widths,
        "population_smaller_dimension": population,
        "cell_top_vs_full": top,
        "cell_top_seconds_d1e4": large["wall_s"],
        "cell_top_cpu_seconds_d1e4": large["cpu_s"],
        "cell_top_peak_rss_mb_d1e4": large["peak_rss_mb"],
        "setting": {**CELL, "centered": True, "top_k": 3, "pause_s": PAUSE_S},
        "load_average_1min_after": round(os.getloadavg()[0], 2),
    }


# ------------------------------------------------- the full route in the smaller dimension

GRAM_DELTA = 2.0
GRAM_DIMENSIONS = (1000, 2000)


def _smaller_dimension_cases(d: int, delta: float) -> dict[str, tuple[Callable, Callable]]:
    """(d route, smaller-dimension route) of each part of a full cell with ``V < d``
    (``CELL`` with ``delta``): the population eigenpairs and the sample spectrum."""
    from attnrmt.model import _linalg, cell, table
    from attnrmt.model.positional import sample_signs

    V, N = realised_sizes(d, delta, CELL["gamma"])
    table_stream, sign_stream, token_stream, start_stream = (
        np.random.default_rng(child) for child in np.random.SeedSequence(d).spawn(4)
    )
    cell_table = table.sample_table(d, V, CELL["snr"], table_stream)
    signs, _ = sample_signs(CELL["positional"], CELL["T"], N, sign_stream)
    tokens = table.sample_tokens(signs, V, token_stream)
    weights = np.full(CELL["T"], 1 / CELL["T"])
    kappa = float(weights @ weights)
    terms = cell.population_rank_one_terms(
        cell_table.table_mean, cell_table.class_mean_difference, 0.3, kappa, 1.0, True
    )
    start = cell._spike_start(d, cell_table, start_stream, 1)[:, 0]

    def population_d() -> object:
        population = _linalg.lower_gram(cell_table.embeddings, kappa / V)
        for coefficient, vector in terms:
            _linalg.add_rank_one(population, coefficient, vector)
        return _linalg.top_eigenpairs(population, 3, start)

    def sample_d() -> object:
        pooled = cell.pool(tokens, weights, cell_table.embeddings)
        lower = _linalg.lower_gram(pooled, 1 / N)
        _linalg.add_rank_one(lower, -1.0, pooled.mean(axis=0))
        return _linalg.spectrum_and_top_eigenvectors(lower, 3)

    return {
        "population": (
            population_d,
            lambda: cell._population_top_from_tokens(cell_table, terms, kappa, 3, start),
        ),
        "sample": (
            sample_d,
            lambda: cell._sample_spectrum_from_tokens(
                cell.token_incidence(tokens, weights, V), cell_table.embeddings, True, 3
            ),
        ),
    }


def population_routes(
    dimensions: tuple[int, ...] = GRAM_DIMENSIONS, delta: float = GRAM_DELTA, repeats: int = 5
) -> dict:
    """``population_smaller_dimension`` (name kept; both parts): each part of a full cell
    with V < d (``delta = GRAM_DELTA``, gamma = 0.5, centred, so V < d < N) by the d route
    it replaced (population: form P + Lanczos; sample: pool, form S, one reduction) and by
    the smaller-dimension route (:func:`attnrmt.model.cell._population_top_from_tokens`,
    :func:`attnrmt.model.cell._sample_spectrum_from_tokens`), same inputs, one BLAS thread
    (threadpoolctl), CPU ms, median of ``repeats`` alternated pairs; ``speedup`` = median
    of the paired ratios d route / smaller route."""
    from threadpoolctl import threadpool_limits

    rows = {}
    with threadpool_limits(1):
        for d in dimensions:
            V, N = realised_sizes(d, delta, CELL["gamma"])
            for part, (old, new) in _smaller_dimension_cases(d, delta).items():
                old(), new()
                pairs = np.asarray([(_cpu_seconds(old), _cpu_seconds(new)) for _ in range(repeats)])
                name = f"{part} d={d}"
                rows[name] = {
                    "V": V,
                    "N": N,
                    "d_route_ms": round(1e3 * float(np.median(pairs[:, 0])), 1),
                    "smaller_route_ms": round(1e3 * float(np.median(pairs[:, 1])), 1),
                    "speedup": round(float(np.median(pairs[:, 0] / pairs[:, 1])), 2),
                    "repeats": repeats,
                }
                print(f"smaller dimension delta={delta} {name}: {rows[name]}", flush=True)
    return rows


# ----------------------------------------------------------------- the top (matrix-free) route

TOP_CELL = {**CELL, "T": 8, "positional": {"kind": "iid"}}
TOP_DIMENSIONS = (2000, 4000, 8000)
TOP_TARGET_D = 10_000


def _cpu_seconds(work: Callable[[], object]) -> float:
    """Process CPU seconds of ``work()`` (waiting for a core on a loaded machine is not
    counted, so this is the figure least disturbed by other jobs)."""
    time.sleep(PAUSE_S)
    start = time.process_time()
    work()
    return time.process_time() - start


TOP_REPEATS = {2000: 3, 4000: 3, 8000: 1}


def top_vs_full(
    dimensions: tuple[int, ...] = TOP_DIMENSIONS, repeats: dict[int, int] | None = None
) -> dict:
    """``cell_top_vs_full``: CPU seconds of ``spectrum="top"`` against ``"full"`` on the
    same cell (same seed), one BLAS thread (threadpoolctl), median over ``repeats[d]``
    paired runs (default ``TOP_REPEATS``: 3 up to d = 4000, 1 at d = 8000, where one full
    cell takes minutes); ``speedup`` = median of the paired full / top ratios (target >= 5
    at d = 8000)."""
    from threadpoolctl import threadpool_limits

    repeats = repeats or TOP_REPEATS
    rows = {}
    with threadpool_limits(1):
        for d in dimensions:
            tops, fulls = [], []
            for seed in range(repeats.get(d, 1)):
                top = lambda d=d, seed=seed: simulate_cell(d, seed=seed, spectrum="top", **TOP_CELL)  # noqa: E731
                full = lambda d=d, seed=seed: simulate_cell(d, seed=seed, **TOP_CELL)  # noqa: E731
                tops.append(_cpu_seconds(top))
                fulls.append(_cpu_seconds(full))
            row = {
                "top_cpu_s": round(float(np.median(tops)), 2),
                "full_cpu_s": round(float(np.median(fulls)), 2),
                "speedup": round(float(np.median(np.asarray(fulls) / np.asarray(tops))), 2),
                "repeats": len(tops),
            }
            rows[f"d={d}"] = row
            print(f"top vs full d={d}: {row}", flush=True)
    return rows


TOP_WIDTHS = ((16, 16), (8, 8), (4, 4), (12, 20), (8, 24), (16, 32))


def _counted_top_cell(d: int, counts: dict[str, int]) -> float:
    """CPU seconds of one top cell (seed 0, ``TOP_CELL``) with ``counts`` filled: rounds
    (shared passes over the table ``E``) and basis columns of S and of the population
    matrix, separately for the float32 warm start (``warm_``) and the exact iteration."""
    from attnrmt.model import cell

    operators = cell.table_operators

    def counting_operators(*args, **kwargs):
        apply_all = operators(*args, **kwargs)
        rough = len(args) > 5 or kwargs.get("pass_table") is not None
        prefix = "warm_" if rough else ""

        def apply(blocks):
            counts[prefix + "rounds"] = counts.get(prefix + "rounds", 0) + 1
            for name, block in zip(("S_columns", "P_columns"), blocks, strict=True):
                key = prefix + name
                counts[key] = counts.get(key, 0) + (0 if block is None else block.shape[1])
            return apply_all(blocks)

        return apply

    cell.table_operators = counting_operators
    try:
        return _cpu_seconds(lambda: simulate_cell(d, seed=0, spectrum="top", **TOP_CELL))
    finally:
        cell.table_operators = operators


def top_block_widths(d: int = 4000, widths: tuple[tuple[int, int], ...] = TOP_WIDTHS) -> dict:
    """``top_block_widths``: one top cell (seed 0) per pair of block widths (S, population
    matrix), one BLAS thread: CPU seconds, rounds (shared passes over the table ``E``) and
    basis columns of each operator (warm start and exact iteration). A round costs two
    passes over ``E`` whatever the widths up to ~32 columns in all (memory-bound), so the
    choice trades rounds against columns (``cell.TOP_BLOCK_WIDTH``,
    ``cell.POP_BLOCK_WIDTH``)."""
    from threadpoolctl import threadpool_limits

    from attnrmt.model import cell

    rows = {}
    saved = cell.TOP_BLOCK_WIDTH, cell.POP_BLOCK_WIDTH
    try:
        with threadpool_limits(1):
            for sample_width, population_width in widths:
                cell.TOP_BLOCK_WIDTH, cell.POP_BLOCK_WIDTH = sample_width, population_width
                counts: dict[str, int] = {}
                seconds = _counted_top_cell(d, counts)
                name = f"S{sample_width}_P{population_width}"
                rows[name] = {"cpu_s": round(seconds, 2), **counts}
                print(f"widths d={d} {name}: {rows[name]}", flush=True)
    finally:
        cell.TOP_BLOCK_WIDTH, cell.POP_BLOCK_WIDTH = saved
    return rows


def top_warm_start(dimensions: tuple[int, ...] = (2000, 4000), repeats: int = 3) -> dict:
    """``top_warm_start``: the top cell with its float32 warm start
    (``cell.TOP_WARM_START_DTYPE``) against without (the exact iteration from the spike
    start), one BLAS thread, same seed, alternated ``repeats`` times: median CPU seconds,
    the median of the paired ratios cold / warm, and the rounds and columns of one run."""
    from threadpoolctl import threadpool_limits

    from attnrmt.model import cell

    saved = cell.TOP_WARM_START_DTYPE
    rows = {}
    try:
        with threadpool_limits(1):
            for d in dimensions:
                seconds: dict[str, list[float]] = {"warm": [], "cold": []}
                counts: dict[str, dict[str, int]] = {"warm": {}, "cold": {}}
                for _ in range(repeats):
                    for name, dtype in (("warm", np.float32), ("cold", None)):
                        cell.TOP_WARM_START_DTYPE = dtype
                        counts[name].clear()
                        seconds[name].append(_counted_top_cell(d, counts[name]))
                ratios = np.asarray(seconds["cold"]) / np.asarray(seconds["warm"])
                rows[f"d={d}"] = {
                    "warm_cpu_s": round(float(np.median(seconds["warm"])), 2),
                    "cold_cpu_s": round(float(np.median(seconds["cold"])), 2),
                    "speedup": round(float(np.median(ratios)), 2),
                    "repeats": repeats,
                    **{
                        f"{name}_run_{key}": value
                        for name in ("warm", "cold")
                        for key, value in counts[name].items()
                    },
                }
                print(f"warm start d={d}: {rows[f'd={d}']}", flush=True)
    finally:
        cell.TOP_WARM_START_DTYPE = saved
    return rows


def top_large_d(d: int = TOP_TARGET_D) -> dict:
    """``cell_top_seconds_d1e4`` and ``cell_top_peak_rss_mb_d1e4``: one top cell at ``d`` in a
    fresh subprocess with one BLAS thread; wall and CPU seconds, and the child's peak RSS
    (``ru_maxrss``, the high-water mark of the whole process, interpreter included)."""
    code = (
        "import json, resource, time; from attnrmt.model import simulate_cell; "
        f"kw = {TOP_CELL!r}; t = time.perf_counter(); c = time.process_time(); "
        f"simulate_cell({d}, seed=0, spectrum='top', **kw); "
        "print(json.dumps({'wall_s': time.perf_counter() - t, "
        "'cpu_s': time.process_time() - c, "
        "'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))"
    )
    output = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **SINGLE_THREAD_ENV},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    measured = json.loads(output.splitlines()[-1])
    return {key: round(value, 1) for key, value in measured.items()}


def krylov_methods(d: int = 2000) -> dict:
    """``krylov_methods``: the top route's solver against the library routes on the same
    operator (the sample matrix S of a top cell, its 6 largest eigenpairs, one BLAS
    thread, CPU seconds and products with S): ``scipy.sparse.linalg.eigsh`` (ARPACK,
    one vector per product) at ``tol=1e-12``, ``lobpcg`` (block of 8, no preconditioner,
    ``tol`` 1e-10 of the scale of S), and our block Lanczos at widths 1, 8, 16
    (stop rule of :func:`attnrmt.model._linalg.block_lanczos_top`)."""
    import scipy.sparse.linalg
    from threadpoolctl import threadpool_limits

    from attnrmt.model import _linalg, cell, table

    V, N = realised_sizes(d, TOP_CELL["delta"], TOP_CELL["gamma"])
    rng = np.random.default_rng(0)
    embeddings = table.sample_table(d, V, TOP_CELL["snr"], rng).embeddings
    tokens = rng.integers(0, V, size=(N, TOP_CELL["T"]))
    incidence = cell.token_incidence(tokens, np.full(TOP_CELL["T"], 1 / TOP_CELL["T"]), V)
    operator = cell.table_operators(incidence, embeddings, True, (), 1.0)
    rows = {}
    with threadpool_limits(1):
        for width in (1, 8, 16):
            calls: list[int] = []

            def apply(block: np.ndarray, calls: list[int] = calls) -> np.ndarray:
                calls.append(block.shape[1])
                return operator([block, None])[0]

            start = np.random.default_rng(1).standard_normal((d, width))
            seconds = _cpu_seconds(
                lambda: _linalg.block_lanczos_top(
                    apply,
                    start,  # noqa: B023 (called at once)
                    6,
                    3,
                    rng=np.random.default_rng(2),
                )
            )
            rows[f"block_lanczos_width_{width}"] = {
                "cpu_s": round(seconds, 2),
                "products": int(sum(calls)),
            }
        calls = []
        linear = scipy.sparse.linalg.LinearOperator(
            (d, d),
            matvec=lambda v: (calls.append(1), operator([v.reshape(d, 1), None])[0])[1],
            dtype=np.float64,
        )
        seconds = _cpu_seconds(
            lambda: scipy.sparse.linalg.eigsh(linear, k=6, which="LA", tol=1e-12)
        )
        rows["eigsh_arpack"] = {"cpu_s": round(seconds, 2), "products": len(calls)}
        counted: list[int] = []

        def block_product(block: np.ndarray) -> np.ndarray:
            block = np.asfortranarray(np.asarray(block).reshape(d, -1))
            counted.append(block.shape[1])
            return operator([block, None])[0]

        linear = scipy.sparse.linalg.LinearOperator(
            (d, d), matvec=block_product, matmat=block_product, dtype=np.float64
        )
        start = np.random.default_rng(1).standard_normal((d, 8))
        seconds = _cpu_seconds(
            lambda: scipy.sparse.linalg.lobpcg(
                linear, start, largest=True, tol=1e-10 * TOP_CELL["snr"], maxiter=1000
            )
        )
        rows["lobpcg_block_8"] = {"cpu_s": round(seconds, 2), "products": int(sum(counted))}
    for name, row in rows.items():
        print(f"krylov d={d} {name}: {row}", flush=True)
    return rows


def _kernel_routes(lower: np.ndarray, start: np.ndarray) -> dict[str, Callable[[], object]]:
    """The routes :func:`linalg_kernels` times on one matrix (lower triangle ``lower``)."""
    import scipy.sparse.linalg

    from attnrmt.model import _linalg

    d = lower.shape[0]
    dense = np.tril(lower) + np.tril(lower, -1).T
    top3 = [d - 3, d - 1]
    return {
        "ours_spectrum_and_top3": lambda: _linalg.spectrum_and_top_eigenvectors(
            np.asfortranarray(lower.copy()), 3
        ),
        "scipy_evr_values_then_subset_vectors": lambda: (
            scipy.linalg.eigh(dense, eigvals_only=True, driver="evr"),
            scipy.linalg.eigh(dense, subset_by_index=top3, driver="evr"),
        ),
        "scipy_evd_everything": lambda: scipy.linalg.eigh(dense, driver="evd"),
        "ours_lanczos_top3": lambda: _linalg.lanczos_top_eigenpairs(lower, 3, start),
        "scipy_evr_subset_top3": lambda: scipy.linalg.eigh(
            dense, subset_by_index=top3, driver="evr"
        ),
        "scipy_eigsh_top3": lambda: scipy.sparse.linalg.eigsh(
            dense, k=3, which="LA", tol=1e-12, v0=start
        ),
    }


def linalg_kernels(dimensions: tuple[int, ...] = (1000, 2000), repeats: int = 3) -> dict:
    """``linalg_kernels``: each hand-written kernel of ``model/_linalg.py`` against the
    library route on the same matrices (one BLAS thread, CPU seconds, median of
    ``repeats``), with the full cell's shapes (S of a top cell's table, d x d):

    - all eigenvalues + top-3 vectors: :func:`spectrum_and_top_eigenvectors` (one
      reduction) against ``scipy.linalg.eigh(driver="evr")`` for the values plus
      ``eigh(subset_by_index=..., driver="evr")`` for the vectors (two reductions), and
      against one ``eigh(driver="evd")`` of everything;
    - top-3 pairs of the formed population matrix: :func:`lanczos_top_eigenpairs` against
      ``eigh(subset_by_index=..., driver="evr")`` and ``scipy.sparse.linalg.eigsh``.
    """
    from threadpoolctl import threadpool_limits

    from attnrmt.model import _linalg

    rows = {}
    rng = np.random.default_rng(0)
    with threadpool_limits(1):
        for d in dimensions:
            rows_matrix = rng.standard_normal((2 * d, d))
            rows_matrix[:, 0] += 1.5  # one outlier above the bulk
            lower = _linalg.lower_gram(rows_matrix, 1.0 / (2 * d))
            start = rng.standard_normal(d)
            routes = _kernel_routes(lower, start)
            row = {
                name: round(float(np.median([_cpu_seconds(route) for _ in range(repeats)])), 3)
                for name, route in routes.items()
            }
            rows[f"d={d}"] = row
            print(f"linalg kernels d={d}: {row}", flush=True)
    return rows


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--kernels":
        print(json.dumps({"linalg_kernels": linalg_kernels()}))
    elif len(sys.argv) > 1 and sys.argv[1] == "--top":  # only the top-route benchmarks
        print(
            json.dumps(
                {
                    "krylov_methods": krylov_methods(),
                    "top_warm_start": top_warm_start(),
                    "top_block_widths": top_block_widths(),
                    "cell_top_vs_full": top_vs_full(),
                    "large_d": top_large_d(),
                }
            )
        )
    elif len(sys.argv) > 1 and sys.argv[1] == "--full":  # only the full-route benchmarks
        print(
            json.dumps(
                {
                    "cell_vs_floor_single_thread": _single_thread(7, DIMENSIONS),
                    "population_smaller_dimension": population_routes(),
                }
            )
        )
    elif len(sys.argv) > 2 and sys.argv[1] == "--json":
        repeats_arg = int(sys.argv[2])
        dims = tuple(int(value) for value in sys.argv[3:]) or DIMENSIONS
        print(json.dumps(measure(repeats_arg, dims, "single BLAS thread")))
    else:
        main()
