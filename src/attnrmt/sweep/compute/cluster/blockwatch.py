"""Fail fast for ``profiles/slurm`` (docs/cluster.md): Snakemake's SLURM executor never looks
at why a block job pends, so :func:`block_job_watch` (started by ``onstart``) polls
``squeue`` every :data:`POLL_SECONDS` for this run's jobs; one that can never run
(:func:`.slurm.is_unsatisfiable`) gets one message, a SIGTERM to this process and the
run's queued jobs cancelled. One ``squeue`` per poll (O(jobs))."""

from __future__ import annotations

import getpass
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from attnrmt.sweep.compute.cluster import slurm

POLL_SECONDS = 15.0
"""How often the watch asks squeue about the run's block jobs."""
PENDING_REPORT_SECONDS = 60.0
"""How often a line is logged while block jobs wait for queue load."""
_EXECUTOR_COMMENT_PREFIX = "rule_"
"""Start of the ``--comment`` snakemake-executor-plugin-slurm gives each job it submits."""
_SQUEUE_FIELDS = ("%i", "%T", "%k", "%Z", "%C", "%m", "%l", "%P", "%r")
"""id, state, comment, working directory, cpus, memory, time limit, partition, reason
(reason last: it is free text)."""


def parse_block_jobs(text: str, workdir: str | os.PathLike[str]) -> dict[str, slurm.JobState]:
    """Jobs of the SLURM executor in ``workdir`` from ``squeue -o`` :data:`_SQUEUE_FIELDS`
    output, by id; ``request`` reads ``rule=..., cores=..., memory=..., walltime=...,
    partition=...``. O(lines)."""
    wanted = Path(workdir).resolve()
    jobs = {}
    for line in text.splitlines():
        parts = line.strip().split("|", len(_SQUEUE_FIELDS) - 1)
        if len(parts) != len(_SQUEUE_FIELDS):
            continue
        job_id, state, comment, directory, cpus, memory, limit, partition, reason = parts
        if not comment.startswith(_EXECUTOR_COMMENT_PREFIX) or Path(directory) != wanted:
            continue
        rule = comment[len(_EXECUTOR_COMMENT_PREFIX) :].split("_wildcards_", 1)[0]
        request = (
            f"rule={rule}, cores={cpus}, memory={memory}, walltime={limit}, partition={partition}"
        )
        jobs[job_id] = slurm.JobState(job_id, state, reason, request)
    return jobs


def _run_block_jobs(workdir: str | os.PathLike[str]) -> dict[str, slurm.JobState]:
    """This user's SLURM executor jobs in ``workdir`` that squeue lists (one ``squeue``)."""
    done = slurm.slurm_command(
        "squeue", "-h", "-u", getpass.getuser(), "-o", "|".join(_SQUEUE_FIELDS)
    )
    if done.returncode != 0:
        raise RuntimeError(f"squeue failed ({done.returncode}): {done.stderr.strip()}")
    return parse_block_jobs(done.stdout, workdir)


def _fatal_block_message(job: slurm.JobState) -> str:
    """The one message for a block job that can never run."""
    return (
        f"SLURM will never run the job {job.job_id} of this run ({job.request}): pending "
        f"with reason {job.reason}. Edit default-resources / set-resources (slurm_partition, "
        "cpus_per_task, mem_mb, runtime) in your profile; rerun the same command to resume."
    )


def _stop_this_run(message: str, workdir: str | os.PathLike[str]) -> None:
    """Say ``message``, SIGTERM this process (Snakemake stops scheduling; the run's stop
    path), then cancel the run's queued or running SLURM executor jobs."""
    from attnrmt.sweep.compute.cluster.lifecycle import say

    say(f"stopping the run: {message}")
    os.kill(os.getpid(), signal.SIGTERM)
    try:
        active = [job.job_id for job in _run_block_jobs(workdir).values() if job.active]
    except (OSError, RuntimeError, subprocess.SubprocessError):
        active = []
    if active:
        slurm.slurm_command("scancel", *active)


def block_job_watch(
    workdir: str | os.PathLike[str], on_fatal: Callable[[str], None] | None = None
) -> slurm.PendingWatch:
    """The watch of the run's SLURM executor jobs (module docstring); not started."""
    return slurm.PendingWatch(
        "block jobs",
        lambda: _run_block_jobs(workdir),
        _fatal_block_message,
        on_fatal or (lambda message: _stop_this_run(message, workdir)),
        POLL_SECONDS,
        PENDING_REPORT_SECONDS,
    )


def start_block_job_watch(workflow: Any) -> slurm.PendingWatch | None:
    """For the Snakefile's ``onstart``: watch the run's jobs when Snakemake's executor is
    ``slurm`` (``profiles/slurm``); ``None`` (no watch) for any other executor."""
    plugin = getattr(workflow, "executor_plugin", None)
    if plugin is None or getattr(plugin, "name", None) != "slurm":
        return None
    return block_job_watch(Path.cwd()).start()
