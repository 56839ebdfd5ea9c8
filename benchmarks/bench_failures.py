"""Benchmark: the ``execution.max_failures`` check every block makes before computing.

Setup: a run folder of 4 sweeps with ``n`` failure records in all (16 failed cells each,
written by the real writer, :func:`attnrmt.sweep.compute.failures.record_block_failures`) and the
run's start marker; ``n`` in :data:`N_RECORDS`.

Metrics per ``n`` (medians over :data:`RUNS`, page cache warm):

``check_ms``
    :meth:`attnrmt.sweep.compute.failures.FailureBudget.exceeded` with a limit above the count
    (the check reads every record: its worst case).
``floor_ms`` (floor)
    Listing the records and reading their bytes (``glob`` + ``read_bytes``): what any
    check of the records on disk pays.
``check_over_floor``
    ``check_ms / floor_ms``: the cost of parsing and counting on top of the reads.

Run with ``python -m benchmarks bench_failures``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnrmt.contract import FAILURE_CAUSES
from attnrmt.sweep.compute.failures import FailureBudget
from attnrmt.sweep.store.failures import FAILURES_DIRNAME, mark_run_started, record_block_failures

RUNS = 5
N_RECORDS = (10, 100, 1000)
CELLS_PER_RECORD = 16
N_SWEEPS = 4


def write_records(run_dir: Path, n_records: int) -> None:
    """``n_records`` failure records of :data:`CELLS_PER_RECORD` cells over the sweeps."""
    mark_run_started(run_dir)
    for index in range(n_records):
        fragment = run_dir / f"sweep{index % N_SWEEPS}" / "fragments" / f"{index:016x}.npz"
        cells = [
            {
                "key": f"{index:032x}{cell:032x}",
                "seed": "[1, 2, 3]",
                "params": {"d": 5_000_000, "snr": 1.0},
                "error": "MemoryError()",
                "cause": FAILURE_CAUSES[cell % len(FAILURE_CAUSES)],
            }
            for cell in range(CELLS_PER_RECORD)
        ]
        record_block_failures(fragment, cells, attempt=1, mem_mb=16000)


def median_ms(call: Callable[[], Any]) -> float:
    """Median wall time of ``call`` over :data:`RUNS` runs, in milliseconds."""
    call()  # warm the page cache
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times)


def read_all(run_dir: Path) -> int:
    """The floor: list every record and read its bytes."""
    return sum(len(path.read_bytes()) for path in run_dir.glob(f"*/{FAILURES_DIRNAME}/*.json"))


def main() -> dict[str, Any]:
    """``{f"{n}_records": {check_ms, floor_ms, check_over_floor}}``."""
    rows: dict[str, Any] = {}
    for n_records in N_RECORDS:
        with tempfile.TemporaryDirectory() as scratch:
            run_dir = Path(scratch) / "run"
            write_records(run_dir, n_records)
            budget = FailureBudget(limit=n_records * CELLS_PER_RECORD + 1, n_cells=10**6)
            assert budget.exceeded(run_dir) is None
            check = median_ms(lambda run_dir=run_dir, budget=budget: budget.exceeded(run_dir))
            floor = median_ms(lambda run_dir=run_dir: read_all(run_dir))
        rows[f"{n_records}_records"] = {
            "failed_cells": n_records * CELLS_PER_RECORD,
            "check_ms": round(check, 2),
            "floor_ms": round(floor, 2),
            "check_over_floor": round(check / floor, 2),
        }
        print(f"{n_records} records: check {check:.2f} ms, floor {floor:.2f} ms", flush=True)
    return rows
