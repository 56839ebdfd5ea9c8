"""Run one block: reuse finished cells, compute the rest on the run's Dask cluster, write
the fragment atomically.

A block job is a Dask client. Cells already finished in any fragment of the run
(current, orphaned by a change of block membership, salvaged from a failed block, or of
another sweep of the run with the same cell key and seed) are copied bit for bit; only
the missing cells are submitted, cheap ones bundled a few to a task
(``simulate_cell(**kwargs, seed=seed_words).to_dict()`` per cell, returned per bundle as
fragment columns; task keys are content keys, so tasks are idempotent and concurrent jobs
asking for the same cells share one task).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.sweep import fragments, provenance
from attnrmt.sweep.cost import bundle_by_cost, estimated_cell_seconds
from attnrmt.sweep.failures import (
    FailureBudget,
    MaxFailuresReached,
    classify_failure,
    clear_block_failures,
    failure_record_path,
    memory_restarted_workers,
    record_block_failures,
    slurm_job_end_time,
    slurm_walltime_reached,
)


@dataclass(frozen=True)
class BlockCell:
    """What one cell of a block depends on: its key, seed words and simulate kwargs."""

    key: str
    seed: tuple[int, ...]
    kwargs: dict[str, Any]

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> BlockCell:
        """From a ``{"key", "seed", "kwargs"}`` mapping (:func:`block_params`)."""
        return cls(
            key=str(params["key"]),
            seed=tuple(int(word) for word in params["seed"]),
            kwargs=dict(params["kwargs"]),
        )

    @functools.cached_property
    def cell_id(self) -> tuple[str, str]:
        """``(key, seed token)``: what a finished result must match to be reused (computed
        once per cell: a block asks it several times per cell)."""
        return self.key, fragments.seed_token(self.seed)

    @functools.cached_property
    def task_key(self) -> str:
        """Dask task key: content-derived, identical for identical cells in any job."""
        digest = hashlib.sha256(f"{self.key}|{self.cell_id[1]}".encode())
        return f"attnrmt-cell-{digest.hexdigest()[:32]}"


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
        and ``Cell.simulate_kwargs()`` (model specs, never names).
    """
    from_arrays = getattr(cells, "block_params", None)
    if from_arrays is not None:  # a plan's CellSequence: the same dicts, built from arrays
        return from_arrays(root_seed)
    return [
        {"key": cell.key, "seed": cell.seed_words(root_seed), "kwargs": cell.simulate_kwargs()}
        for cell in cells
    ]


def compute_cell(kwargs: Mapping[str, Any], seed: Sequence[int]) -> dict[str, Any]:
    """Dask task: simulate one cell; its ``CellResult.to_dict()`` plus the worker's provenance.

    The numbers are a pure function of the arguments (idempotent; safe to retry); the
    provenance keys (:func:`attnrmt.sweep.provenance.worker_provenance`: environment,
    peak memory) describe the worker process that ran it.
    """
    from attnrmt.model import simulate_cell

    result = simulate_cell(**kwargs, seed=list(seed))
    return {
        **{
            name: (np.array(value) if isinstance(value, np.ndarray) else value)
            for name, value in result.to_dict().items()
        },
        **provenance.worker_provenance(),
    }


