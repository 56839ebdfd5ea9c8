"""Failure causes and execution.max_failures (attnrmt.sweep.compute.failures).

Each cause is provoked for real where a test can: a real MemoryError (an allocation no
machine can make), a worker its nanny restarts for exceeding ``memory_limit``, a worker
SIGKILLed under its task, a real LinAlgError / FloatingPointError / non-finite input;
a real SLURM job ends a block at its time limit.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.linalg

from attnrmt.contract import FAILURE_CAUSES
from attnrmt.sweep.compute import blocks, failures
from attnrmt.sweep.spec.config import load_config
from attnrmt.sweep.spec.plan import plan_run
from attnrmt.sweep.store import failures as failure_records
from tests.conftest import build_tiny_config
from tests.sweep.conftest import UNALLOCATABLE_D, write_failed_block


def failing_cell_error(kwargs: dict[str, Any]) -> BaseException:
    """The exception a real cell raises inside a block's Dask task (compute_group)."""
    ((record, error),) = blocks.compute_group([kwargs], [1, 2, 3])
    assert record is None and error is not None
    return error


def cell_kwargs(**changes: Any) -> dict[str, Any]:
    """simulate_cell kwargs of a small valid cell, with ``changes``."""
    base = {
        "d": 8,
        "delta": 0.5,
        "gamma": 0.5,
        "T": 3,
        "positional": {"kind": "iid"},
        "weights": "mean",
        "snr": 1.0,
        "centered": True,
        "top_k": 2,
    }
    return {**base, **changes}


def test_a_cell_that_cannot_allocate_is_out_of_memory() -> None:
    error = failing_cell_error(cell_kwargs(d=UNALLOCATABLE_D))
    assert isinstance(error, MemoryError)
    assert failures.classify_failure(error) == "out_of_memory"


def numerical_errors() -> list[BaseException]:
    """Real errors of numerical code: a non-positive-definite Cholesky, a division by zero
    under numpy's raise mode, a Python division by zero, scipy refusing NaN input."""
    caught = []
    for provoke in (
        lambda: np.linalg.cholesky(-np.eye(3)),
        lambda: np.divide(np.ones(2), np.zeros(2)),
        lambda: 1 / int(np.zeros(1)[0]),
        lambda: scipy.linalg.eigh(np.full((3, 3), np.nan)),
    ):
        try:
            with np.errstate(all="raise"):
                provoke()
        except Exception as exc:
            caught.append(exc)
    return caught


def test_numerical_errors_are_numerical() -> None:
    errors = numerical_errors()
    assert [type(error).__name__ for error in errors] == [
        "LinAlgError",
        "FloatingPointError",
        "ZeroDivisionError",
        "ValueError",
    ]
    assert [failures.classify_failure(error) for error in errors] == ["numerical"] * 4


def test_other_errors_are_other_and_walltime_only_when_stopped_at_the_limit() -> None:
    invalid = failing_cell_error(cell_kwargs(d=1))  # rejected by validation: ValueError
    assert failures.classify_failure(invalid) == "other"
    assert failures.classify_failure(KeyError("x")) == "other"
    cancelled = asyncio.CancelledError("the block's Dask client was closed")
    assert failures.classify_failure(cancelled) == "killed"
    assert failures.classify_failure(cancelled, walltime=True) == "walltime"
    # a cell's own error keeps its cause even in a job ended at its walltime
    assert failures.classify_failure(MemoryError(), walltime=True) == "out_of_memory"
    assert failures.classify_failure(invalid, walltime=True) == "other"


def test_a_cancelled_future_is_killed_or_walltime(scheduler_address: str) -> None:
    """What a block gets for a task cancelled under it (its client closed by a stop)."""
    from distributed import Client

    with Client(scheduler_address, set_as_default=False) as client:
        future = client.submit(time.sleep, 30, pure=False)
        future.cancel()
        with pytest.raises(Exception) as caught:
            future.result(timeout=30)
    assert type(caught.value).__name__ == "FutureCancelledError"
    assert failures.classify_failure(caught.value) == "killed"
    assert failures.classify_failure(caught.value, walltime=True) == "walltime"


