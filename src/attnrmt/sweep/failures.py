"""Failed cells: what the last attempt of a block left in ``<sweep>/failures/`` (read side).

A block whose cells fail after Dask's retries records them
(:func:`record_block_failures`: cell key, seed, simulate parameters,
error) and fails its Snakemake job; the record is removed when the block later succeeds.
This module answers the questions a user asks afterwards:

- which failures still stand (:func:`unresolved_failures`, listed by ``attnrmt plan``);
- which blocks to leave out when the config sets ``skip_failed: true``
  (:func:`failed_blocks`), so that everything that did finish is gathered, analysed and
  reported;
- the table of failed cells in the report (:func:`failed_cells_table`, rule
  ``failed_cells``);
- why each cell failed (:func:`classify_failure`: one of
  :data:`attnrmt.contract.FAILURE_CAUSES`, stored as ``cause``) and how many failed per
  cause (:func:`count_failures_by_cause`);
- whether the run has failed often enough to stop (:class:`FailureBudget`,
  ``execution.max_failures``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import json
import math
import os
import subprocess
import time
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from attnrmt.contract import FAILURE_CAUSES
from attnrmt.sweep.fragments import finished_cell_keys, write_json_atomically

FAILURES_DIRNAME = "failures"

#: Columns of ``failed_cells.csv``: where the cell is, what it is, and how it failed
#: (``docs/data-contract.md``, "Failure causes").
FAILED_CELLS_COLUMNS = (
    "sweep",
    "block",
    "cell_key",
    "d",
    "delta",
    "gamma",
    "T",
    "positional",
    "weights",
    "snr",
    "centered",
    "replicate",
    "cause",
    "error",
    "time",
)


# ------------------------------------------------------------------ write side


def failure_record_path(fragment_path: str | os.PathLike[str]) -> Path:
    """``<sweep>/failures/<block>.json`` of the block whose fragment is ``fragment_path``."""
    fragment = Path(fragment_path)
    return fragment.parent.parent / FAILURES_DIRNAME / f"{fragment.stem}.json"


def record_block_failures(
    fragment_path: str | os.PathLike[str],
    failed_cells: Sequence[Mapping[str, Any]],
    attempt: int = 1,
    mem_mb: int | None = None,
) -> Path:
    """Write what failed in a block (atomically), replacing an earlier record.

    ``failed_cells``: one mapping per failed cell, ``{"key", "seed", "params", "error",
    "cause"}`` (JSON-serialisable; ``cause`` from :func:`classify_failure`). The record
    also names the block, the time, the number of the attempt
    (:func:`attnrmt.sweep.provenance.block_attempt` reads it back) and the memory the
    block job was granted (Snakemake's ``mem_mb`` resource; ``None`` when unknown).
    """
    path = failure_record_path(fragment_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "block": Path(fragment_path).stem,
        "attempt": int(attempt),
        "mem_mb": None if mem_mb is None else int(mem_mb),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cells": [dict(cell) for cell in failed_cells],
    }
    write_json_atomically(path, payload)
    return path


# ------------------------------------------------------------------ causes

#: Topic of the event a Dask nanny logs when it restarts its worker for exceeding its
#: memory limit (``distributed.worker_memory``: "exceeded 95% memory budget").
MEMORY_RESTART_TOPIC = "worker-restart-memory"

#: Words of a ``ValueError`` raised on non-finite numbers (numpy/scipy: "array must not
#: contain infs or NaNs", "non-finite values").
NON_FINITE_WORDS = ("infs or nans", "non-finite", "not finite", "nan or inf")


def classify_failure(
    error: BaseException, memory_restarted: Collection[str] = (), walltime: bool = False
) -> str:
    """Why a cell failed: one of :data:`attnrmt.contract.FAILURE_CAUSES`.

    Decided from what the block sees (``docs/data-contract.md``, "Failure causes"), first
    match wins:

    1. ``MemoryError`` -> ``out_of_memory``;
    2. ``ArithmeticError`` (``FloatingPointError``, ``ZeroDivisionError``,
       ``OverflowError``), ``numpy.linalg.LinAlgError`` or a ``ValueError`` about
       non-finite numbers (:data:`NON_FINITE_WORDS`) -> ``numerical``;
    3. a task lost with its worker or client (``distributed.KilledWorker``, a cancelled
       future, a closed comm): ``walltime`` when the block was stopped at its
       SLURM time limit (``walltime``: :func:`slurm_walltime_reached`); else
       ``out_of_memory`` for a ``KilledWorker`` whose last worker is in
       ``memory_restarted`` (workers their nanny restarted for exceeding their memory
       limit: :func:`memory_restarted_workers`); else ``killed``;
    4. anything else -> ``other``.

    O(1) (``memory_restarted`` is a set).
    """
    if isinstance(error, MemoryError):
        return "out_of_memory"
    if isinstance(error, ArithmeticError | np.linalg.LinAlgError) or (
        isinstance(error, ValueError)
        and any(word in str(error).lower() for word in NON_FINITE_WORDS)
    ):
        return "numerical"
    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    lost = (
        KilledWorker,
        asyncio.CancelledError,
        concurrent.futures.CancelledError,
        CommClosedError,
    )  # distributed's FutureCancelledError is the third
    if not isinstance(error, lost):
        return "other"
    if walltime:
        return "walltime"
    if isinstance(error, KilledWorker):
        worker = getattr(error.last_worker, "address", error.last_worker)
        return "out_of_memory" if worker in memory_restarted else "killed"
    return "killed"


def memory_restarted_workers(client: Any) -> set[str]:
    """Addresses of the workers a nanny restarted for exceeding their memory limit (the
    scheduler's :data:`MEMORY_RESTART_TOPIC` events). O(events); ``set()`` when the
    scheduler cannot be asked."""
    try:
        events = client.get_events(MEMORY_RESTART_TOPIC)
    except Exception:  # a lost scheduler: no memory evidence
        return set()
    return {str(message.get("worker")) for _, message in events if isinstance(message, dict)}


#: Seconds before its end time from which a failing block of a SLURM job counts as ended
#: by its walltime: a block stops itself a minute before
#: (``attnrmt.sweep.blocks.STOP_BEFORE_WALLTIME_SECONDS``), and SLURM sends SIGTERM at
#: the limit (or earlier with ``--signal``) to a run driven from a batch job.
WALLTIME_MARGIN_SECONDS = 300.0


def slurm_job_end_time(environ: Mapping[str, str] = os.environ) -> float | None:
    """End time (Unix seconds) of the SLURM job this process runs in, or ``None`` outside
    one or when SLURM cannot tell: ``SLURM_JOB_END_TIME`` when SLURM sets it (23.02+),
    else ``squeue -h -j $SLURM_JOB_ID -o %e``, asked once per job and process (a block
    asks when it starts: once SLURM has ended the job, squeue may no longer list it)."""
    if environ.get("SLURM_JOB_END_TIME", "").isdigit():
        return float(environ["SLURM_JOB_END_TIME"])
    job = environ.get("SLURM_JOB_ID")
    return _squeue_end_time(job) if job else None


@functools.lru_cache(maxsize=16)
def _squeue_end_time(job: str) -> float | None:
    try:
        shown = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%e"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        return datetime.fromisoformat(shown).timestamp()
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def slurm_walltime_reached(end_time: float | None, now: float | None = None) -> bool:
    """Whether ``now`` is within :data:`WALLTIME_MARGIN_SECONDS` of (or past) the job's
    ``end_time`` (:func:`slurm_job_end_time`; ``None``: not in a SLURM job): a stop
    signal now is SLURM ending the job at its walltime."""
    current = time.time() if now is None else now
    return end_time is not None and current >= end_time - WALLTIME_MARGIN_SECONDS


def count_failures_by_cause(failures: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Failed cells per cause, most frequent first (ties in :data:`FAILURE_CAUSES` order);
    records written before causes were recorded count as ``other``. O(failures)."""
    return _ranked(Counter(str(failure.get("cause") or "other") for failure in failures))


def merge_cause_counts(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Sum of :func:`count_failures_by_cause` results (e.g. of every sweep), ranked alike."""
    total: Counter[str] = Counter()
    for part in counts:
        total.update(part)
    return _ranked(total)


def _ranked(counts: Mapping[str, int]) -> dict[str, int]:
    order = {cause: position for position, cause in enumerate(FAILURE_CAUSES)}
    ranked = sorted(counts, key=lambda cause: (-counts[cause], order.get(cause, len(order))))
    return {cause: counts[cause] for cause in ranked if counts[cause]}


def describe_causes(counts: Mapping[str, int]) -> str:
    """``"51 out_of_memory, 6 numerical"`` (in the order of ``counts``)."""
    return ", ".join(f"{count:,} {cause}" for cause, count in counts.items())


def clear_block_failures(fragment_path: str | os.PathLike[str]) -> None:
    """Remove a block's failure record (it has now succeeded)."""
    with contextlib.suppress(FileNotFoundError):
        failure_record_path(fragment_path).unlink()


def read_failures(sweep_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every failed cell recorded under ``sweep_dir``, each with its ``block``, ``time`` and
    ``cause`` (``other`` in records older than causes).

    Sorted by block, then cell key. Unreadable records are skipped.
    """
    directory = Path(sweep_dir) / FAILURES_DIRNAME
    failed: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for cell in record.get("cells", []):
            failed.append(
                {"cause": "other", **cell, "block": record.get("block"), "time": record.get("time")}
            )
    return sorted(failed, key=lambda cell: (str(cell["block"]), str(cell.get("key"))))


# ------------------------------------------------------------------ read side


def unresolved_failures(
    sweep_dir: str | os.PathLike[str], done: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """Recorded failures of a sweep whose cell has not been finished since.

    Parameters
    ----------
    sweep_dir : path
        ``results/<run>/<sweep>``.
    done : iterable of str, optional
        Keys of finished cells (default: read from the sweep's fragments).

    Returns
    -------
    list of dict
        ``{"key", "seed", "params", "error", "cause", "block", "time"}`` per failed cell.
    """
    sweep = Path(sweep_dir)
    failed = read_failures(sweep)
    if not failed:  # the common case: no need to read every fragment's cell keys
        return []
    finished = set(done) if done is not None else set(finished_cell_keys(sweep))
    return [cell for cell in failed if cell.get("key") not in finished]


def failed_blocks(run_plan: Any, run_dir: str | os.PathLike[str]) -> dict[str, set[str]]:
    """Per sweep, the keys of planned blocks with a standing failure record."""
    blocks: dict[str, set[str]] = {}
    for name, sweep in run_plan.sweeps.items():
        planned = {block.key for block in sweep.blocks}
        failed = {str(cell["block"]) for cell in unresolved_failures(Path(run_dir) / name)}
        blocks[name] = failed & planned
    return blocks


def failed_cells_table(run_plan: Any, run_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per planned cell whose last attempt failed (:data:`FAILED_CELLS_COLUMNS`).

    Cells are described by the plan (model *names*, replicate), so that the table reads
    like the config; failures of cells the config no longer holds are left out.
    """
    rows = []
    for name, sweep in run_plan.sweeps.items():
        failures = unresolved_failures(Path(run_dir) / name)
        failing = {failure.get("key") for failure in failures}
        # only the failing cells are built (the plan holds its cells as arrays)
        cells = {
            key: sweep.cells[index] for index, key in enumerate(sweep.cell_keys()) if key in failing
        }
        for failure in failures:
            cell = cells.get(failure.get("key"))
            if cell is None:
                continue
            rows.append(
                {
                    "sweep": name,
                    "block": failure["block"],
                    "cell_key": cell.key,
                    **{axis: getattr(cell, axis) for axis in FAILED_CELLS_COLUMNS[3:12]},
                    "cause": failure["cause"],
                    "error": " ".join(str(failure.get("error", "")).split()),
                    "time": failure.get("time"),
                }
            )
    return pd.DataFrame(rows, columns=list(FAILED_CELLS_COLUMNS))


def write_failed_cells_table(
    run_plan: Any, run_dir: str | os.PathLike[str], output_path: str | os.PathLike[str]
) -> Path:
    """Write :func:`failed_cells_table` as CSV (rule ``failed_cells``); header only when
    nothing failed."""
    target = Path(output_path)
    target.parent.mkdir(parents=True, exist_ok=True)
    failed_cells_table(run_plan, run_dir).to_csv(target, index=False)
    return target


# ------------------------------------------------------------------ max_failures

#: Marker the main Snakemake process touches when a run starts (Snakefile ``onstart``):
#: failure records older than it belong to earlier runs and do not count against
#: ``execution.max_failures`` (the rerun retries them).
RUN_STARTED_MARKER = ".run-started"


def mark_run_started(run_dir: str | os.PathLike[str]) -> Path:
    """Touch ``<run_dir>/.run-started`` (its mtime is the run's start). O(1)."""
    marker = Path(run_dir) / RUN_STARTED_MARKER
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    return marker


def max_failed_cells(setting: int | float | None, n_cells: int) -> int | None:
    """The failed-cell count at which a run stops (``execution.max_failures``).

    A whole number ``>= 1`` is a count; a fraction ``0 < f < 1`` of the run's ``n_cells``
    gives ``max(1, ceil(f * n_cells))``; ``None`` never stops.
    """
    if setting is None:
        return None
    if isinstance(setting, float) and setting < 1:
        return max(1, math.ceil(setting * n_cells))
    return int(setting)


def run_failures_since(
    run_dir: str | os.PathLike[str],
    since: float | None,
    left_out: str | os.PathLike[str] | None = None,
) -> list[dict[str, Any]]:
    """Failed cells in every ``<run_dir>/<sweep>/failures/<block>.json`` written at or
    after ``since`` (Unix seconds; ``None``: all), but the record ``left_out``. Reads
    only the failures folders: O(failure records), never a fragment."""
    failed: list[dict[str, Any]] = []
    skipped = None if left_out is None else Path(left_out).resolve()
    for path in Path(run_dir).glob(f"*/{FAILURES_DIRNAME}/*.json"):
        try:
            if skipped is not None and path.resolve() == skipped:
                continue
            if since is not None and path.stat().st_mtime < since:
                continue
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # removed since listed (its block succeeded), or being replaced
        failed.extend({"cause": "other", **cell} for cell in record.get("cells", []))
    return failed


@dataclass(frozen=True)
class FailureBudget:
    """``execution.max_failures`` of a run: stop when ``limit`` cells have failed.

    Counted are the cells of the failure records written since the run started
    (:data:`RUN_STARTED_MARKER`), so a rerun starts afresh and retries them. Each block
    checks before computing (:meth:`exceeded`, O(failure records)); it is race-free
    enough: blocks already computing when the limit is reached finish (at most the
    blocks in flight, ``dask_clients`` or ``jobs``), and two blocks failing at once may
    both be counted after the limit; no block starts computing once the records on disk
    reach it.
    """

    limit: int | None
    n_cells: int

    @classmethod
    def from_config(cls, config: Mapping[str, Any], run_plan: Any) -> FailureBudget:
        """From the validated config and the run's plan (its cell count)."""
        n_cells = sum(len(sweep.cells) for sweep in run_plan.sweeps.values())
        setting = config["execution"]["max_failures"]
        return cls(limit=max_failed_cells(setting, n_cells), n_cells=n_cells)

    def exceeded(
        self, run_dir: str | os.PathLike[str], retried: str | os.PathLike[str] | None = None
    ) -> str | None:
        """The one stop message when this run's failed cells reached the limit, else
        ``None``: ``max_failures reached: 57 of 2,578 cells failed (51 out_of_memory,
        6 numerical); stopping. ...``.

        ``retried``: the failure record of the block asking, left out of the count, so
        that Snakemake's retry of a failed block (with more memory) still runs.
        """
        if self.limit is None:
            return None
        marker = Path(run_dir) / RUN_STARTED_MARKER
        try:
            since: float | None = marker.stat().st_mtime
        except OSError:
            since = None
        failures = run_failures_since(run_dir, since, retried)
        if len(failures) < self.limit:
            return None
        return (
            f"max_failures reached: {len(failures):,} of {self.n_cells:,} cells failed "
            f"({describe_causes(count_failures_by_cause(failures))}); stopping. "
            "Fix and rerun the same command to resume."
        )


class MaxFailuresReached(RuntimeError):
    """A block not computed because the run reached ``execution.max_failures``."""


def describe_skipped(skipped: Mapping[str, set[str]]) -> str:
    """One line naming the blocks a ``skip_failed`` run leaves out (empty when none)."""
    parts = [f"{sweep}: {len(keys)}" for sweep, keys in skipped.items() if keys]
    if not parts:
        return ""
    return (
        "attnrmt: skip_failed: leaving out blocks whose last attempt failed "
        f"({', '.join(parts)}); see failed_cells.csv or `attnrmt plan`"
    )


__all__ = [
    "FAILED_CELLS_COLUMNS",
    "MEMORY_RESTART_TOPIC",
    "FailureBudget",
    "MaxFailuresReached",
    "classify_failure",
    "count_failures_by_cause",
    "describe_causes",
    "describe_skipped",
    "failed_blocks",
    "failed_cells_table",
    "mark_run_started",
    "max_failed_cells",
    "memory_restarted_workers",
    "merge_cause_counts",
    "slurm_job_end_time",
    "slurm_walltime_reached",
    "unresolved_failures",
    "write_failed_cells_table",
]
