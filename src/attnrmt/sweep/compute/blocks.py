"""Run one block: reuse finished cells, compute the rest on the run's Dask cluster, write
the fragment atomically (docs/architecture.md, "The walk"; docs/data-contract.md).

Cells finished in any fragment of the run, its salvage, or the shared cell cache are
copied bit for bit; the missing ones are submitted as tasks of about
:data:`TASK_TARGET_SECONDS`, each a few groups of one seed source (a cell, or the missing
snr values of one ``noise: shared`` replicate curve). Task keys are content keys, so
concurrent jobs share them; each task's cells are salvaged as it finishes, so a stopped
block loses only the cells in flight. A result no cell can produce is rejected
(:func:`implausible_values`, cause ``numerical``)."""

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

from attnrmt.sweep.compute import provenance as run_provenance
from attnrmt.sweep.compute.cluster.slurm import slurm_job_end_time, slurm_walltime_reached
from attnrmt.sweep.compute.failures import (
    FailureBudget,
    MaxFailuresReached,
    classify_failure,
    memory_restarted_workers,
)
from attnrmt.sweep.store import cell_cache as shared_cache
from attnrmt.sweep.store import fragments
from attnrmt.sweep.store.failures import (
    clear_block_failures,
    failure_record_path,
    record_block_failures,
)
from attnrmt.sweep.store.layout import SweepLayout

#: Estimated seconds of work per Dask task: cheaper groups are bundled until a task
#: reaches it (docs/scaling.md, "Pipeline overhead").
TASK_TARGET_SECONDS = 1.0


@dataclass(frozen=True)
class BlockCell:
    """One cell of a block as the plan made it (:meth:`.CellGrid.block_params`)."""

    key: str
    seed: tuple[int, ...]
    kwargs: dict[str, Any]
    curve: bool
    token: str
    seconds: float

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> BlockCell:
        """From one entry of the plan's block params. O(1)."""
        return cls(
            key=str(params["key"]),
            seed=tuple(int(word) for word in params["seed"]),
            kwargs=dict(params["kwargs"]),
            curve=bool(params.get("curve", False)),
            token=str(params["id"]),
            seconds=float(params["seconds"]),
        )

    @property
    def cell_id(self) -> tuple[str, str]:
        """``(key, seed token)``: what a finished result must match to be reused."""
        return self.key, self.token

    @functools.cached_property
    def task_key(self) -> str:
        """Dask key of the cell's task (sha256 of key and seed token). O(1)."""
        digest = hashlib.sha256(f"{self.key}|{self.token}".encode()).hexdigest()
        return "attnrmt-cell-" + digest[:32]


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


def compute_cell(kwargs: Mapping[str, Any], seed: Sequence[int]) -> dict[str, Any]:
    """Simulate one cell: its ``CellResult.to_dict()`` and the worker's provenance, a pure
    function of the arguments; raises :class:`ImplausibleCellValues` for a result no cell
    can produce (:func:`compute_group` of one cell). Cost: one cell."""
    ((record, error),) = compute_group([kwargs], seed)
    if error is not None:
        raise error
    assert record is not None
    return record


def _record(result: Any) -> dict[str, Any]:
    """``result.to_dict()`` with its arrays copied. O(d)."""
    return {
        name: (np.array(value) if isinstance(value, np.ndarray) else value)
        for name, value in result.to_dict().items()
    }


def _checked(
    record: dict[str, Any], kwargs: Mapping[str, Any], provenance: Mapping[str, Any]
) -> dict[str, Any]:
    """``record`` with the worker's provenance, or :class:`ImplausibleCellValues`. O(d)."""
    problem = implausible_values(record, kwargs)
    if problem is not None:
        raise ImplausibleCellValues(f"cell result rejected: {problem}")
    return {**record, **provenance}


class ImplausibleCellValues(ArithmeticError):
    """A result no cell can produce (:func:`implausible_values`); an ``ArithmeticError``, so
    its cause is ``numerical``."""


#: Relative slack of :func:`implausible_values`' bounds, far above rounding (the
#: eigenvalues of a d x d symmetric matrix are exact to ~d * 1e-16 of the largest).
VALUE_TOLERANCE = 1e-6
#: ``x`` of the chi-square tail bound in :func:`eigenvalue_bound`: a table row exceeds it
#: with probability below ``exp(-x)`` (Laurent and Massart 2000, Lemma 1).
NORM_TAIL = 1000.0