def error_on_one_worker(task: Callable[[], Any], memory_limit: str | int) -> tuple[Any, set]:
    """Run ``task`` on a one-worker process cluster (nanny, ``memory_limit``) that gives up
    on a task at its first lost worker; the error and the memory-restarted workers."""
    import dask
    from distributed import Client, LocalCluster

    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            memory_limit=memory_limit,
            host="127.0.0.1",
            dashboard_address=":0",
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        future = client.submit(task, pure=False)
        with pytest.raises(Exception) as caught:
            future.result(timeout=120)
        return caught.value, failures.memory_restarted_workers(client)


def grow_memory() -> None:
    """Touch 64 MiB more every 50 ms, up to 3 GiB (a worker limited to 400 MiB is
    restarted by its nanny long before)."""
    held = []
    for _ in range(48):
        held.append(np.ones(8 * 2**20))
        time.sleep(0.05)


def kill_self() -> None:
    """SIGKILL the worker process running this task."""
    os.kill(os.getpid(), signal.SIGKILL)


def test_worker_restarted_by_its_nanny_for_memory_is_out_of_memory() -> None:
    error, restarted = error_on_one_worker(grow_memory, "400MiB")
    from distributed import KilledWorker

    assert isinstance(error, KilledWorker), repr(error)
    assert restarted, "the nanny logged no memory restart"
    assert failures.classify_failure(error, restarted) == "out_of_memory"


def test_worker_killed_by_a_signal_is_killed() -> None:
    error, restarted = error_on_one_worker(kill_self, 0)
    from distributed import KilledWorker

    assert isinstance(error, KilledWorker), repr(error)
    assert restarted == set()
    assert failures.classify_failure(error, restarted) == "killed"


