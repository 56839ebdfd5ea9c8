"""Cost model of one cell: ``CELL_OVERHEAD_SECONDS + work * seconds_per_work`` (constants
and fits in docs/scaling.md, "One cell", "Top cells"); ``attnrmt plan`` prints it, blocks
and tasks are sized by it. O(1) per cell."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

#: Seconds per unit of :func:`cell_work` without a calibration (``--no-calibrate``).
DEFAULT_SECONDS_PER_WORK = 2e-10
#: Cost of one unit of causal-attention work against one unit of BLAS work.
ATTENTION_WORK_FACTOR = 8.0
#: Fixed seconds per cell (Python and numpy overhead; dominates below d ~ 100).
CELL_OVERHEAD_SECONDS = 2e-3


#: Constants of :func:`top_work`: ``m = TOP_COLUMNS_SCALE d^TOP_COLUMNS_EXPONENT`` Krylov
#: columns and :data:`TOP_FIXED_WORK` per cell, fitted by :func:`fit_top_constants`
#: (docs/scaling.md, "Top cells").
TOP_COLUMNS_SCALE = 144.0
TOP_COLUMNS_EXPONENT = 0.15
TOP_FIXED_WORK = 1.7e8


#: A weights model: a name or a spec.
Weights = Mapping[str, Any] | str


def _is_attention(weights: Weights) -> bool:
    return (weights if isinstance(weights, str) else weights.get("kind")) == "causal_attention"


def cell_work(
    d: int, delta: float, gamma: float, T: int, weights: Weights, spectrum: str = "full"
) -> float:
    """Work units of one cell: ``d^3 + (N + V) d^2 + N T d`` (+ :data:`ATTENTION_WORK_FACTOR`
    ``N T^2 d`` for ``causal_attention``), or :func:`top_work`. An operation count. O(1)."""
    n_samples = round(d / gamma)
    vocabulary = 2 * round(d / (2 * delta))
    if spectrum == "top":
        work = float(top_work(d, n_samples, vocabulary, T))
    else:
        work = d**3 + (n_samples + vocabulary) * d**2 + n_samples * T * d
    if _is_attention(weights):
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
    """Work units of a ``spectrum: top`` cell (elementwise): ``fixed_work + 2 m (V d + N
    T) + N T d``, ``m = scale d^exponent`` (the module's constants, read at the call, unless
    given). docs/scaling.md, "Top cells". O(1) per element."""
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
    """``(scale, exponent, fixed_work)`` of :func:`top_work` fitting measured one-thread
    top-cell ``seconds`` in log (least squares); how the module's constants were obtained
    (docs/scaling.md, "Top cells"). O(points) per iteration."""
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
    """:func:`cell_work` of a planned cell; a shared-noise curve's cell gets its share of the
    curve (:func:`curve_cells`). O(1)."""
    work = cell_work(cell.d, cell.delta, cell.gamma, cell.T, cell.weights_spec, cell.spectrum)
    n_snr = int(getattr(cell, "curve_length", 1))
    if getattr(cell, "noise", "independent") != "shared" or n_snr < 1:
        return work
    return work * curve_cells(cell.weights_spec, n_snr) / n_snr


def estimated_cell_seconds(
    kwargs: Mapping[str, Any], seconds_per_work: float = DEFAULT_SECONDS_PER_WORK
) -> float:
    """Estimated single-core seconds of ``simulate_cell(**kwargs)``."""
    k, spectrum = kwargs, kwargs.get("spectrum", "full")
    work = cell_work(k["d"], k["delta"], k["gamma"], k["T"], k["weights"], spectrum)
    return CELL_OVERHEAD_SECONDS + work * seconds_per_work


#: A shared-noise curve of ``n`` snr values costs ``CURVE_FIXED_FACTOR +
#: CURVE_PER_SNR_FACTOR (n - 1)`` cells of its setting (``bench_curve``, docs/scaling.md).
CURVE_FIXED_FACTOR = 1.35
CURVE_PER_SNR_FACTOR = 0.016


def curve_cells(weights: Weights, n_snr: int) -> float:
    """Cells' worth of one shared-noise curve of ``n_snr`` values: :data:`CURVE_FIXED_FACTOR`
    and :data:`CURVE_PER_SNR_FACTOR`, or ``n_snr`` for ``causal_attention``. O(1)."""
    if _is_attention(weights):
        return float(n_snr)
    return CURVE_FIXED_FACTOR + CURVE_PER_SNR_FACTOR * max(n_snr - 1, 0)


def estimated_curve_seconds(
    kwargs: Mapping[str, Any], n_snr: int, seconds_per_work: float = DEFAULT_SECONDS_PER_WORK
) -> float:
    """Estimated single-core seconds of one curve (``simulate_cell`` of ``n_snr`` values;
    ``snr`` of ``kwargs`` ignored): :func:`curve_cells` cells."""
    return estimated_cell_seconds(kwargs, seconds_per_work) * curve_cells(kwargs["weights"], n_snr)


def cells_per_block(cell_seconds: float, target_seconds: float, line_length: int) -> int:
    """``round(target_seconds / cell_seconds)`` in ``1 .. line_length``, from fixed constants
    only (block keys never change between calls). O(1)."""
    if line_length < 1:
        return 1
    wanted = round(target_seconds / max(cell_seconds, 1e-12))
    return int(min(max(wanted, 1), line_length))