def eigenvalue_bound(snr: float, d: int, weights_l1: float) -> float:
    """An upper bound on every eigenvalue of ``S`` and of the population matrix of a cell
    (docs/model.md, "The generative model", "Population covariance given the table"): every
    pooled row has norm at most ``||w||_1 max ||e_v||``, ``||e_v|| <= sqrt(snr) + ||z_v||``
    and ``||z_v||^2 <= d + 2 sqrt(d x) + 2 x`` but with probability ``exp(-x)`` (Laurent and
    Massart 2000; ``x`` = :data:`NORM_TAIL`), so ``bound = 4 ||w||_1^2 (sqrt(snr) + sqrt(d +
    2 sqrt(d x) + 2 x))^2``. O(1)."""
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
    """The first value of a cell's result no cell can produce, described, or None: non-finite
    values, eigenvalues outside ``[-tol B, (1 + tol) B]`` (:func:`eigenvalue_bound`),
    squared overlaps or accuracy outside ``[0, 1]``, sizes below 1. O(d)."""
    for name in FINITE_FIELDS:
        values = np.asarray(record[name], dtype=np.float64)
        if not np.all(np.isfinite(values)):
            return f"{name} not finite ({_first(values, ~np.isfinite(values))})"
    weights_l1 = float(np.abs(np.asarray(record["effective_weights"])).sum())
    snr = float(kwargs["snr"])
    if kwargs["positional"].get("kind") == "classes":  # K classes: ||mu_k||^2 = snr G_kk
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


def _first(values: np.ndarray, wrong: np.ndarray) -> str:
    """``"[i] = value"`` of the first wrong entry (``"= value"`` for a scalar)."""
    if values.ndim == 0:
        return f"= {float(values):.6g}"
    index = int(np.flatnonzero(wrong)[0])
    return f"[{index}] = {values[index]:.6g}"


def unique_cells(cells: Sequence[BlockCell]) -> list[BlockCell]:
    """Cells with distinct ``cell_id``, first kept, order preserved. O(cells)."""
    seen: dict[tuple[str, str], BlockCell] = {}
    for cell in cells:
        seen.setdefault(cell.cell_id, cell)
    return list(seen.values())


#: One outcome per cell: ``(record, None)`` or ``(None, exception)``.
Outcome = tuple[dict[str, Any] | None, Exception | None]


def compute_group(
    kwargs: Sequence[Mapping[str, Any]], seed: Sequence[int], curve: bool = False
) -> list[Outcome]:
    """The cells of one seed source, one outcome per cell (pure, safe to retry): one cell,
    or with ``curve`` cells equal but for ``snr`` from one
    :func:`attnrmt.model.simulate_cell` of their ``snr`` list (one decomposition; if it
    raises, every cell fails with it). Cost: one cell, or one curve."""
    from attnrmt.model import simulate_cell

    snr = [float(cell["snr"]) for cell in kwargs] if curve else kwargs[0]["snr"]
    try:
        results = simulate_cell(**{**kwargs[0], "snr": snr}, seed=list(seed))
    except Exception as exc:  # reported per cell by compute_missing
        return [(None, exc) for _ in kwargs]
    provenance = run_provenance.worker_provenance()
    outcomes: list[Outcome] = []
    for cell_kwargs, result in zip(kwargs, results if curve else [results], strict=True):
        try:
            outcomes.append((_checked(_record(result), cell_kwargs, provenance), None))
        except ImplausibleCellValues as exc:
            outcomes.append((None, exc))
    return outcomes


@dataclass(frozen=True)
class Task:
    """One Dask task: its groups ``(kwargs, seed words, curve)`` as one argument Dask does not
    walk for futures (docs/scaling.md, "End to end with tiny cells")."""

    groups: tuple[tuple[tuple[Mapping[str, Any], ...], tuple[int, ...], bool], ...]

    @classmethod
    def of(cls, groups: Sequence[Sequence[BlockCell]]) -> Task:
        """The task of groups of block cells. O(cells)."""
        return cls(
            tuple(
                (tuple(cell.kwargs for cell in group), group[0].seed, group[0].curve)
                for group in groups
            )
        )


def compute_task(task: Task) -> tuple[dict[str, np.ndarray], list[tuple[int, Exception]]]:
    """Dask task: :func:`compute_group` of each group; the finished records as one set of
    fragment columns (keys and seeds left for the block), the failures as ``(position,
    exception)``. O(cells of the task)."""
    outcomes = [
        outcome
        for kwargs, seed, curve in task.groups
        for outcome in compute_group(kwargs, seed, curve)
    ]
    done = [record for record, error in outcomes if error is None and record is not None]
    failed = [
        (position, error) for position, (_, error) in enumerate(outcomes) if error is not None
    ]
    blank = [""] * len(done)
    return fragments.encode_fragment(blank, blank, [True] * len(done), done), failed


def bundle_key(cells: Sequence[BlockCell]) -> str:
    """Dask key of a task: content-derived from its cells' task keys. O(cells)."""
    if len(cells) == 1:
        return cells[0].task_key
    digest = hashlib.sha256("|".join(cell.task_key for cell in cells).encode())
    return f"attnrmt-cells-{digest.hexdigest()[:32]}"


