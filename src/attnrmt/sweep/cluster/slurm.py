"""SLURM specifics over the generic job-queue code (:mod:`.jobqueue`): a dry run of the
worker job script before any job is queued, and the state and pending reason of queued
worker jobs, sorted into reasons that clear by waiting and reasons that never do.

All calls are one ``sbatch``/``squeue``/``sinfo`` process each (O(jobs) output).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

COMMAND_TIMEOUT_SECONDS = 60
UNSATISFIABLE_REASONS = (
    "PartitionConfig",
    "PartitionNodeLimit",
    "PartitionTimeLimit",
    "InvalidAccount",
    "InvalidQOS",
    "BadConstraints",
    "QOSMaxCpuPerJobLimit",
    "QOSMaxMemoryPerJob",
    "QOSMaxNodePerJobLimit",
    "QOSMaxWallDurationPerJobLimit",
    "AssocMaxCpuPerJobLimit",
    "AssocMaxNodesPerJobLimit",
    "AssocMaxWallDurationPerJobLimit",
    "DependencyNeverSatisfied",
)
"""squeue pending reasons no amount of waiting resolves (the request itself is wrong)."""
UNAVAILABLE_NODES = re.compile(r"UnavailableNodes:(\S*)")


@dataclass(frozen=True)
class JobState:
    """One queued job as squeue reports it."""

    job_id: str
    state: str
    reason: str


def dry_run_submission(job_script: str, directory: str | os.PathLike[str]) -> str | None:
    """``sbatch --test-only`` of a job script: SLURM's objection, or ``None`` if it could run.

    SLURM checks the request against the partitions and nodes it knows (cores, memory,
    walltime, partition, node names) without queuing anything; a request no node can
    satisfy gets "Requested node configuration is not available" at once, where a real
    submission would pend forever with reason PartitionConfig.
    """
    with tempfile.NamedTemporaryFile(
        "w", dir=directory, prefix=".test-job-", suffix=".sh", delete=False
    ) as handle:
        handle.write(job_script)
    try:
        done = subprocess.run(
            ["sbatch", "--test-only", handle.name],
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_SECONDS,
            check=False,
        )
    finally:
        Path(handle.name).unlink(missing_ok=True)
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
    return "; ".join(lines) or f"sbatch --test-only exited with {done.returncode}"


def parse_squeue(text: str) -> dict[str, JobState]:
    """Jobs of ``squeue -h -o '%i|%T|%r'`` output, by id."""
    jobs = {}
    for line in text.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) == 3:
            jobs[parts[0]] = JobState(job_id=parts[0], state=parts[1], reason=parts[2])
    return jobs


def job_states(job_ids: Iterable[str]) -> dict[str, JobState]:
    """State and reason of the given jobs (jobs squeue no longer lists are left out)."""
    ids = sorted({str(job_id) for job_id in job_ids if job_id})
    if not ids:
        return {}
    done = subprocess.run(
        ["squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%r"],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_SECONDS,
        check=False,
    )
    return parse_squeue(done.stdout) if done.returncode == 0 else {}


def known_nodes() -> set[str]:
    """Node names SLURM knows (``sinfo -N``)."""
    done = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N"],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_SECONDS,
        check=False,
    )
    return set(done.stdout.split())


def is_unsatisfiable(reason: str, nodes: set[str] | None = None) -> bool:
    """Whether a pending reason means the request can never run.

    ``ReqNodeNotAvail`` counts only when it names nodes SLURM does not know (a down or
    drained node may come back); ``nodes`` is :func:`known_nodes` (queried when needed).
    """
    if any(reason.startswith(name) for name in UNSATISFIABLE_REASONS):
        return True
    if reason.startswith("ReqNodeNotAvail"):
        named = UNAVAILABLE_NODES.search(reason)
        wanted = {name for name in (named.group(1) if named else "").split(",") if name}
        return bool(wanted - (known_nodes() if nodes is None else nodes))
    return False


def pending_summary(states: Mapping[str, JobState]) -> dict[str, int]:
    """Pending jobs counted by reason."""
    counts: dict[str, int] = {}
    for job in states.values():
        if job.state == "PENDING":
            counts[job.reason] = counts.get(job.reason, 0) + 1
    return counts
