"""Failed cells (docs/data-contract.md, "Failure causes"): the cause, counts per cause, the
blocks ``skip_failed`` leaves out and the ``execution.max_failures`` budget (records:
:mod:`attnrmt.sweep.store.failures`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import math
import os
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.contract import FAILURE_CAUSES
from attnrmt.sweep.store.failures import (
    RUN_STARTED_MARKER,
    run_failures_since,
    unresolved_failures,
)

#: Topic of the event a Dask nanny logs when it restarts its worker for exceeding its
#: memory limit (``distributed.worker_memory``: "exceeded 95% memory budget").
MEMORY_RESTART_TOPIC = "worker-restart-memory"

#: Words of a ``ValueError`` raised on non-finite numbers (numpy/scipy: "array must not
#: contain infs or NaNs", "non-finite values").
NON_FINITE_WORDS = ("infs or nans", "non-finite", "not finite", "nan or inf")


def classify_failure(
    error: BaseException, memory_restarted: Collection[str] = (), walltime: bool = False
) -> str:
    """Why a cell failed, first match wins (docs/data-contract.md, "Failure causes"):
    ``out_of_memory``, ``numerical``, ``walltime`` (a lost task at the SLURM limit),
    ``out_of_memory`` for a killed worker the nanny restarted for memory, ``killed``,
    ``other``. O(1)."""
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
    """Workers a nanny restarted for exceeding their memory limit (:data:`MEMORY_RESTART_TOPIC`
    events); ``set()`` when the scheduler cannot be asked. O(events)."""
    try:
        events = client.get_events(MEMORY_RESTART_TOPIC)
    except Exception:  # a lost scheduler: no memory evidence
        return set()
    return {str(message.get("worker")) for _, message in events if isinstance(message, dict)}


def count_failures_by_cause(failures: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Failed cells per cause, most frequent first (ties in :data:`FAILURE_CAUSES` order);
    records written before causes were recorded count as ``other``. O(failures)."""
    return _ranked(Counter(str(failure.get("cause") or "other") for failure in failures))


def merge_cause_counts(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Sum of :func:`count_failures_by_cause` results (e.g. of every sweep), ranked alike."""
    return _ranked(sum((Counter(part) for part in counts), Counter()))


def _ranked(counts: Mapping[str, int]) -> dict[str, int]:
    order = {cause: position for position, cause in enumerate(FAILURE_CAUSES)}
    ranked = sorted(counts, key=lambda cause: (-counts[cause], order.get(cause, len(order))))
    return {cause: counts[cause] for cause in ranked if counts[cause]}


def describe_causes(counts: Mapping[str, int]) -> str:
    """``"51 out_of_memory, 6 numerical"`` (in the order of ``counts``)."""
    return ", ".join(f"{count:,} {cause}" for cause, count in counts.items())


def failed_blocks(run_plan: Any, run_dir: str | os.PathLike[str]) -> dict[str, set[str]]:
    """Per sweep, the keys of planned blocks with a standing failure record."""
    blocks: dict[str, set[str]] = {}
    for name, sweep in run_plan.sweeps.items():
        planned = {block.key for block in sweep.blocks}
        failed = {str(cell["block"]) for cell in unresolved_failures(Path(run_dir) / name)}
        blocks[name] = failed & planned
    return blocks


def max_failed_cells(setting: int | float | None, n_cells: int) -> int | None:
    """The failed-cell count at which a run stops (``execution.max_failures``): a count
    ``>= 1``, ``max(1, ceil(f n_cells))`` for a fraction ``f``, or None (never). O(1)."""
    if setting is None:
        return None
    if isinstance(setting, float) and setting < 1:
        return max(1, math.ceil(setting * n_cells))
    return int(setting)


@dataclass(frozen=True)
class FailureBudget:
    """``execution.max_failures``: stop once ``limit`` cells failed since the run started
    (:data:`RUN_STARTED_MARKER`); blocks in flight finish."""

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
        """The stop message once the limit is reached, else None (``retried``, the asking block's
        record, is not counted, so Snakemake's retry still runs). O(failure records)."""
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