def sweep_dir_of(fragment_path: str | os.PathLike[str]) -> Path:
    """``results/<run>/<sweep>`` of ``results/<run>/<sweep>/fragments/<block>.npz``."""
    return Path(fragment_path).resolve().parent.parent


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
    columns (:func:`attnrmt.sweep.fragments.encode_fragment`, cell keys and seeds left
    empty: the block fills them) and its failures as ``(position in jobs, exception)``.

    A few dozen arrays per bundle instead of a dict of arrays per cell: Dask ships every
    array of a result as a frame of its own, and reading ~10 frames per cell cost the block
    job's process ~0.5 ms per tiny cell (docs/scaling.md, "Tiny cells at 10^6").
    The numbers round-trip bit for bit (the fragment format's contract). O(bundle).
    """
    outcomes = compute_bundle(jobs.pairs if isinstance(jobs, CellJobs) else jobs)
    done = [record for record, error in outcomes if error is None]
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


def compute_missing(
    cells: Sequence[BlockCell], client: Any, retries: int
) -> tuple[dict[tuple[str, str], dict[str, Any]], list[tuple[BlockCell, BaseException]]]:
    """Submit cells to Dask, wait for all; return finished records and failures.

    Cheap cells travel together: consecutive cells are bundled into one task of about
    :data:`attnrmt.sweep.cost.TASK_TARGET_SECONDS` estimated work
    (:func:`attnrmt.sweep.cost.bundle_by_cost`), so Dask's per-task cost stays small
    against tiny cells while expensive cells remain one task each.
    """

    costs = [estimated_cell_seconds(cell.kwargs) for cell in cells]
    bundles = [[cells[i] for i in positions] for positions in bundle_by_cost(costs)]
    futures = {
        client.submit(
            compute_bundle_encoded,
            CellJobs(tuple((cell.kwargs, cell.seed) for cell in bundle)),
            key=bundle_key(bundle),
            retries=retries,
        ): bundle
        for bundle in bundles
    }
    finished: dict[tuple[str, str], dict[str, Any]] = {}
    failures: list[tuple[BlockCell, BaseException]] = []
    for future in _completed_while_open(list(futures), client):
        bundle = futures[future]
        try:
            if not future.done():  # left when the client closed: it will never report
                raise asyncio.CancelledError("the block's Dask client was closed")
            columns, failed = future.result()
        except (Exception, asyncio.CancelledError) as exc:  # lost cluster: cancelled futures
            failures.extend((cell, exc) for cell in bundle)
        else:
            errors = dict(failed)
            records = iter(fragments.decode_fragment(columns).records)
            for position, cell in enumerate(bundle):
                if position in errors:
                    failures.append((cell, errors[position]))
                else:
                    finished[cell.cell_id] = next(records)
        future.release()
    return finished, failures


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
        The config's ``dask:`` block (:class:`attnrmt.sweep.cluster.ClusterSettings`).
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

    Returns
    -------
    BlockSummary

    Raises
    ------
    RuntimeError
        If some cells failed after Dask's retries; their finished siblings are kept in
        ``<sweep>/salvage/<block>.npz`` for the rerun, and the failures (cell, parameters,
        error, cause) recorded in ``<sweep>/failures/<block>.json``.
    MaxFailuresReached
        If the run already reached ``failure_budget`` (nothing computed).
    """
    from attnrmt.sweep.cluster import ClusterSettings, run_client, run_stop_reason

    started = time.perf_counter()
    log = BlockLog(log_path)
    block_cells = [BlockCell.from_params(params) for params in cells]
    fragment = Path(fragment_path)
    sweep_dir = sweep_dir_of(fragment)
    wanted = unique_cells(block_cells)
    wanted_ids = [cell.cell_id for cell in wanted]
    located = fragments.locate_cells(wanted_ids, sweep_dir, exclude=[fragment], run_wide=True)
    reused = fragments.load_cell_records(wanted_ids, located)
    missing = [cell for cell in wanted if cell.cell_id not in reused]
    log.info(
        f"{fragment.name}: {len(block_cells)} cells, {len(reused)} reusable, "
        f"{len(missing)} to compute"
    )
    computed: dict[tuple[str, str], dict[str, Any]] = {}
    if missing:
        failure_record = failure_record_path(fragment)
        stop_message = failure_budget.exceeded(run_dir, failure_record) if failure_budget else None
        if stop_message is not None:  # the run's one message comes from its onerror
            refused = f"{fragment.name} not computed: execution.max_failures reached"
            log.info(refused)
            raise MaxFailuresReached(refused)
        attempt = provenance.block_attempt(failure_record)
        job_end_time = slurm_job_end_time()  # while SLURM still lists the job
        settings = ClusterSettings.from_config(dask_config, max_cores=max_cores)
        with run_client(run_dir, settings) as client:
            log.info(f"Dask scheduler {client.scheduler.address}")
            log.info(f"Dask dashboard {client.dashboard_link}")
            with closed_before(client, job_end_time) as deadline:  # record before SIGKILL
                computed, failures = compute_missing(missing, client, settings.task_retries)
            memory_restarted = memory_restarted_workers(client) if failures else set()
        computed = {
            cell_id: provenance.with_attempt(record, attempt)
            for cell_id, record in computed.items()
        }
        if failures:
            salvage = _salvage(block_cells, computed, sweep_dir, fragment)
            stop_reason = run_stop_reason(run_dir)
            walltime = deadline.passed or (
                stop_reason is not None and slurm_walltime_reached(job_end_time)
            )
            if stop_reason is not None and not walltime:  # interrupted: nothing to record
                log.info(f"stopped: {stop_reason}; {len(computed)} finished cells kept")
                raise RuntimeError(
                    f"{fragment.name}: run stopped ({stop_reason}); "
                    f"{len(computed)} finished cells kept in {salvage}"
                )
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
                f"(first: {failures[0][1]!r}); finished cells kept in {salvage}"
            )
    arrays = fragments.encode_fragment(
        cell_keys=[cell.key for cell in block_cells],
        cell_seeds=[cell.cell_id[1] for cell in block_cells],
        computed=[cell.cell_id in computed for cell in block_cells],
        records=[computed.get(cell.cell_id) or reused[cell.cell_id] for cell in block_cells],
    )
    fragments.publish_fragment(fragment, arrays)  # cache entry first, then the output
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
    ones failed with cause ``walltime`` (:func:`attnrmt.sweep.failures.classify_failure`).
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
    (:func:`attnrmt.sweep.failures.classify_failure`). O(failures)."""
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


def _salvage(
    block_cells: Sequence[BlockCell],
    computed: Mapping[tuple[str, str], Mapping[str, Any]],
    sweep_dir: Path,
    fragment: Path,
) -> Path | None:
    """Keep a failed block's newly computed cells for reuse; return the salvage file."""
    kept = [cell for cell in unique_cells(block_cells) if cell.cell_id in computed]
    if not kept:
        return None
    arrays = fragments.encode_fragment(
        cell_keys=[cell.key for cell in kept],
        cell_seeds=[cell.cell_id[1] for cell in kept],
        computed=[True] * len(kept),
        records=[computed[cell.cell_id] for cell in kept],
    )
    return fragments.write_fragment(sweep_dir / fragments.SALVAGE_DIRNAME / fragment.name, arrays)
