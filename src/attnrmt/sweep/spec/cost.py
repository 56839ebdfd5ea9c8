"""Cost model of one cell, and bundling of cheap cells into one Dask task.

A cell costs about ``CELL_OVERHEAD_SECONDS + work * seconds_per_work`` with
``work = d^3 + (N + V) d^2 + N T d`` (+ ``N T^2 d`` for real causal attention); the
exponents are measured in docs/scaling.md. A ``spectrum: top`` cell's work is an
operation count of its Krylov passes whose constants are fitted to measured top cells
(:data:`TOP_COLUMNS_SCALE`: within -9% / +4% of the measured times at d = 250 ... 10^4).
``attnrmt plan`` prints estimates from it, and block jobs use it to put many cheap
cells into one task so that Dask's per-task cost (a few milliseconds of scheduler and
worker time) stays small against the work.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

#: Seconds per unit of :func:`cell_work` when the constant is not measured
#: (``--no-calibrate``); measured on a 2-core development VM (d = 400-800, one BLAS thread).
DEFAULT_SECONDS_PER_WORK = 2e-10
#: Relative cost of one unit of causal-attention work (exp, softmax, per-sequence T x T
#: products) against one unit of BLAS work; measured 2-20 at d = 400, T = 16 (noisy).
ATTENTION_WORK_FACTOR = 8.0
#: Fixed seconds per cell (Python and numpy overhead; dominates below d ~ 100), measured at
#: d = 20.
CELL_OVERHEAD_SECONDS = 2e-3
#: Estimated seconds of work per Dask task that block jobs aim for: cheaper cells are
#: bundled until a task reaches it (a cell that costs more is a task of its own). A task
#: costs the process hosting the scheduler and the block clients ~4 ms of CPU (submit,
#: scheduling, fetching the result; measured with 400 tasks under load), taken from the
#: workers on a small machine; at 1.0 the default config is 364 tasks instead of 832 at 0.2
#: (the estimates run ~2.7x above the measured cell times there, so a task is ~0.4 s of
#: real work: a short tail, and a killed worker loses little). docs/scaling.md, "Pipeline
#: overhead".
TASK_TARGET_SECONDS = 1.0


#: The ``spectrum: top`` branch of :func:`cell_work` (fit below): ``m = TOP_COLUMNS_SCALE
#: d^TOP_COLUMNS_EXPONENT`` effective Krylov columns, each two passes over the table
#: (``2 (V d + N T)`` work), plus :data:`TOP_FIXED_WORK` per cell.
#:
#: Fitted (:func:`fit_top_constants`, log least squares, ``seconds_per_work =
#: 1.4723e-10``: the calibration of the host the timings come from, stored with them in
#: the fixture; ``results/finite-size/.calibration.json`` of that run) to measured
#: one-BLAS-thread top cells at delta = gamma = 0.5, T = 8 (``tests/sweep/data/
#: top_cell_seconds.csv``): the finite-size study's 894 cells (``configs/finite-size.yaml``,
#: d = 250 ... 4000, three settings; stored ``compute_seconds`` are wall times under load
#: 5-7 on 2 cores, so the fit takes each d's minimum over its ~180 cells, the least-slowed
#: cell: 0.039 / 0.090 / 0.26 / 1.07 / 4.76 s, which matches the benchmark's CPU seconds
#: 1.07 at d = 2000 and 4.6-5.6 at 4000) and the benchmark's CPU seconds at d = 8000
#: (21.46) and 10^4 (34.05, median of 34.1 and 34.0; ``benchmarks/results.md``,
#: ``bench_cell_top_and_kernels``). Estimate / measured: 1.03 / 0.91 / 1.04 / 1.03 / 1.01
#: / 0.98 / 1.00 at d = 250 / 500 / 1000 / 2000 / 4000 / 8000 / 10^4 (residuals within
#: -9% and +4%); the benchmark's d = 2000 / 4000 (1.07 / 5.57 CPU s, not in the fit):
#: 1.03 / 0.86. The exponent is fitted, not assumed: rounds grow slower than ``d^(1/3)``
#: (measured 33 / 42 / 49 rounds at d = 2000 / 4000 / 8000, and a round gets relatively
#: cheaper as it turns compute-bound at d = 8000; ``attnrmt.model._linalg``), and the
#: measured times grow as ``d^2.1`` above d = 2000 (``d^(7/3)`` with the exponent fixed at
#: 1/3 misses by up to 1.6x at d = 10^4 and 3x at d = 250). The fixed work is the per-cell
#: part (warm start set-up, the Lanczos bookkeeping of ~40 rounds in Python) that
#: dominates below d ~ 500. docs/scaling.md, "Top cells".
TOP_COLUMNS_SCALE = 144.0
#: See :data:`TOP_COLUMNS_SCALE`.
TOP_COLUMNS_EXPONENT = 0.15
#: See :data:`TOP_COLUMNS_SCALE`; about 25 ms on the fit's host.
TOP_FIXED_WORK = 1.7e8


def cell_work(
    d: int,
    delta: float,
    gamma: float,
    T: int,
    weights: Mapping[str, Any] | str,
    spectrum: str = "full",
) -> float:
    """Work units of one cell: ``d^3 + (N + V) d^2 + N T d`` (+ ``N T^2 d`` for attention).

    ``d^3``: the eigendecompositions of ``S`` and ``Sigma_E``; ``(N + V) d^2``: forming
    ``S`` and the table's Gram matrix; ``N T d``: pooling; ``causal_attention`` adds its
    ``T x T`` score matrices per sequence (weighted by :data:`ATTENTION_WORK_FACTOR`).
    ``N = round(d / gamma)``, ``V = 2 round(d / (2 delta))`` (docs/model.md, "Sizes and
    ratios"). A rough operation count, not a flop count. A ``spectrum="top"`` cell forms no
    d x d matrix: its work is ``TOP_FIXED_WORK + 2 m (V d + N T) + N T d`` for
    ``m = TOP_COLUMNS_SCALE d^TOP_COLUMNS_EXPONENT`` effective Krylov columns (two passes
    over the table per column, docs/model.md, "Top-k cells"),
    i.e. O(d^2.15) at fixed ratios instead of O(d^3); fitted to measured top cells
    (:data:`TOP_COLUMNS_SCALE`, docs/scaling.md, "Top cells"). O(1) to evaluate.
    """
    n_samples = round(d / gamma)
    vocabulary = 2 * round(d / (2 * delta))
    if spectrum == "top":
        work = float(top_work(d, n_samples, vocabulary, T))
    else:
        work = d**3 + (n_samples + vocabulary) * d**2 + n_samples * T * d
    kind = weights if isinstance(weights, str) else weights.get("kind")
    if kind == "causal_attention":
        work += ATTENTION_WORK_FACTOR * n_samples * T * T * d
    return float(work)


def top_work(
    d: Any,
    n_samples: Any,
    vocabulary: Any,
    T: Any,
    scale: float | None = None,
    exponent: float | None = None,
    fixed_work: float | None = None,
) -> Any:
    """Work units of a ``spectrum: top`` cell (scalars or arrays, elementwise):
    ``fixed_work + 2 m (V d + N T) + N T d`` with ``m = scale d^exponent`` effective Krylov
    columns; the module's fitted constants (:data:`TOP_COLUMNS_SCALE`) unless given.
    O(1) per element. docs/scaling.md, "Top cells"."""
    scale = TOP_COLUMNS_SCALE if scale is None else scale
    exponent = TOP_COLUMNS_EXPONENT if exponent is None else exponent
    fixed_work = TOP_FIXED_WORK if fixed_work is None else fixed_work
    columns = scale * np.power(d, exponent)
    return fixed_work + 2 * columns * (vocabulary * d + n_samples * T) + n_samples * T * d


def fit_top_constants(
    d: np.ndarray,
    delta: np.ndarray,
    gamma: np.ndarray,
    T: np.ndarray,
    seconds: np.ndarray,
    seconds_per_work: float,
) -> tuple[float, float, float]:
    """``(scale, exponent, fixed_work)`` of :func:`top_work` that fit measured one-thread
    top-cell ``seconds`` (one per point) best in log: least squares of
    ``log((CELL_OVERHEAD_SECONDS + seconds_per_work top_work) / seconds)``. How
    :data:`TOP_COLUMNS_SCALE`, :data:`TOP_COLUMNS_EXPONENT` and :data:`TOP_FIXED_WORK` were
    obtained (docs/scaling.md, "Top cells"). O(points) per iteration, a few dozen
    iterations.
    """
    from scipy.optimize import least_squares

    d = np.asarray(d, dtype=float)
    n_samples = np.round(d / np.asarray(gamma, dtype=float))
    vocabulary = 2 * np.round(d / (2 * np.asarray(delta, dtype=float)))
    T = np.asarray(T, dtype=float)
    log_seconds = np.log(np.asarray(seconds, dtype=float))

    def log_residuals(parameters: np.ndarray) -> np.ndarray:
        log_scale, exponent, log_fixed = parameters
        work = top_work(d, n_samples, vocabulary, T, np.exp(log_scale), exponent, np.exp(log_fixed))
        return np.log(CELL_OVERHEAD_SECONDS + seconds_per_work * work) - log_seconds

    start = np.array([np.log(100.0), 1.0 / 3.0, np.log(1e8)])  # not the fitted constants
    log_scale, exponent, log_fixed = least_squares(log_residuals, start).x
    return float(np.exp(log_scale)), float(exponent), float(np.exp(log_fixed))


def planned_cell_work(cell: Any) -> float:
    """:func:`cell_work` of a planned :class:`attnrmt.sweep.spec.plan.Cell` (its spectrum
    included); a cell of a shared-noise curve of ``n`` snr values gets its share of the
    curve, ``CURVE_FIXED_FACTOR + CURVE_PER_SNR_FACTOR (n - 1)`` cells over ``n``
    (:func:`estimated_curve_seconds`). O(1)."""
    work = cell_work(cell.d, cell.delta, cell.gamma, cell.T, cell.weights_spec, cell.spectrum)
    n_snr = int(getattr(cell, "curve_length", 1))
    if getattr(cell, "noise", "independent") != "shared" or n_snr < 1:
        return work
    weights = cell.weights_spec
    if (weights.get("kind") if isinstance(weights, Mapping) else weights) == "causal_attention":
        return work
    return work * (CURVE_FIXED_FACTOR + CURVE_PER_SNR_FACTOR * (n_snr - 1)) / n_snr


def estimated_cell_seconds(
    kwargs: Mapping[str, Any], seconds_per_work: float = DEFAULT_SECONDS_PER_WORK
) -> float:
    """Estimated single-core seconds of ``simulate_cell(**kwargs)``."""
    work = cell_work(
        kwargs["d"],
        kwargs["delta"],
        kwargs["gamma"],
        kwargs["T"],
        kwargs["weights"],
        kwargs.get("spectrum", "full"),
    )
    return CELL_OVERHEAD_SECONDS + work * seconds_per_work


#: A shared-noise curve of ``n`` snr values costs about ``CURVE_FIXED_FACTOR +
#: CURVE_PER_SNR_FACTOR (n - 1)`` of one cell of the same setting
#: (:func:`attnrmt.model.simulate_cell` of an snr list; ``bench_curve`` in benchmarks/results.md: a
#: one-point curve 1.24-1.34 cells at d = 1000-8000, each extra snr 0.0002-0.016 of a
#: cell, the larger values taken).
CURVE_FIXED_FACTOR = 1.35
CURVE_PER_SNR_FACTOR = 0.016


def estimated_curve_seconds(
    kwargs: Mapping[str, Any], n_snr: int, seconds_per_work: float = DEFAULT_SECONDS_PER_WORK
) -> float:
    """Estimated single-core seconds of one ``simulate_curve`` of ``n_snr`` values with the
    cell parameters ``kwargs`` (``snr`` ignored): :data:`CURVE_FIXED_FACTOR` plus
    :data:`CURVE_PER_SNR_FACTOR` per extra value times one cell's
    :func:`estimated_cell_seconds`, or ``n_snr`` cells for ``causal_attention`` weights
    (whose curve is one cell per snr). O(1)."""
    cell = estimated_cell_seconds(kwargs, seconds_per_work)
    weights = kwargs["weights"]
    kind = weights.get("kind") if isinstance(weights, Mapping) else weights
    if kind == "causal_attention":
        return cell * n_snr
    return cell * (CURVE_FIXED_FACTOR + CURVE_PER_SNR_FACTOR * max(n_snr - 1, 0))


def bundle_by_cost(costs: Sequence[float], target: float = TASK_TARGET_SECONDS) -> list[list[int]]:
    """Split positions ``0..len(costs)-1`` into consecutive bundles of about ``target`` cost.

    A bundle closes as soon as its summed cost reaches ``target``; every position is in
    exactly one bundle, in order.
    """
    bundles: list[list[int]] = []
    current: list[int] = []
    total = 0.0
    for position, cost in enumerate(costs):
        current.append(position)
        total += cost
        if total >= target:
            bundles.append(current)
            current, total = [], 0.0
    if current:
        bundles.append(current)
    return bundles


def cells_per_block(cell_seconds: float, target_seconds: float, line_length: int) -> int:
    """Cells of one line per block so that a block holds about ``target_seconds`` of work.

    ``round(target_seconds / cell_seconds)`` clamped to ``1 .. line_length``: a line of
    cheap cells is one block (a job of less work than the target), an expensive cell is a
    block of its own. Uses only the fixed constants of this module (never a calibration),
    so block keys are identical between calls. O(1).
    """
    if line_length < 1:
        return 1
    wanted = round(target_seconds / max(cell_seconds, 1e-12))
    return int(min(max(wanted, 1), line_length))


__all__ = [
    "ATTENTION_WORK_FACTOR",
    "CELL_OVERHEAD_SECONDS",
    "CURVE_FIXED_FACTOR",
    "CURVE_PER_SNR_FACTOR",
    "DEFAULT_SECONDS_PER_WORK",
    "TASK_TARGET_SECONDS",
    "TOP_COLUMNS_EXPONENT",
    "TOP_COLUMNS_SCALE",
    "TOP_FIXED_WORK",
    "bundle_by_cost",
    "cell_work",
    "cells_per_block",
    "estimated_cell_seconds",
    "estimated_curve_seconds",
    "fit_top_constants",
    "planned_cell_work",
    "top_work",
]
