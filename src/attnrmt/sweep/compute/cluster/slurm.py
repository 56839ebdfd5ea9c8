"""SLURM specifics over :mod:`.jobqueue`: a dry run of a job script, the state and pending
reason of queued jobs (reasons that clear by waiting and reasons that never do), and
:class:`PendingWatch`, turning a request that can never run into one message (Dask worker
jobs, :mod:`.jobqueue`; Snakemake's SLURM block jobs, :mod:`.blockwatch`). One
``sbatch``/``squeue``/``sinfo`` process per call (O(jobs) output)."""

from __future__ import annotations

import functools
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Self

_COMMAND_TIMEOUT_SECONDS = 60
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
ACTIVE_STATES = (
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "REQUEUED",
    "REQUEUE_HOLD",
    "REQUEUE_FED",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
    "STOPPED",
)
"""squeue states of a job that is queued or still alive (squeue also lists ended jobs for
the cluster's MinJobAge, as COMPLETED, FAILED, CANCELLED, TIMEOUT, ...)."""
LOGGER = logging.getLogger("attnrmt.cluster")


def slurm_command(*args: str) -> subprocess.CompletedProcess[str]:
    """One SLURM command, output captured as text, never raising on its exit status; at most
    :data:`_COMMAND_TIMEOUT_SECONDS`."""
    return subprocess.run(
        list(args), capture_output=True, text=True, timeout=_COMMAND_TIMEOUT_SECONDS, check=False
    )


@dataclass(frozen=True)
class JobState:
    """One queued job as squeue reports it."""

    job_id: str
    state: str
    reason: str
    request: str = ""
    """What the job asked for in words (cores, memory, walltime, partition), when known."""

    @property
    def active(self) -> bool:
        """Whether the job is queued or alive (:data:`ACTIVE_STATES`)."""
        return self.state in ACTIVE_STATES


def dry_run_submission(job_script: str, directory: str | os.PathLike[str]) -> str | None:
    """``sbatch --test-only`` of a job script: SLURM's objection (a request no node can
    satisfy is refused at once), or None if it could run."""
    with tempfile.NamedTemporaryFile(
        "w", dir=directory, prefix=".test-job-", suffix=".sh", delete=False
    ) as handle:
        handle.write(job_script)
    try:
        done = slurm_command("sbatch", "--test-only", handle.name)
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
    done = slurm_command("squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%r")
    return parse_squeue(done.stdout) if done.returncode == 0 else {}


def known_nodes() -> set[str]:
    """Node names SLURM knows (``sinfo -N``)."""
    return set(slurm_command("sinfo", "-h", "-N", "-o", "%N").stdout.split())


def is_unsatisfiable(reason: str, nodes: set[str] | None = None) -> bool:
    """Whether a pending reason means the request can never run (``ReqNodeNotAvail`` only for
    nodes SLURM does not know; ``nodes``: :func:`known_nodes`, queried when needed)."""
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


# --------------------------------------------------------------------------- watch


class PendingWatch:
    """A thread watching the ``kind`` of SLURM jobs ``job_states()`` lists while a run lasts,
    one ``squeue`` every ``poll_seconds``: the first job pending for a reason that never
    clears calls ``on_fatal`` with ``describe(job)`` and ends the watch; queue-load waits
    are logged every ``report_seconds``."""

    def __init__(
        self,
        kind: str,
        job_states: Callable[[], Mapping[str, JobState]],
        describe: Callable[[JobState], str],
        on_fatal: Callable[[str], None],
        poll_seconds: float,
        report_seconds: float,
    ) -> None:
        self.kind, self.job_states, self.describe = kind, job_states, describe
        self.on_fatal, self.poll_seconds, self.report_seconds = (
            on_fatal,
            poll_seconds,
            report_seconds,
        )
        self.stopped = threading.Event()
        self.started = time.monotonic()
        self.thread = threading.Thread(target=self._watch, name="attnrmt-pending", daemon=True)

    def start(self) -> Self:
        """Start watching; returns self."""
        self.thread.start()
        return self

    def stop(self) -> None:
        """Stop watching (returns at once)."""
        self.stopped.set()

    def fatal_message(self, states: Mapping[str, JobState]) -> str | None:
        """The one message for a watched job that can never run, if there is one."""
        job = first_unsatisfiable(states)
        return None if job is None else self.describe(job)

    def report_pending(self, states: Mapping[str, JobState]) -> str | None:
        """Log (stderr) how many watched jobs wait, why, and for how long; the line."""
        pending = pending_summary(states)
        if not pending:
            return None
        minutes = (time.monotonic() - self.started) / 60
        reasons = ", ".join(f"{reason} x{count}" for reason, count in sorted(pending.items()))
        line = f"attnrmt: {sum(pending.values())} {self.kind} pending: {reasons}, {minutes:.0f} min"
        print(line, file=sys.stderr, flush=True)
        return line

    def _watch(self) -> None:
        last_report = time.monotonic()
        while not self.stopped.wait(self.poll_seconds):
            try:
                states = self.job_states()
                message = self.fatal_message(states)
            except Exception as exc:  # squeue unavailable for a moment: try again later
                LOGGER.debug("pending watch: %r", exc)
                continue
            if message is not None:
                self.on_fatal(message)
                return
            if time.monotonic() - last_report >= self.report_seconds:
                last_report = time.monotonic()
                self.report_pending(states)


def first_unsatisfiable(states: Mapping[str, JobState]) -> JobState | None:
    """The first pending job (by id) whose reason never clears, or ``None``."""
    for job_id in sorted(states, key=lambda text: (len(text), text)):
        job = states[job_id]
        if job.state == "PENDING" and is_unsatisfiable(job.reason):
            return job
    return None


#: Seconds before a SLURM job's end from which a failing block counts as ended by the
#: walltime (blocks stop a minute before, ``blocks.STOP_BEFORE_WALLTIME_SECONDS``).
WALLTIME_MARGIN_SECONDS = 300.0


def slurm_job_end_time(environ: Mapping[str, str] = os.environ) -> float | None:
    """End time (Unix seconds) of this process's SLURM job: ``SLURM_JOB_END_TIME``, else
    ``squeue`` once per job and process; None outside a job or when unknown."""
    if environ.get("SLURM_JOB_END_TIME", "").isdigit():
        return float(environ["SLURM_JOB_END_TIME"])
    job = environ.get("SLURM_JOB_ID")
    return _squeue_end_time(job) if job else None


@functools.lru_cache(maxsize=16)
def _squeue_end_time(job: str) -> float | None:
    try:
        return datetime.fromisoformat(
            slurm_command("squeue", "-h", "-j", job, "-o", "%e").stdout.strip()
        ).timestamp()
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def slurm_walltime_reached(end_time: float | None, now: float | None = None) -> bool:
    """Whether ``now`` is within :data:`WALLTIME_MARGIN_SECONDS` of (or past) ``end_time``
    (None: not in a SLURM job)."""
    current = time.time() if now is None else now
    return end_time is not None and current >= end_time - WALLTIME_MARGIN_SECONDS
