"""Dask workers as batch jobs through dask-jobqueue (SLURM, PBS, LSF, SGE, HTCondor, OAR;
docs/cluster.md). A profile's ``dask.jobqueue`` keys go to the cluster class of
``dask.mode``, the rest comes from dask-jobqueue's own configuration; attnrmt adds TLS
with the run's credentials, the dashboard on loopback, worker ``--lifetime`` below the
walltime and one BLAS thread per worker thread. On SLURM :func:`pending_watch` turns a
request that can never run into one message."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from attnrmt.sweep.compute.cluster import slurm
from attnrmt.sweep.compute.cluster.settings import ClusterSettings
from attnrmt.sweep.compute.cluster.sizing import (
    BLAS_THREAD_VARIABLES,
    parse_walltime,
    worker_lifetime,
)

LOGGER = logging.getLogger("attnrmt.cluster")

#: dask-jobqueue's cluster class of each batch system (``dask.mode``).
CLUSTER_CLASSES = {mode: f"{mode.upper()}Cluster" for mode in ("slurm", "pbs", "lsf", "sge", "oar")}
CLUSTER_CLASSES["htcondor"] = "HTCondorCluster"
PASSED_THROUGH = (
    "cores",
    "processes",
    "memory",
    "walltime",
    "queue",
    "account",
    "interface",
    "local_directory",
    "log_directory",
    "job_extra_directives",
    "death_timeout",
)
"""``dask.jobqueue`` keys handed to dask-jobqueue under the same name."""
POLL_SECONDS = 10.0
"""How often a :func:`pending_watch` asks the batch system about the worker jobs."""
PENDING_REPORT_SECONDS = 60.0
"""How often a :func:`pending_watch` logs a line while worker jobs wait in the queue."""


def site_setting(system: str, key: str) -> Any:
    """dask-jobqueue's configured value of ``jobqueue.<system>.<key>`` (``-`` spelling)."""
    import dask
    import dask_jobqueue  # noqa: F401  (registers jobqueue.yaml defaults)

    return dask.config.get(f"jobqueue.{system}.{key.replace('_', '-')}", default=None)


def cluster_kwargs(
    settings: ClusterSettings, security: Any, tls_dir: Path, log_directory: Path
) -> dict[str, Any]:
    """Keyword arguments of the dask-jobqueue cluster class: the profile's non-null keys, with
    ``walltime``, ``worker-extra-args``, ``job-script-prologue``, ``log-directory`` and
    ``scheduler-options`` extended (never replaced) from the site configuration."""
    system = settings.mode
    profile = settings.jobqueue
    kwargs: dict[str, Any] = {key: profile[key] for key in PASSED_THROUGH if key in profile}
    walltime = profile.get("walltime") or site_setting(system, "walltime")
    lifetime, stagger = worker_lifetime(parse_walltime(walltime))
    kwargs["worker_extra_args"] = [
        *(site_setting(system, "worker_extra_args") or []),
        "--lifetime",
        f"{lifetime}s",
        "--lifetime-stagger",
        f"{stagger}s",
    ]
    # dask-jobqueue gives each job's processes x threads = cores: one BLAS thread each
    kwargs["job_script_prologue"] = [
        *(profile.get("job_script_prologue") or site_setting(system, "job_script_prologue") or []),
        *(f"export {name}=1" for name in BLAS_THREAD_VARIABLES),
    ]
    if not (profile.get("log_directory") or site_setting(system, "log_directory")):
        kwargs["log_directory"] = str(log_directory)
    kwargs["scheduler_options"] = {
        **(site_setting(system, "scheduler_options") or {}),
        "dashboard_address": settings.dashboard or "127.0.0.1:0",
        "dashboard": settings.dashboard is not None,
    }
    if settings.idle_timeout is not None:
        kwargs["scheduler_options"]["idle_timeout"] = f"{settings.idle_timeout}s"
    kwargs["security"] = security
    kwargs["protocol"] = "tls://"
    kwargs["shared_temp_directory"] = str(tls_dir)
    kwargs["silence_logs"] = False  # INFO to .dask/cluster.log
    return kwargs


def describe_request(settings: ClusterSettings) -> str:
    """The worker-job request in words: cores, memory, walltime, queue (profile or site)."""
    parts = []
    for key in ("cores", "memory", "walltime", "queue", "account"):
        value = settings.jobqueue.get(key) or site_setting(settings.mode, key)
        if value is not None:
            parts.append(f"{'partition/queue' if key == 'queue' else key}={value}")
    return ", ".join(parts)


def new_jobqueue_cluster(settings: ClusterSettings, kwargs: Mapping[str, Any]) -> Any:
    """An instance of the dask-jobqueue cluster class of ``settings.mode``."""
    import dask_jobqueue

    cluster_class = getattr(dask_jobqueue, CLUSTER_CLASSES[settings.mode])
    return cluster_class(**kwargs)


def unsatisfiable_request(settings: ClusterSettings, cluster: Any, directory: Path) -> str | None:
    """Why SLURM can never run the worker job (``sbatch --test-only``), or None."""
    if settings.mode != "slurm":
        return None
    objection = slurm.dry_run_submission(cluster.job_script(), directory)
    if objection is None:
        return None
    return (
        f"SLURM cannot run the Dask worker jobs ({describe_request(settings)}): {objection}. "
        "Edit dask.jobqueue in your profile (or jobqueue.yaml)."
    )


def worker_job_ids(cluster: Any) -> list[str]:
    """Batch job ids of a dask-jobqueue cluster's current worker jobs."""
    jobs = list(cluster.workers.values())
    return [str(job.job_id) for job in jobs if getattr(job, "job_id", None)]


def pending_watch(
    settings: ClusterSettings, cluster: Any, on_fatal: Callable[[str], None]
) -> slurm.PendingWatch:
    """The :class:`.slurm.PendingWatch` of a SLURM cluster's worker jobs (:data:`POLL_SECONDS`,
    :data:`PENDING_REPORT_SECONDS`); not started."""
    return slurm.PendingWatch(
        "worker jobs",
        lambda: slurm.job_states(worker_job_ids(cluster)),
        lambda job: (
            f"SLURM will never run the Dask worker job {job.job_id} "
            f"({describe_request(settings)}): pending with reason {job.reason}. "
            "Edit dask.jobqueue in your profile (or jobqueue.yaml)."
        ),
        on_fatal,
        POLL_SECONDS,
        PENDING_REPORT_SECONDS,
    )