#: A block job as the run's driver runs it: Snakemake's own SIGTERM handler (it does not
#: exit at once) with the run's stop on signals on top.
BLOCK_JOB_SCRIPT = """
import json, signal, sys
from attnrmt.sweep.compute import blocks
from attnrmt.sweep.compute.cluster import stop_on_signals
if __name__ == "__main__":  # Dask's worker processes import this module again
    signal.signal(signal.SIGTERM, lambda *args: None)
    stop_on_signals()
    params = json.loads(open(sys.argv[1]).read())
    try:
        blocks.run_block(params, sys.argv[2], sys.argv[3], {"mode": "job", "dashboard": False})
    except RuntimeError as error:
        print("block failed:", error, flush=True)
"""


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` every 0.5 s; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not seen in {timeout} s")
        time.sleep(0.5)


@pytest.mark.slurm
@pytest.mark.parametrize("sigterm", [False, True])
def test_block_ended_by_slurm_at_its_time_limit_records_walltime(
    tmp_path: Path, sigterm: bool
) -> None:
    """A real SLURM job runs a block of 7-30 minutes of cells (2 and 3 minute limits).
    Without a signal the block stops itself a minute before the limit
    (blocks.STOP_BEFORE_WALLTIME_SECONDS). With SLURM's SIGTERM once the block computes,
    less than 5 minutes before the limit (as a driver run in a batch job gets it at its
    limit), the run's stop ends it. Either way the job ends on its own, before SLURM's
    limit, and the failure record says walltime."""
    import sys

    plan = plan_run(
        load_config(
            build_tiny_config(
                sweep={"d": [1600], "snr": [float(value) for value in range(400)], "replicates": 1}
            )
        )
    )
    # 1-5 s per cell (quiet or loaded machine): 400 cells outlast the 2-3 minute limits
    # whatever the load (40 cells once finished in 38 s on a quiet machine)
    params = plan.sweeps["grid"].cells.block_params(plan.seed)
    params_file = tmp_path / "params.json"
    params_file.write_text(json.dumps(params))
    script = tmp_path / "block_job.py"
    script.write_text(BLOCK_JOB_SCRIPT)
    run_dir = tmp_path / "results" / "unit"
    fragment = run_dir / "grid" / "fragments" / "long.npz"
    log = tmp_path / "slurm.out"
    job = (
        subprocess.run(
            [
                "sbatch",
                "--parsable",
                f"--time={3 if sigterm else 2}",
                "--cpus-per-task=1",
                f"--output={log}",
                f"--export=ALL,PYTHONPATH={os.environ.get('PYTHONPATH', '')}",
                "--wrap",
                f"exec {sys.executable} {script} {params_file} {fragment} {run_dir}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        .stdout.strip()
        .split(";")[0]
    )

    def listed() -> bool:
        return bool(
            subprocess.run(
                ["squeue", "-h", "-j", job], capture_output=True, text=True
            ).stdout.strip()
        )

    try:
        if sigterm:  # once the block's client is connected (it computes from then on)
            wait_until(
                lambda: log.exists() and "Receive client connection" in log.read_text(),
                120,
                "the block's client",
            )
            subprocess.run(["scancel", "--batch", "--signal=TERM", job], check=True)
        wait_until(lambda: not listed(), 240, "the end of the job")
    finally:
        subprocess.run(["scancel", job], capture_output=True)
    output = log.read_text()
    assert "block failed" in output and "DUE TO TIME LIMIT" not in output, output[-3000:]
    assert ("SIGTERM received" in output) == sigterm, output[-3000:]
    record = json.loads(failure_records.failure_record_path(fragment).read_text())
    causes = {cell["cause"] for cell in record["cells"]}
    errors = {cell["error"] for cell in record["cells"] if cell["cause"] != "walltime"}
    assert causes == {"walltime"}, (causes, errors, output[-3000:])
    assert not fragment.exists()


def test_counts_by_cause_most_frequent_first() -> None:
    causes = ["numerical"] * 6 + ["out_of_memory"] * 51 + ["killed"] * 6
    counts = failures.count_failures_by_cause({"cause": cause} for cause in causes)
    assert counts == {"out_of_memory": 51, "killed": 6, "numerical": 6}
    assert list(counts) == ["out_of_memory", "killed", "numerical"]  # ties: contract order
    assert failures.describe_causes(counts) == "51 out_of_memory, 6 killed, 6 numerical"
    assert set(counts) <= set(FAILURE_CAUSES)


@pytest.mark.parametrize(
    ("setting", "n_cells", "limit"),
    [
        (0.05, 2578, 129),
        (0.05, 10, 1),
        (0.5, 3, 2),
        (3, 10, 3),
        (1, 10, 1),
        (2.0, 10, 2),
        (None, 10, None),
    ],
)
def test_max_failed_cells(setting: Any, n_cells: int, limit: int | None) -> None:
    assert failures.max_failed_cells(setting, n_cells) == limit


def test_budget_counts_this_runs_records_of_every_sweep(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    old = write_failed_block(run_dir, "a", "old", ["other"] * 5)
    os.utime(old, (time.time() - 60, time.time() - 60))  # an earlier run's failures
    failure_records.mark_run_started(run_dir)
    budget = failures.FailureBudget(limit=4, n_cells=2578)
    write_failed_block(run_dir, "a", "b1", ["out_of_memory", "numerical"])
    assert budget.exceeded(run_dir) is None
    mine = write_failed_block(run_dir, "b", "b2", ["out_of_memory"] * 2)
    assert budget.exceeded(run_dir) == (
        "max_failures reached: 4 of 2,578 cells failed (3 out_of_memory, 1 numerical); "
        "stopping. Fix and rerun the same command to resume."
    )
    assert budget.exceeded(run_dir, retried=mine) is None  # a block's retry still runs
    assert failures.FailureBudget(limit=None, n_cells=1).exceeded(run_dir) is None


def test_block_computes_nothing_once_the_budget_is_spent(tmp_path: Path) -> None:
    """The block refuses before contacting any cluster (the address is unreachable)."""
    plan = plan_run(load_config(build_tiny_config()))
    run_dir = tmp_path / "results" / "unit"
    failure_records.mark_run_started(run_dir)
    write_failed_block(run_dir, "grid", "other", ["numerical"])
    fragment = run_dir / "grid" / "fragments" / "next.npz"
    with pytest.raises(failures.MaxFailuresReached, match="max_failures reached"):
        blocks.run_block(
            plan.sweeps["grid"].cells.block_params(plan.seed),
            fragment,
            run_dir,
            {"mode": "address", "address": "tcp://127.0.0.1:9"},
            failure_budget=failures.FailureBudget(limit=1, n_cells=4),
        )
    assert not fragment.exists()
    assert not failure_records.failure_record_path(fragment).exists()


def test_budget_from_config_counts_the_runs_cells() -> None:
    config = load_config(build_tiny_config(execution={"max_failures": 0.5}))
    budget = failures.FailureBudget.from_config(config, plan_run(config))
    assert (budget.limit, budget.n_cells) == (2, 4)
