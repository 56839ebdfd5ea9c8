"""Fail fast for ``profiles/slurm`` (docs/cluster.md): Snakemake's SLURM executor never looks
at why a block job pends, so :class:`BlockJobWatch` (started by ``onstart``) polls
``squeue`` every :data:`POLL_SECONDS` for this run's jobs; one that can never run
(:func:`.slurm.is_unsatisfiable`) gets one message, a SIGTERM to this process and the
run's queued jobs cancelled. One ``squeue`` per poll (O(jobs))."""

from __future__ import annotations

import getpass
import os
import signal
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from attnrmt.sweep.compute.cluster import slurm

POLL_SECONDS = 15.0
"""How often the watch asks squeue about the run's block jobs."""
PENDING_REPORT_SECONDS = 60.0
"""How often a line is logged while block jobs wait for queue load."""
EXECUTOR_COMMENT_PREFIX = "rule_"
"""Start of the ``--comment`` snakemake-executor-plugin-slurm gives each job it submits."""
SQUEUE_FIELDS = ("%i", "%T", "%k", "%Z", "%C", "%m", "%l", "%P", "%r")
"""id, state, comment, working directory, cpus, memory, time limit, partition, reason
(reason last: it is free text)."""


def parse_block_jobs(text: str, workdir: str | os.PathLike[str]) -> dict[str, slurm.JobState]:
    """Jobs of the SLURM executor in ``workdir`` from ``squeue -o`` :data:`SQUEUE_FIELDS`
    output, by id; ``request`` reads ``rule=..., cores=..., memory=..., walltime=...,
    partition=...``. O(lines)."""
    wanted = Path(workdir).resolve()
    jobs = {}
    for line in text.splitlines():
        parts = line.strip().split("|", len(SQUEUE_FIELDS) - 1)
        if len(parts) != len(SQUEUE_FIELDS):
            continue
        job_id, state, comment, directory, cpus, memory, limit, partition, reason = parts
        if not comment.startswith(EXECUTOR_COMMENT_PREFIX) or Path(directory) != wanted:
            continue
        rule = comment[len(EXECUTOR_COMMENT_PREFIX) :].split("_wildcards_", 1)[0]
        request = (
            f"rule={rule}, cores={cpus}, memory={memory}, walltime={limit}, partition={partition}"
        )
        jobs[job_id] = slurm.JobState(job_id, state, reason, request)
    return jobs


def run_block_jobs(workdir: str | os.PathLike[str]) -> dict[str, slurm.JobState]:
    """This user's SLURM executor jobs in ``workdir`` that squeue lists (one ``squeue``)."""
    done = slurm.slurm_command(
        "squeue", "-h", "-u", getpass.getuser(), "-o", "|".join(SQUEUE_FIELDS)
    )
    if done.returncode != 0:
        raise RuntimeError(f"squeue failed ({done.returncode}): {done.stderr.strip()}")
    return parse_block_jobs(done.stdout, workdir)


def fatal_block_message(states: Mapping[str, slurm.JobState]) -> str | None:
    """The one message for a block job that can never run, or ``None``."""
    job = slurm.first_unsatisfiable(states)
    if job is None:
        return None
    return (
        f"SLURM will never run the job {job.job_id} of this run ({job.request}): pending "
        f"with reason {job.reason}. Edit default-resources / set-resources (slurm_partition, "
        "cpus_per_task, mem_mb, runtime) in your profile; rerun the same command to resume."
    )


def cancel_jobs(job_ids: list[str]) -> None:
    """``scancel`` these jobs (nothing when the list is empty)."""
    if job_ids:
        slurm.slurm_command("scancel", *job_ids)


def stop_this_run(message: str, workdir: str | os.PathLike[str]) -> None:
    """Say ``message``, SIGTERM this process (Snakemake stops scheduling; the run's stop
    path), then cancel the run's queued or running SLURM executor jobs."""
    from attnrmt.sweep.compute.cluster.lifecycle import say

    say(f"stopping the run: {message}")
    os.kill(os.getpid(), signal.SIGTERM)
    try:
        active = [job.job_id for job in run_block_jobs(workdir).values() if job.active]
    except (OSError, RuntimeError, subprocess.SubprocessError):
        active = []
    cancel_jobs(active)


class BlockJobWatch(slurm.PendingWatch):
    """Watch of the run's SLURM executor jobs (module docstring)."""

    kind = "block jobs"

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        on_fatal: Callable[[str], None] | None = None,
        poll_seconds: float = POLL_SECONDS,
    ) -> None:
        self.workdir = Path(workdir)
        super().__init__(
            on_fatal or (lambda message: stop_this_run(message, self.workdir)),
            poll_seconds,
            PENDING_REPORT_SECONDS,
        )

    def job_states(self) -> Mapping[str, slurm.JobState]:
        """The run's SLURM executor jobs squeue lists."""
        return run_block_jobs(self.workdir)

    def fatal_message(self, states: Mapping[str, slurm.JobState]) -> str | None:
        """:func:`fatal_block_message`."""
        return fatal_block_message(states)


def start_block_job_watch(workflow: Any) -> BlockJobWatch | None:
    """For the Snakefile's ``onstart``: watch the run's jobs when Snakemake's executor is
    ``slurm`` (``profiles/slurm``); ``None`` (no watch) for any other executor."""
    plugin = getattr(workflow, "executor_plugin", None)
    if plugin is None or getattr(plugin, "name", None) != "slurm":
        return None
    return BlockJobWatch(Path.cwd()).start()


__all__ = [
    "EXECUTOR_COMMENT_PREFIX",
    "PENDING_REPORT_SECONDS",
    "POLL_SECONDS",
    "SQUEUE_FIELDS",
    "BlockJobWatch",
    "cancel_jobs",
    "fatal_block_message",
    "parse_block_jobs",
    "run_block_jobs",
    "start_block_job_watch",
    "stop_this_run",
]
