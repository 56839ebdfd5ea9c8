"""``attnrmt submit`` on the real single-node SLURM: the whole run as one batch job.

The command returns at once with a job id; a second submit while that job is queued or
running is refused; ``attnrmt status`` shows the driver job and, once it ended, 100 %;
the results open with ``attnrmt.open_results``; a submit after the job ended submits a new
one, which resumes (nothing is recomputed). A driver job told to stop (SIGTERM to its batch
shell, what ``--signal=B:TERM@...`` sends before the walltime) ends its run cleanly.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from attnrmt.sweep.compute.cluster.slurm import job_states
from tests.e2e.helpers import (
    DEFAULT_PROFILE,
    SNAKEFILE,
    Workdir,
    subprocess_environment,
    tiny_config,
    with_sweep,
)
from tests.e2e.test_slurm import cancel_on_exit, slurm  # noqa: F401  (fixture)

pytestmark = [pytest.mark.slurm, pytest.mark.e2e, pytest.mark.slow]

N_CELLS = 12  # tiny_config: 2 weights x 3 snr x 2 replicates
JOB_BOUND_SECONDS = 900
"""A driver job of the tiny run must have ended by then (it takes about a minute of a
quiet node; this only catches a hang)."""


def attnrmt(workdir: Workdir, *args: str) -> subprocess.CompletedProcess:
    """``attnrmt ARGS`` in the workdir (as a user's shell there)."""
    return subprocess.run(
        [sys.executable, "-m", "attnrmt.cli", *args],
        cwd=workdir.path,
        env=subprocess_environment(),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def submit(workdir: Workdir, cpus: int = 2) -> subprocess.CompletedProcess:
    """``attnrmt submit config.yaml`` of the repository's workflow, default profile (the
    cells run on a local Dask cluster inside the driver's ``cpus``-core allocation)."""
    return attnrmt(
        workdir,
        "submit",
        "config.yaml",
        "--snakefile",
        str(SNAKEFILE),
        "--profile",
        str(DEFAULT_PROFILE),
        "--cpus-per-task",
        str(cpus),
        "--time",
        "00:20:00",
    )


def submitted_job(completed: subprocess.CompletedProcess) -> str:
    """The job id ``attnrmt submit`` printed."""
    assert completed.returncode == 0, completed.stderr + completed.stdout
    first = completed.stdout.splitlines()[0]
    assert first.startswith("submitted driver job "), completed.stdout
    return first.split()[3]


def wait_until_gone(job_id: str) -> None:
    """Wait until squeue no longer lists the job as queued or alive."""
    deadline = time.monotonic() + JOB_BOUND_SECONDS
    while (state := job_states([job_id]).get(job_id)) is not None and state.active:
        assert time.monotonic() < deadline, f"driver job {job_id} still {state.state}"
        time.sleep(2)


def status(workdir: Workdir) -> dict[str, Any]:
    """``attnrmt status config.yaml --json``."""
    completed = attnrmt(workdir, "status", "config.yaml", "--json")
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_submit_runs_the_whole_run_as_one_job_and_refuses_a_second(
    slurm: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    workdir = Workdir.create(tmp_path / "work", tiny_config(run="submitted"))
    driver_dir = workdir.run_dir / "driver"
    with cancel_on_exit(set()) as job_ids:
        first = submit(workdir)
        job_id = submitted_job(first)
        job_ids.add(job_id)
        assert "attnrmt status config.yaml" in first.stdout and f"scancel {job_id}" in first.stdout

        again = submit(workdir)
        assert again.returncode == 1, again.stdout + again.stderr
        assert f"driver job {job_id} of run 'submitted' is " in again.stderr, again.stderr
        assert "follow it with `attnrmt status config.yaml`" in again.stderr

        seen = status(workdir)
        assert seen["driver"]["job_id"] == job_id, seen
        assert seen["driver"]["state"] in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING")
        assert seen["total"]["cells"] == N_CELLS

        wait_until_gone(job_id)
        log = (driver_dir / "driver.log").read_text()
        assert f"attnrmt driver: job {job_id}" in log
        # the end summary of `attnrmt run` (the config by its absolute path, as the job ran it)
        summary = f"run 'submitted' ({workdir.path / 'config.yaml'}): results in results/submitted/"
        assert summary in log, log[-4000:]
        final = status(workdir)
        assert final["total"]["done"] == N_CELLS and final["total"]["percent_done"] == 100.0
        assert final["driver"] == {**seen["driver"], "state": None}
        text = attnrmt(workdir, "status", "config.yaml").stdout
        assert f"driver job {job_id} (submitted " in text and "not in the queue" in text

        from attnrmt import open_results

        tree = open_results(workdir.run_dir)
        assert tree["grid/cells"].sizes["snr"] == 3
        assert (workdir.run_dir / "report.html").exists()
        # the driver's folder and files are private (the log may name hosts and paths)
        assert driver_dir.stat().st_mode & 0o777 == 0o700
        for name in ("driver.sbatch", "driver.log", "job.json"):
            assert (driver_dir / name).stat().st_mode & 0o777 == 0o600, name
        assert "\nexec " in (driver_dir / "driver.sbatch").read_text()

        resumed = submit(workdir)  # the job is gone: a new one, which finds all done
        second_id = submitted_job(resumed)
        job_ids.add(second_id)
        assert second_id != job_id
        wait_until_gone(second_id)
        log = (driver_dir / "driver.log").read_text()
        assert f"attnrmt driver: job {second_id}" in log
        assert "0 computed by this run" in log.split(f"attnrmt driver: job {second_id}")[1]


def test_a_driver_request_slurm_cannot_run_is_refused_at_once(
    slurm: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """More cores than the node has: SLURM's objection (``sbatch --test-only``), exit 2,
    nothing queued and no job record."""
    from tests.e2e.test_slurm import node_cores

    workdir = Workdir.create(tmp_path / "work", tiny_config(run="toobig"))
    refused = submit(workdir, cpus=node_cores() * 2)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "SLURM cannot run the driver job" in refused.stderr
    assert "Requested node configuration is not available" in refused.stderr
    assert not (workdir.run_dir / "driver" / "job.json").exists()


def test_driver_job_told_to_stop_ends_its_run_cleanly(
    slurm: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    """SIGTERM to the batch shell (``scancel --batch --signal=TERM``, as SLURM's
    ``--signal=B:TERM@...`` before the walltime) reaches the run through ``exec``: the run
    stops, the job ends, no Snakemake lock is left, and the next submit resumes."""
    config = with_sweep(
        tiny_config(run="stopped", execution={"block_size": 1}),
        d=[1200],
        snr=[0.25 * index for index in range(12)],
    )  # 48 cells of ~0.4 s (tests/e2e/test_status.py): the run lasts well past the signal
    workdir = Workdir.create(tmp_path / "work", config)
    with cancel_on_exit(set()) as job_ids:
        job_id = submitted_job(submit(workdir))
        job_ids.add(job_id)
        fragments = workdir.run_dir / "grid" / "fragments"
        deadline = time.monotonic() + JOB_BOUND_SECONDS
        while not (fragments.is_dir() and any(fragments.glob("*.npz"))):
            state = job_states([job_id]).get(job_id)
            assert state is not None and state.active, "the job ended before any block"
            assert time.monotonic() < deadline, "no block finished"
            time.sleep(0.5)
        subprocess.run(["scancel", "--batch", "--signal=TERM", job_id], check=True)
        wait_until_gone(job_id)
        log = (workdir.run_dir / "driver" / "driver.log").read_text()
        assert "stopping the run: SIGTERM received" in log, log[-4000:]
        locks = workdir.path / ".snakemake" / "locks"
        assert not locks.exists() or not list(locks.iterdir()), "stale lock left"
        stopped = status(workdir)["total"]
        assert 0 < stopped["done"] < stopped["cells"], stopped