def task_groups(cells: Sequence[BlockCell]) -> list[list[BlockCell]]:
    """The cells grouped by seed source in order of first appearance: a plain cell alone, a
    shared-noise curve's cells together. O(cells)."""
    groups: dict[Any, list[BlockCell]] = {}
    for cell in cells:
        groups.setdefault(cell.seed if cell.curve else cell.cell_id, []).append(cell)
    return list(groups.values())


def bundle_by_cost(costs: Sequence[float], target: float = TASK_TARGET_SECONDS) -> list[list[int]]:
    """Positions ``0..len(costs)-1`` in consecutive bundles, each closed once its cost reaches
    ``target``. O(len(costs))."""
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


@dataclass(frozen=True)
class FinishedTask:
    """The finished cells of one task: ids in order and their fragment columns (identity
    filled in), salvaged and written as they are."""

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
    """Submit cells to Dask as tasks of whole groups bundled by estimated seconds, wait for all;
    the finished tasks and the failures. ``on_task`` runs as each task completes (the
    salvage). O(cells) on the block's side."""
    groups = task_groups(cells)
    futures: dict[Any, list[BlockCell]] = {}
    costs = [sum(cell.seconds for cell in group) for group in groups]
    for positions in bundle_by_cost(costs):
        chosen = [groups[i] for i in positions]
        bundle = [cell for group in chosen for cell in group]
        task = Task.of(chosen)
        futures[client.submit(compute_task, task, key=bundle_key(bundle), retries=retries)] = bundle
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
                finished_task = FinishedTask(
                    bundle_key(bundle),
                    done,
                    fragments.with_identity(
                        columns,
                        cell_keys=[key for key, _ in done],
                        cell_seeds=[seed for _, seed in done],
                        attempt=attempt,
                    ),
                )
                finished.append(finished_task)
                if on_task is not None:
                    on_task(finished_task)
        future.release()
    return finished, failures


def _task_result(future: Any, client: Any) -> Any:
    """A task's result, or ``asyncio.CancelledError`` when the block's client closed before it
    could be had. O(1) besides the fetch."""
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


#: Seconds a waiting block sleeps between checks that its client is still open (as
#: :class:`distributed.as_completed`'s own iterator does).
CLIENT_POLL_SECONDS = 0.1


def _completed_while_open(futures: list[Any], client: Any) -> Iterator[Any]:
    """``futures`` as they complete (:class:`distributed.as_completed`), ending with the rest
    when the client closes (a stop closes it from another thread). O(1) per poll."""
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
    """Timestamped lines appended to a block's log file (dropped without one)."""

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
    """Produce one block's fragment (rule ``simulate_block``); what it did. ``cells``: the plan's
    block params; ``failure_budget``: ``execution.max_failures`` (:class:`MaxFailuresReached`);
    ``cell_cache``: the shared cell cache (None: off). ``RuntimeError`` when cells failed or
    the run was stopped (finished cells salvaged, failures recorded). O(cells) besides computing."""
    from attnrmt.sweep.compute.cluster import ClusterSettings, run_client, run_stop_reason

    started = time.perf_counter()
    log = BlockLog(log_path)
    block_cells = [BlockCell.from_params(params) for params in cells]
    fragment = Path(fragment_path)
    sweep_dir = SweepLayout.of_fragment(fragment.resolve()).root
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
            walltime = deadline.is_set() or (
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
    """Add the wanted cells the shared cell cache holds to ``sources`` and ``where``; their
    ids. O(wanted)."""
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


@contextlib.contextmanager
def closed_before(client: Any, end_time: float | None) -> Iterator[threading.Event]:
    """Close ``client`` :data:`STOP_BEFORE_WALLTIME_SECONDS` before ``end_time`` (a SLURM job's
    end) if the body still runs, so the block ends as a stopped one with cause ``walltime``;
    yields the event set when it did."""
    passed = threading.Event()

    def close() -> None:
        passed.set()
        client.close()

    timer = None
    if end_time is not None:
        timer = threading.Timer(
            max(end_time - STOP_BEFORE_WALLTIME_SECONDS - time.time(), 0), close
        )
        timer.daemon = True
        timer.start()
    try:
        yield passed
    finally:
        if timer is not None:
            timer.cancel()


def failure_entries(
    failures: Sequence[tuple[BlockCell, BaseException]],
    memory_restarted: set[str],
    walltime: bool,
) -> list[dict[str, Any]]:
    """The failure record's cells: key, seed, parameters, error and cause. O(failures)."""
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
    """Writes each finished task's cells to ``<sweep>/salvage/<block>/`` as it completes (no
    fsync; a failed write is logged and skipped). O(task's cells)."""

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
