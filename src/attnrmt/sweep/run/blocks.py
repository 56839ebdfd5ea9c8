"""Run one block: reuse finished cells, compute the rest on the run's Dask cluster, write
the fragment atomically.

A block job is a Dask client. Cells already finished in any fragment of the run
(current, orphaned by a change of block membership, salvaged from a failed block, or of
another sweep of the run with the same cell key and seed) are copied bit for bit; only
the missing cells are submitted, cheap ones bundled a few to a task
(``simulate_cell(**kwargs, seed=seed_words).to_dict()`` per cell, returned per bundle as
fragment columns; task keys are content keys, so tasks are idempotent and concurrent jobs
asking for the same cells share one task). Each task's cells reach the disk as the task
finishes (``<sweep>/salvage/<block>/<task>.npz``,
:func:`attnrmt.sweep.store.fragments.write_salvage`), so a block stopped in its middle, by
a failure, a stop signal or ``kill -9``, loses only the cells in flight. A worker rejects
a result holding values no cell can produce (:func:`implausible_values`): the cell fails
with cause ``numerical``.
Cells of a ``noise: shared`` sweep (``"curve": True``) are submitted as whole curves: the
missing snr values of one replicate go to one :func:`attnrmt.model.simulate_cell` with
their shared seed (:func:`compute_curve`), so extending the snr axis computes only the
new values and copies the stored ones bit for bit.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.sweep.run import provenance as run_provenance
from attnrmt.sweep.run.cluster.slurm import slurm_job_end_time, slurm_walltime_reached
from attnrmt.sweep.run.failures import (
    FailureBudget,
    MaxFailuresReached,
    classify_failure,
    memory_restarted_workers,
)
from attnrmt.sweep.spec import identity
from attnrmt.sweep.spec.cost import bundle_by_cost, estimated_cell_seconds
from attnrmt.sweep.store import cell_cache as shared_cache
from attnrmt.sweep.store import fragments
from attnrmt.sweep.store.failures import (
    clear_block_failures,
    failure_record_path,
    record_block_failures,
)
from attnrmt.sweep.store.layout import SweepLayout


@dataclass(frozen=True)
class BlockCell:
    """What one cell of a block depends on: its key, seed words and simulate kwargs."""

    key: str
    seed: tuple[int, ...]
    kwargs: dict[str, Any]
    curve: bool = False

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> BlockCell:
        """From a ``{"key", "seed", "kwargs"}`` mapping (:func:`block_params`; ``"curve":
        True`` marks a cell of a shared-noise curve)."""
        return cls(
            key=str(params["key"]),
            seed=tuple(int(word) for word in params["seed"]),
            kwargs=dict(params["kwargs"]),
            curve=bool(params.get("curve", False)),
        )

    @functools.cached_property
    def cell_id(self) -> tuple[str, str]:
        """``(key, seed token)``: what a finished result must match to be reused (computed
        once per cell: a block asks it several times per cell)."""
        return self.key, identity.seed_token(self.seed)

    @functools.cached_property
    def task_key(self) -> str:
        """Dask task key: content-derived, identical for identical cells in any job."""
        return identity.task_key(self.key, self.cell_id[1])


@dataclass(frozen=True)
class BlockSummary:
    """What a block job did."""

    fragment: Path
    n_cells: int
    n_computed: int
    n_reused: int
    seconds: float

    def describe(self) -> str:
        """One progress line."""
        return (
            f"block {self.fragment.stem[:12]}: {self.n_cells} cells, "
            f"{self.n_computed} computed, {self.n_reused} reused, {self.seconds:.2f} s"
        )


def block_params(cells: Sequence[Any], root_seed: int) -> list[dict[str, Any]]:
    """What a block's cells depend on (what rule ``simulate_block`` passes to
    :func:`run_block`; built in the job, never kept as Snakemake ``params``: those stay in
    memory for the whole run).

    Parameters
    ----------
    cells : sequence of Cell
        The block's plan cells, in block order.
    root_seed : int
        The run's root seed.

    Returns
    -------
    list of dict
        ``{"key", "seed", "kwargs"}`` per cell: content key, ``Cell.seed_words(root_seed)``
        and ``Cell.simulate_kwargs()`` (model specs, never names); cells of a
        ``noise: shared`` sweep add ``"curve": True``.
    """
    from_arrays = getattr(cells, "block_params", None)
    if from_arrays is not None:  # a plan's CellSequence: the same dicts, built from arrays
        return from_arrays(root_seed)
    params = [
        {"key": cell.key, "seed": cell.seed_words(root_seed), "kwargs": cell.simulate_kwargs()}
        for cell in cells
    ]
    for entry, cell in zip(params, cells, strict=True):
        if getattr(cell, "noise", "independent") == "shared":
            entry["curve"] = True
    return params


def compute_cell(kwargs: Mapping[str, Any], seed: Sequence[int]) -> dict[str, Any]:
    """Dask task: simulate one cell; its ``CellResult.to_dict()`` plus the worker's provenance.

    The numbers are a pure function of the arguments (idempotent; safe to retry); the
    provenance keys (:func:`attnrmt.sweep.run.provenance.worker_provenance`: environment,
    peak memory) describe the worker process that ran it.
    """
    from attnrmt.model import simulate_cell

    result = simulate_cell(**kwargs, seed=list(seed))  # K-class cells too (their positional)
    record = {
        name: (np.array(value) if isinstance(value, np.ndarray) else value)
        for name, value in result.to_dict().items()
    }
    problem = implausible_values(record, kwargs)
    if problem is not None:
        raise ImplausibleCellValues(f"cell result rejected: {problem}")
    return {**record, **run_provenance.worker_provenance()}


class ImplausibleCellValues(ArithmeticError):
    """A cell's result holds values no cell can produce (:func:`implausible_values`); an
    ``ArithmeticError``, so its cause is ``numerical``
    (:func:`attnrmt.sweep.run.failures.classify_failure`)."""


#: Relative slack of :func:`implausible_values`' bounds, far above rounding (the
#: eigenvalues of a d x d symmetric matrix are exact to ~d * 1e-16 of the largest).
VALUE_TOLERANCE = 1e-6
#: ``x`` of the chi-square tail bound in :func:`eigenvalue_bound`: a table row exceeds it
#: with probability below ``exp(-x)`` (Laurent and Massart 2000, Lemma 1).
NORM_TAIL = 1000.0


def eigenvalue_bound(snr: float, d: int, weights_l1: float) -> float:
    """An upper bound on every eigenvalue of ``S`` and of the population matrix of a cell.

    Every pooled row is ``x = sum_t w_t e_{v_t}`` (docs/model.md, "The generative model";
    for ``causal_attention`` per-sequence weights ``>= 0`` of sum 1), so
    ``||x|| <= ||w||_1 max_v ||e_v||`` and ``lambda(S) <= max ||x||^2`` (centring only
    lowers it). The population matrix ("Population covariance given the table") is
    ``kappa (1/V) E E^T - kappa mbar mbar^T + (alpha - kappa) Dlt Dlt^T`` (plus
    ``sigma^2 mbar mbar^T`` uncentred) with ``alpha, kappa, sigma^2 <= ||w||_1^2`` and
    ``||mbar||, ||Dlt|| <= max ||e_v||``: at most ``4 ||w||_1^2 max ||e_v||^2``. With
    ``e_v = s_v mu + z_v``, ``||e_v|| <= sqrt(snr) + ||z_v||`` and the chi-square bound
    ``||z_v||^2 <= d + 2 sqrt(d x) + 2 x`` (``x`` = :data:`NORM_TAIL`, failing with
    probability ``exp(-1000)`` per row)::

        bound = 4 ||w||_1^2 (sqrt(snr) + sqrt(d + 2 sqrt(d x) + 2 x))^2

    O(1).
    """
    row = math.sqrt(max(snr, 0.0)) + math.sqrt(d + 2 * math.sqrt(d * NORM_TAIL) + 2 * NORM_TAIL)
    return 4.0 * weights_l1**2 * row**2


#: Squared overlaps of unit vectors: in [0, 1], NaN where the direction is zero.
OVERLAP_FIELDS = (
    "overlap_signal",
    "overlap_class_mean",
    "overlap_table_mean",
    "pop_overlap_signal",
)
EIGENVALUE_FIELDS = ("eigenvalues", "top_eigenvalues", "pop_top_eigenvalues")
FINITE_FIELDS = (
    *EIGENVALUE_FIELDS,
    "alpha",
    "kappa",
    "sigma",
    "effective_weights",
    "compute_seconds",
)


def implausible_values(record: Mapping[str, Any], kwargs: Mapping[str, Any]) -> str | None:
    """The first value of a cell's result no cell can produce, described, or None.

    Eigenvalues, pooling scalars, weights and time finite; eigenvalues within
    ``[-tol B, (1 + tol) B]`` (:func:`eigenvalue_bound` ``B`` of the cell's ``snr``,
    ``d`` and measured ``effective_weights``; ``tol`` = :data:`VALUE_TOLERANCE`);
    squared overlaps NaN or within ``[-tol, 1 + tol]``; downstream accuracy NaN or in
    ``[0, 1]``; ``V``, ``N`` at least 1, ``compute_seconds`` at least 0. O(d).
    """
    for name in FINITE_FIELDS:
        values = np.asarray(record[name], dtype=np.float64)
        if not np.all(np.isfinite(values)):
            return f"{name} not finite ({_first(values, ~np.isfinite(values))})"
    weights_l1 = float(np.abs(np.asarray(record["effective_weights"])).sum())
    snr = float(kwargs["snr"])
    if _is_classes_cell(kwargs):  # K classes: ||mu_k||^2 = snr G_kk
        snr *= max(1.0, float(np.max(np.diag(np.asarray(kwargs["positional"]["means"])))))
    bound = eigenvalue_bound(snr, int(kwargs["d"]), weights_l1)
    for name in EIGENVALUE_FIELDS:
        values = np.asarray(record[name], dtype=np.float64)
        wrong = (values > (1 + VALUE_TOLERANCE) * bound) | (values < -VALUE_TOLERANCE * bound)
        if np.any(wrong):
            return f"{name} {_first(values, wrong)} outside [0, {bound:.4g}]"
    for name in OVERLAP_FIELDS:
        values = np.asarray(record[name], dtype=np.float64)
        wrong = ~np.isnan(values) & ((values < -VALUE_TOLERANCE) | (values > 1 + VALUE_TOLERANCE))
        if np.any(wrong):
            return f"{name} {_first(values, wrong)} outside [0, 1]"
    accuracy = float(record["downstream_accuracy"])
    if not (math.isnan(accuracy) or 0.0 <= accuracy <= 1.0):
        return f"downstream_accuracy {accuracy:.6g} outside [0, 1]"
    if min(int(record["V"]), int(record["N"])) < 1 or float(record["compute_seconds"]) < 0:
        return "V, N or compute_seconds out of range"
    return None


# --------------------------------------------------------------------------- K classes


def _is_classes_cell(kwargs: Mapping[str, Any]) -> bool:
    """Whether a cell's kwargs are of a K-class sweep (its positional spec has kind
    ``classes``, :mod:`attnrmt.sweep.spec.classes`)."""
    positional = kwargs.get("positional")
    return isinstance(positional, Mapping) and positional.get("kind") == "classes"


def _first(values: np.ndarray, wrong: np.ndarray) -> str:
    """``"[i] = value"`` of the first wrong entry (``"= value"`` for a scalar)."""
    if values.ndim == 0:
        return f"= {float(values):.6g}"
    index = int(np.flatnonzero(wrong)[0])
    return f"[{index}] = {values[index]:.6g}"


def sweep_dir_of(fragment_path: str | os.PathLike[str]) -> Path:
    """``results/<run>/<sweep>`` of ``results/<run>/<sweep>/fragments/<block>.npz``."""
    return SweepLayout.of_fragment(Path(fragment_path).resolve()).root


def unique_cells(cells: Sequence[BlockCell]) -> list[BlockCell]:
    """Cells with distinct ``cell_id``, first occurrence kept, order preserved."""
    seen: dict[tuple[str, str], BlockCell] = {}
    for cell in cells:
        seen.setdefault(cell.cell_id, cell)
    return list(seen.values())


def compute_bundle(
    jobs: Sequence[tuple[Mapping[str, Any], Sequence[int]]],
) -> list[tuple[dict[str, Any] | None, Exception | None]]:
    """Dask task: :func:`compute_cell` for each ``(kwargs, seed)``, in order.

    A failing cell does not lose its siblings: each entry is ``(record, None)`` or
    ``(None, exception)``. Pure function of its arguments (idempotent; safe to retry).
    """
    outcomes: list[tuple[dict[str, Any] | None, Exception | None]] = []
    for kwargs, seed in jobs:
        try:
            outcomes.append((compute_cell(kwargs, seed), None))
        except Exception as exc:  # reported per cell by compute_missing
            outcomes.append((None, exc))
    return outcomes


@dataclass(frozen=True)
class CellJobs:
    """A bundle's ``(kwargs, seed words)`` pairs as one task argument that Dask does not
    walk: it parses every list, tuple and dict of a task's arguments looking for futures,
    which cost ~20% of the block jobs' process CPU with ~100 tiny cells per task (py-spy of
    a 10^6-cell run)."""

    pairs: tuple[tuple[Mapping[str, Any], tuple[int, ...]], ...]


def compute_bundle_encoded(
    jobs: CellJobs | Sequence[tuple[Mapping[str, Any], Sequence[int]]],
) -> tuple[dict[str, np.ndarray], list[tuple[int, Exception]]]:
    """Dask task: :func:`compute_bundle`, its finished records returned as fragment
    columns (:func:`attnrmt.sweep.store.fragments.encode_fragment`, cell keys and seeds left
    empty: the block fills them) and its failures as ``(position in jobs, exception)``.

    A few dozen arrays per bundle instead of a dict of arrays per cell: Dask ships every
    array of a result as a frame of its own, and reading ~10 frames per cell cost the block
    job's process ~0.5 ms per tiny cell (docs/scaling.md, "Tiny cells at 10^6").
    The numbers round-trip bit for bit (the fragment format's contract). O(bundle).
    """
    outcomes = compute_bundle(jobs.pairs if isinstance(jobs, CellJobs) else jobs)
    done = [record for record, error in outcomes if error is None and record is not None]
    failed = [
        (position, error) for position, (_, error) in enumerate(outcomes) if error is not None
    ]
    blank = [""] * len(done)
    return fragments.encode_fragment(blank, blank, [True] * len(done), done), failed


def bundle_key(cells: Sequence[BlockCell]) -> str:
    """Dask key of a bundle: content-derived from its cells' task keys."""
    if len(cells) == 1:
        return cells[0].task_key
    digest = hashlib.sha256("|".join(cell.task_key for cell in cells).encode())
    return f"attnrmt-cells-{digest.hexdigest()[:32]}"


@dataclass(frozen=True)
class FinishedTask:
    """The finished cells of one task: their ids in order and their fragment columns
    (:func:`attnrmt.sweep.store.fragments.with_identity`: keys, seeds and ``attempt``
    filled in), as the worker encoded them; salvaged and written as they are."""

    key: str
    cell_ids: list[tuple[str, str]]
    columns: dict[str, np.ndarray]


def compute_missing(
    cells: Sequence[BlockCell],
    client: Any,
    retries: int,
    on_task: Callable[[FinishedTask], None] | None = None,
    attempt: int | None = None,
) -> tuple[list[FinishedTask], list[tuple[BlockCell, BaseException]]]:
    """Submit cells to Dask, wait for all; return the finished tasks and the failures.

    Cheap cells travel together: consecutive cells are bundled into one task of about
    :data:`attnrmt.sweep.spec.cost.TASK_TARGET_SECONDS` estimated work
    (:func:`attnrmt.sweep.spec.cost.bundle_by_cost`), so Dask's per-task cost stays small
    against tiny cells while expensive cells remain one task each. A task returns its
    cells as fragment columns; the block fills in their ids (and ``attempt``, when given)
    and never decodes them. ``on_task(task)`` is called with each task's finished cells as
    the task completes (the block's salvage). O(cells) on the block's side.
    """

    plain = [cell for cell in cells if not cell.curve]
    costs = [estimated_cell_seconds(cell.kwargs) for cell in plain]
    bundles = [[plain[i] for i in positions] for positions in bundle_by_cost(costs)]
    futures = {
        client.submit(
            compute_bundle_encoded,
            CellJobs(tuple((cell.kwargs, cell.seed) for cell in bundle)),
            key=bundle_key(bundle),
            retries=retries,
        ): bundle
        for bundle in bundles
    }
    futures.update(_submit_curves([cell for cell in cells if cell.curve], client, retries))
    finished: list[FinishedTask] = []
    failures: list[tuple[BlockCell, BaseException]] = []
    for future in _completed_while_open(list(futures), client):
        bundle = futures[future]
        try:
            columns, failed = _task_result(future, client)
        except (Exception, asyncio.CancelledError) as exc:  # lost cluster: cancelled futures
            failures.extend((cell, exc) for cell in bundle)
        else:
            errors = dict(failed)
            failures.extend(
                (cell, errors[position])
                for position, cell in enumerate(bundle)
                if position in errors
            )
            done = [cell.cell_id for position, cell in enumerate(bundle) if position not in errors]
            if done:
                task = FinishedTask(
                    bundle_key(bundle),
                    done,
                    fragments.with_identity(
                        columns,
                        cell_keys=[key for key, _ in done],
                        cell_seeds=[seed for _, seed in done],
                        attempt=attempt,
                    ),
                )
                finished.append(task)
                if on_task is not None:
                    on_task(task)
        future.release()
    return finished, failures


def _task_result(future: Any, client: Any) -> Any:
    """The result of a task of :func:`compute_missing`, or ``asyncio.CancelledError`` when
    the block's client closed before it could be had: a future left pending (it will
    never report), or one that finished on a worker while its result was still to be
    fetched (``result()`` then raises ``RuntimeError: IOLoop is closed``). A task's own
    errors come back as they are (a task reports its cells' errors in its result, so the
    RuntimeError of a closed client is never a cell's). O(1) besides the fetch."""
    if not future.done():
        raise asyncio.CancelledError("the block's Dask client was closed")
    try:
        return future.result()
    except RuntimeError as exc:
        if client.status not in ("closing", "closed"):
            raise
        raise asyncio.CancelledError(
            "the block's Dask client was closed before the task's result was fetched"
        ) from exc


# --------------------------------------------------------------------------- shared-noise curves


def curve_groups(cells: Sequence[BlockCell]) -> list[list[BlockCell]]:
    """Cells of shared-noise curves grouped into curves: equal seed words and equal
    parameters but ``snr`` (docs/data-contract.md, "Shared-noise sweeps"), in order of
    first appearance, each curve's cells in their given order. O(cells)."""
    groups: dict[tuple[Any, ...], list[BlockCell]] = {}
    for cell in cells:
        rest = {name: value for name, value in cell.kwargs.items() if name != "snr"}
        groups.setdefault((cell.seed, identity.canonical_json(rest)), []).append(cell)
    return list(groups.values())


@dataclass(frozen=True)
class CurveJobs:
    """A task's curves, each ``(kwargs of its cells, shared seed words)`` (one argument
    that Dask does not walk, as :class:`CellJobs`)."""

    curves: tuple[tuple[tuple[Mapping[str, Any], ...], tuple[int, ...]], ...]


def compute_curve(
    kwargs: Sequence[Mapping[str, Any]], seed: Sequence[int]
) -> list[tuple[dict[str, Any] | None, Exception | None]]:
    """Dask task body: the cells ``kwargs`` (equal but for ``snr``) of one shared-noise
    curve from one :func:`attnrmt.model.simulate_cell` of their ``snr`` list with ``seed``;
    per cell ``(record, None)`` (``CellResult.to_dict()`` plus the worker's provenance, as
    :func:`compute_cell`) or ``(None, exception)`` (the curve failed, or the cell's values
    are implausible, :func:`implausible_values`). Pure function of its arguments. Cost: one
    :func:`attnrmt.model.simulate_cell` (one decomposition for every snr)."""
    from attnrmt.model import simulate_cell

    common = {name: value for name, value in kwargs[0].items() if name != "snr"}
    try:
        results = simulate_cell(
            **common, snr=[float(cell["snr"]) for cell in kwargs], seed=list(seed)
        )
    except Exception as exc:  # every cell of the curve fails with it
        return [(None, exc) for _ in kwargs]
    provenance = run_provenance.worker_provenance()
    outcomes: list[tuple[dict[str, Any] | None, Exception | None]] = []
    for cell_kwargs, result in zip(kwargs, results, strict=True):
        record = {
            name: (np.array(value) if isinstance(value, np.ndarray) else value)
            for name, value in result.to_dict().items()
        }
        problem = implausible_values(record, cell_kwargs)
        if problem is not None:
            outcomes.append((None, ImplausibleCellValues(f"cell result rejected: {problem}")))
        else:
            outcomes.append(({**record, **provenance}, None))
    return outcomes


def compute_curves_encoded(
    jobs: CurveJobs,
) -> tuple[dict[str, np.ndarray], list[tuple[int, Exception]]]:
    """Dask task: :func:`compute_curve` for each curve of ``jobs``, returned as
    :func:`compute_bundle_encoded` returns a bundle (positions count the cells of all the
    curves in order). O(curves)."""
    outcomes = [outcome for kwargs, seed in jobs.curves for outcome in compute_curve(kwargs, seed)]
    done = [record for record, error in outcomes if error is None and record is not None]
    failed = [
        (position, error) for position, (_, error) in enumerate(outcomes) if error is not None
    ]
    blank = [""] * len(done)
    return fragments.encode_fragment(blank, blank, [True] * len(done), done), failed


def _submit_curves(
    cells: Sequence[BlockCell], client: Any, retries: int
) -> dict[Any, list[BlockCell]]:
    """Submit shared-noise cells as whole curves (:func:`curve_groups`), cheap curves
    bundled to about :data:`attnrmt.sweep.spec.cost.TASK_TARGET_SECONDS` a task (a curve is
    never split between tasks); ``{future: the task's cells in order}``. O(cells)."""
    from attnrmt.sweep.spec.cost import estimated_curve_seconds

    curves = curve_groups(cells)
    costs = [estimated_curve_seconds(curve[0].kwargs, len(curve)) for curve in curves]
    futures: dict[Any, list[BlockCell]] = {}
    for positions in bundle_by_cost(costs):
        chosen = [curves[i] for i in positions]
        bundle = [cell for curve in chosen for cell in curve]
        jobs = CurveJobs(
            tuple((tuple(cell.kwargs for cell in curve), curve[0].seed) for curve in chosen)
        )
        future = client.submit(
            compute_curves_encoded, jobs, key=bundle_key(bundle), retries=retries
        )
        futures[future] = bundle
    return futures


#: Seconds a waiting block sleeps between checks that its client is still open (as
#: :class:`distributed.as_completed`'s own iterator does).
CLIENT_POLL_SECONDS = 0.1


def _completed_while_open(futures: list[Any], client: Any) -> Iterator[Any]:
    """``futures`` as they complete, like iterating :class:`distributed.as_completed`, but
    also ending when the client is closed: a stop closes block clients from another thread,
    and futures submitted just as their client closes never report. The futures left then
    are yielded too (``result()`` raises; the block salvages what finished). O(1) per poll.
    """
    from distributed import as_completed

    pending = as_completed(futures, loop=client.loop)
    while pending.has_ready() or not pending.is_empty():
        if pending.has_ready():
            yield from pending.next_batch(block=False)
        elif client.status in ("closing", "closed"):
            yield from list(pending.futures)
            return
        else:
            with pending.thread_condition:
                pending.thread_condition.wait(timeout=CLIENT_POLL_SECONDS)


class BlockLog:
    """Timestamped lines appended to a block's log file (or dropped when there is none)."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = None if path is None else Path(path)
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("")

    def info(self, message: str) -> None:
        """Append one line."""
        if self.path is not None:
            with open(self.path, "a") as handle:
                handle.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}\n")


def run_block(
    cells: Sequence[Mapping[str, Any]],
    fragment_path: str | os.PathLike[str],
    run_dir: str | os.PathLike[str],
    dask_config: Mapping[str, Any] | None = None,
    log_path: str | os.PathLike[str] | None = None,
    max_cores: int | None = None,
    failure_budget: FailureBudget | None = None,
    mem_mb: int | None = None,
    cell_cache: str | os.PathLike[str] | None = None,
) -> BlockSummary:
    """Produce one block's fragment (the body of rule ``simulate_block``).

    Parameters
    ----------
    cells : sequence of mapping
        The block's cells in canonical order, each ``{"key", "seed", "kwargs"}``:
        content key, seed words (``Cell.seed_words(root_seed)``) and
        ``Cell.simulate_kwargs()``.
    fragment_path : path
        ``results/<run>/<sweep>/fragments/<block>.npz`` (written atomically).
    run_dir : path
        ``results/<run>`` (holds the run's Dask scheduler file).
    dask_config : mapping, optional
        The config's ``dask:`` block (:class:`attnrmt.sweep.run.cluster.ClusterSettings`).
    log_path : path, optional
        Per-block log file.
    max_cores : int, optional
        Cores granted to the run (Snakemake's ``--cores``): caps a ``local`` cluster.
    failure_budget : FailureBudget, optional
        ``execution.max_failures`` of the run: once reached (by other blocks: a retry
        of this one still runs), the block computes nothing and raises
        :class:`MaxFailuresReached` (checked before computing, O(failure records)).
    mem_mb : int, optional
        Memory granted to the block job (Snakemake's ``mem_mb``), kept in its failure
        record.
    cell_cache : path, optional
        The shared cell cache (:mod:`attnrmt.sweep.store.cell_cache`): cells the run's
        fragments lack are read from it before any is computed, and the block's cells it
        lacks are written to it. None: off.

    Returns
    -------
    BlockSummary

    Raises
    ------
    RuntimeError
        If some cells failed after Dask's retries, or the run was stopped; the finished
        cells are kept, task by task as they finished, in ``<sweep>/salvage/<block>/``
        for the rerun, and the failures (cell, parameters, error, cause) recorded in
        ``<sweep>/failures/<block>.json``.
    MaxFailuresReached
        If the run already reached ``failure_budget`` (nothing computed).
    """
    from attnrmt.sweep.run.cluster import ClusterSettings, run_client, run_stop_reason

    started = time.perf_counter()
    log = BlockLog(log_path)
    block_cells = [BlockCell.from_params(params) for params in cells]
    fragment = Path(fragment_path)
    sweep_dir = sweep_dir_of(fragment)
    wanted = unique_cells(block_cells)
    wanted_ids = [cell.cell_id for cell in wanted]
    located = fragments.locate_cells(wanted_ids, sweep_dir, exclude=[fragment], run_wide=True)
    sources, where = fragments.load_cell_columns(wanted_ids, located)
    from_cache = _read_cell_cache(cell_cache, wanted_ids, sources, where)
    missing = [cell for cell in wanted if cell.cell_id not in where]
    log.info(
        f"{fragment.name}: {len(block_cells)} cells, {len(where)} reusable "
        f"({len(from_cache)} from the cell cache), {len(missing)} to compute"
    )
    computed: set[tuple[str, str]] = set()
    if missing:
        failure_record = failure_record_path(fragment)
        stop_message = failure_budget.exceeded(run_dir, failure_record) if failure_budget else None
        if stop_message is not None:  # the run's one message comes from its onerror
            refused = f"{fragment.name} not computed: execution.max_failures reached"
            log.info(refused)
            raise MaxFailuresReached(refused)
        attempt = run_provenance.block_attempt(failure_record)
        job_end_time = slurm_job_end_time()  # while SLURM still lists the job
        settings = ClusterSettings.from_config(dask_config, max_cores=max_cores)
        salvage = TaskSalvage(sweep_dir, fragment.stem, log)
        with run_client(run_dir, settings) as client:
            log.info(f"Dask scheduler {client.scheduler.address}")
            log.info(f"Dask dashboard {client.dashboard_link}")
            with closed_before(client, job_end_time) as deadline:  # record before SIGKILL
                tasks, failures = compute_missing(
                    missing, client, settings.task_retries, salvage.write, attempt
                )
            memory_restarted = memory_restarted_workers(client) if failures else set()
        for task in tasks:
            where.update(
                (cell_id, (len(sources), row)) for row, cell_id in enumerate(task.cell_ids)
            )
            sources.append(task.columns)
            computed.update(task.cell_ids)
        if failures:
            kept = salvage.describe(len(computed))
            stop_reason = run_stop_reason(run_dir)
            walltime = deadline.passed or (
                stop_reason is not None and slurm_walltime_reached(job_end_time)
            )
            if stop_reason is not None and not walltime:  # interrupted: nothing to record
                log.info(f"stopped: {stop_reason}; {kept}")
                raise RuntimeError(f"{fragment.name}: run stopped ({stop_reason}); {kept}")
            for cell, exc in failures:
                log.info(f"cell {cell.key} failed: {exc!r}")
            record_block_failures(
                fragment,
                failure_entries(failures, memory_restarted, walltime),
                attempt=attempt,
                mem_mb=mem_mb,
            )
            raise RuntimeError(
                f"{len(failures)} of {len(missing)} cells of {fragment.name} failed "
                f"(first: {failures[0][1]!r}); {kept}"
            )
    arrays = fragments.with_identity(  # columns copied as stored: no cell decoded
        fragments.take_cells(sources, [where[cell.cell_id] for cell in block_cells]),
        computed=[cell.cell_id in computed for cell in block_cells],
    )
    fragments.publish_fragment(fragment, arrays)  # cache entry first, then the output
    if cell_cache is not None:  # every cell of the block the shared cache lacks
        shared_cache.write_cells(
            Path(cell_cache), sources, where, [i for i in wanted_ids if i not in from_cache]
        )
    fragments.clear_salvage(sweep_dir, fragment.stem)  # its cells are in both copies now
    clear_block_failures(fragment)
    summary = BlockSummary(
        fragment=fragment,
        n_cells=len(block_cells),
        n_computed=len(computed),
        n_reused=len(block_cells) - len(computed),
        seconds=time.perf_counter() - started,
    )
    log.info(summary.describe())
    print(f"attnrmt: {sweep_dir.name} {summary.describe()}", flush=True)
    return summary


def _read_cell_cache(
    cell_cache: str | os.PathLike[str] | None,
    wanted_ids: Sequence[tuple[str, str]],
    sources: list[dict[str, np.ndarray]],
    where: dict[tuple[str, str], tuple[int, int]],
) -> set[tuple[str, str]]:
    """Add the wanted cells ``where`` lacks and the shared cell cache holds to ``sources``
    and ``where`` (:func:`attnrmt.sweep.store.cell_cache.read_cells`); return their ids.
    O(wanted) lookups."""
    if cell_cache is None:
        return set()
    cached, found = shared_cache.read_cells(
        Path(cell_cache), [cell_id for cell_id in wanted_ids if cell_id not in where]
    )
    offset = len(sources)
    sources.extend(cached)
    where.update((cell_id, (source + offset, row)) for cell_id, (source, row) in found.items())
    return set(found)


#: Seconds before its SLURM job's end time at which a block stops waiting for its cells
#: (:func:`closed_before`): enough to salvage the finished ones and record the others as
#: ``walltime`` before SLURM's SIGTERM and, ``KillWait`` seconds later, SIGKILL.
STOP_BEFORE_WALLTIME_SECONDS = 60.0


class Deadline:
    """Whether :func:`closed_before` closed the client (``passed``)."""

    def __init__(self) -> None:
        self.passed = False

    def close(self, client: Any) -> None:
        """Mark the deadline passed, then close ``client`` (timer thread)."""
        self.passed = True
        client.close()


@contextlib.contextmanager
def closed_before(client: Any, end_time: float | None) -> Iterator[Deadline]:
    """Close ``client`` at ``end_time - STOP_BEFORE_WALLTIME_SECONDS`` if the body still
    runs then (a daemon timer; none when ``end_time`` is ``None``: not in a SLURM job).
    The block then ends as when its run is stopped: finished cells salvaged, the lost
    ones failed with cause ``walltime`` (:func:`attnrmt.sweep.run.failures.classify_failure`).
    """
    deadline = Deadline()
    if end_time is None:
        yield deadline
        return
    delay = max(end_time - STOP_BEFORE_WALLTIME_SECONDS - time.time(), 0.0)
    timer = threading.Timer(delay, deadline.close, args=(client,))
    timer.daemon = True
    timer.start()
    try:
        yield deadline
    finally:
        timer.cancel()


def failure_entries(
    failures: Sequence[tuple[BlockCell, BaseException]],
    memory_restarted: set[str],
    walltime: bool,
) -> list[dict[str, Any]]:
    """The failure record's cells: key, seed, parameters, error and cause
    (:func:`attnrmt.sweep.run.failures.classify_failure`). O(failures)."""
    return [
        {
            "key": cell.key,
            "seed": cell.cell_id[1],
            "params": dict(cell.kwargs),
            "error": repr(exc),
            "cause": classify_failure(exc, memory_restarted, walltime),
        }
        for cell, exc in failures
    ]


class TaskSalvage:
    """Writes each finished task's cells of one block to ``<sweep>/salvage/<block>/``
    (:func:`attnrmt.sweep.store.fragments.write_salvage`) as the task completes.

    Cost per task: its columns written as one small npz (no fsync) and renamed, ~1 ms
    against the ~:data:`attnrmt.sweep.spec.cost.TASK_TARGET_SECONDS` of work a task holds.
    A write that fails (a full disk) is logged and skipped: the block's fragment write
    then fails for real.
    """

    def __init__(self, sweep_dir: Path, block: str, log: BlockLog) -> None:
        self.directory = fragments.salvage_dir(sweep_dir, block)
        self.sweep_dir, self.block, self.log = sweep_dir, block, log
        self.cells = 0

    def write(self, task: FinishedTask) -> None:
        """Salvage one task's finished cells (its columns, as the block got them)."""
        try:
            fragments.write_salvage(self.sweep_dir, self.block, task.key, task.columns)
        except OSError as exc:
            self.log.info(f"salvage of task {task.key} not written: {exc}")
            return
        self.cells += len(task.cell_ids)

    def describe(self, n_finished: int) -> str:
        """Where the block's finished cells are, for its error message."""
        if n_finished == 0:
            return "no cell had finished"
        return f"{self.cells} of its {n_finished} finished cells kept in {self.directory}"


__all__ = [
    "EIGENVALUE_FIELDS",
    "FINITE_FIELDS",
    "OVERLAP_FIELDS",
    "STOP_BEFORE_WALLTIME_SECONDS",
    "VALUE_TOLERANCE",
    "BlockCell",
    "BlockLog",
    "BlockSummary",
    "CellJobs",
    "CurveJobs",
    "Deadline",
    "FinishedTask",
    "ImplausibleCellValues",
    "TaskSalvage",
    "block_params",
    "bundle_key",
    "closed_before",
    "compute_bundle",
    "compute_bundle_encoded",
    "compute_cell",
    "compute_curve",
    "compute_curves_encoded",
    "compute_missing",
    "curve_groups",
    "eigenvalue_bound",
    "failure_entries",
    "implausible_values",
    "run_block",
    "sweep_dir_of",
    "unique_cells",
]
