"""Benchmark: ``attnrmt status`` of a 10^5-cell run (target <= 5 s, issue 14).

Setup: the 100,000-cell config of :mod:`benchmarks.bench_plan` with ``block_size: 16``
(6,260 blocks, the many-small-blocks worst case), 90 % of its blocks finished as
fragments written by the real writer (:func:`attnrmt.sweep.store.fragments.publish_fragment`,
so each also has its hard link in ``cache/``), mtimes spread over the last 10 minutes,
one failure record.

Metrics (medians over ``RUNS``; page cache warm, in-process caches cleared each time):

``status_seconds_1e5_cells``
    :func:`attnrmt.sweep.report.status.run_status` given the plan (the status proper).
``status_cli_seconds_1e5_cells``
    The whole ``attnrmt status RUN_DIR --json`` in a fresh process (imports, config,
    :func:`attnrmt.sweep.spec.plan_run` of 10^5 cells, status).
``plan_run_seconds_1e5_cells`` (floor)
    :func:`attnrmt.sweep.spec.plan_run` alone, in this process: what any command about the
    run pays before looking at a file.
``all_keys_seconds_1e5_cells`` (plain alternative)
    :func:`attnrmt.sweep.store.fragments.read_fragment_cell_ids` of every fragment (no
    in-process index): reading the cell keys of every fragment once.

Run with ``python -m benchmarks bench_status``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from attnrmt.sweep.spec import identity
from benchmarks.bench_plan import N_CELLS, big_config, machine

RUNS = 3
STATUS_TARGET_SECONDS = 5.0
DONE_FRACTION = 0.9
SPREAD_SECONDS = 600.0


def synthetic_record(cell: Any, rng: np.random.Generator) -> dict[str, Any]:
    """A CellResult-shaped record (every field the contract stores) with random numbers."""
    k = cell.top_k
    return {
        "eigenvalues": np.sort(rng.random(cell.d)),
        "top_eigenvalues": rng.random(k),
        "overlap_signal": rng.random(k),
        "overlap_class_mean": rng.random(k),
        "overlap_table_mean": rng.random(k),
        "pop_top_eigenvalues": rng.random(k),
        "pop_overlap_signal": rng.random(k),
        "alpha": 0.5,
        "kappa": 0.25,
        "sigma": 1.0,
        "V": 2 * cell.d,
        "N": 2 * cell.d,
        "effective_weights": np.full(cell.T, 1.0 / cell.T),
        "downstream_accuracy": float("nan"),
        "compute_seconds": float(rng.uniform(0.01, 0.02)),
    }


def write_run(plan: Any, run_dir: Path) -> int:
    """Publish fragments of the first :data:`DONE_FRACTION` of every sweep's blocks and
    record one failed block; return the number of fragments."""
    from attnrmt.sweep.store import fragments
    from attnrmt.sweep.store.failures import record_block_failures

    rng = np.random.default_rng(0)
    now = time.time()
    written = 0
    for name, sweep in plan.sweeps.items():
        n_done = int(DONE_FRACTION * len(sweep.blocks))
        for index, block in enumerate(sweep.blocks[:n_done]):
            arrays = fragments.encode_fragment(
                block.cell_keys,
                [identity.seed_token(cell.seed_words(plan.seed)) for cell in block.cells],
                [True] * len(block.cells),
                [synthetic_record(cell, rng) for cell in block.cells],
            )
            path = run_dir / name / fragments.FRAGMENTS_DIRNAME / f"{block.key}.npz"
            fragments.publish_fragment(path, arrays)
            mtime = now - SPREAD_SECONDS * (1 - index / n_done)
            os.utime(path, (mtime, mtime))
            written += 1
        failed = sweep.blocks[n_done]
        record_block_failures(
            run_dir / name / fragments.FRAGMENTS_DIRNAME / f"{failed.key}.npz",
            [{"key": failed.cells[0].key, "seed": "[]", "params": {}, "error": "bench"}],
        )
    return written


def clear_caches() -> None:
    """Forget what earlier calls read (each measured call reads the files again)."""
    from attnrmt.sweep.report import status
    from attnrmt.sweep.store import fragments

    fragments._INDEX = fragments.CellIndex()
    status._TIMINGS.clear()


def timed(function: Any, *args: Any) -> float:
    """Seconds of one call after clearing the in-process caches."""
    clear_caches()
    start = time.perf_counter()
    function(*args)
    return time.perf_counter() - start


def cli_seconds(run_dir: Path) -> float:
    """Wall seconds of ``attnrmt status RUN_DIR --json`` in a fresh process."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "attnrmt.cli", "status", str(run_dir), "--json"],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def main(runs: int = RUNS) -> dict[str, Any]:
    """Run the benchmark; return the metrics (medians over ``runs``)."""
    from attnrmt.sweep import load_config, plan_run
    from attnrmt.sweep.report.status import run_status
    from attnrmt.sweep.store import fragments
    from attnrmt.sweep.store.guard import claim_run_dir

    config = {**big_config("bench-status"), "execution": {"block_size": 16}}
    with tempfile.TemporaryDirectory(prefix="attnrmt-bench-status-") as tmp:
        config_path = Path(tmp) / "config.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        plan = plan_run(load_config(config))
        n_cells = sum(sweep.n_cells for sweep in plan.sweeps.values())
        if n_cells != N_CELLS:
            raise AssertionError(f"{n_cells} cells, not {N_CELLS}")
        run_dir = Path(tmp) / "results" / plan.run
        claim_run_dir(run_dir, config_path)
        n_fragments = write_run(plan, run_dir)
        status = run_status(plan, run_dir)
        plan_seconds = statistics.median(
            timed(lambda: plan_run(load_config(config))) for _ in range(runs)
        )
        status_seconds = statistics.median(timed(run_status, plan, run_dir) for _ in range(runs))
        keys_seconds = statistics.median(
            timed(
                lambda sweep_dir: [
                    fragments.read_fragment_cell_ids(path)
                    for path in fragments.fragment_paths(sweep_dir)
                ],
                run_dir / name,
            )
            for _ in range(runs)
            for name in plan.sweeps
        )
        cli = statistics.median(cli_seconds(run_dir) for _ in range(runs))
    return {
        "status_seconds_1e5_cells": round(status_seconds, 3),
        "status_seconds_1e5_cells_target": STATUS_TARGET_SECONDS,
        "status_seconds_1e5_cells_ok": status_seconds <= STATUS_TARGET_SECONDS,
        "status_cli_seconds_1e5_cells": round(cli, 2),
        "status_cli_seconds_1e5_cells_ok": cli <= STATUS_TARGET_SECONDS,
        "plan_run_seconds_1e5_cells": round(plan_seconds, 3),
        "all_keys_seconds_1e5_cells": round(keys_seconds, 3),
        "status_over_plan_run": round(status_seconds / plan_seconds, 2),
        "status_over_all_keys": round(status_seconds / keys_seconds, 3),
        "status_fragments": n_fragments,
        "status_done_cells": status.total.done,
        "status_runs": runs,
        "status_machine": machine(),
    }


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
