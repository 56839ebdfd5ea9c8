"""One Dask cluster per run, secured with per-run TLS credentials (docs/cluster.md).

Modes (config ``dask.mode``; site settings come from Snakemake profiles):

``local`` (default)
    A :class:`distributed.LocalCluster` of worker processes sized to the machine, living in
    the Snakemake process (:mod:`.lifecycle`); everything listens on 127.0.0.1.
``slurm``, ``pbs``, ``lsf``, ``sge``, ``htcondor``, ``oar``
    The dask-jobqueue cluster of that batch system (:mod:`.jobqueue`; SLURM specifics in
    :mod:`.slurm`): ``dask.jobqueue.n_workers`` worker jobs that retire before their
    walltime and are replaced; the scheduler listens on the site's ``interface``.
``address``
    Connect to a scheduler the user runs; TLS settings from the user's Dask configuration.
``job``
    An in-process LocalCluster sized to the job's allocation (``SLURM_CPUS_PER_TASK``),
    for Snakemake's SLURM executor, where each block is its own job.

Modules: :mod:`.settings` (the ``dask:`` block), :mod:`.sizing` (cores, BLAS threads,
walltimes), :mod:`.security` (credentials), :mod:`.lifecycle` (start, clients, stop,
signals), :mod:`.jobqueue` and :mod:`.slurm` (batch systems), :mod:`.blockwatch` (the
block jobs of Snakemake's SLURM executor that SLURM can never run stop the run).
"""

from attnrmt.sweep.cluster.lifecycle import (
    BlocksLeft,
    RunStopped,
    cancel_rate_limiter_wakeups,
    cluster_dir,
    connect,
    dashboard_link,
    read_scheduler_file,
    run_client,
    run_stop_reason,
    scheduler_file_path,
    shutdown_run_cluster,
    stop_on_signals,
    stop_run,
)
from attnrmt.sweep.cluster.settings import MODES, ClusterSettings, dashboard_address
from attnrmt.sweep.cluster.sizing import (
    allocation_cores,
    parse_walltime,
    usable_cores,
    worker_layout,
    worker_lifetime,
)

__all__ = [
    "MODES",
    "BlocksLeft",
    "ClusterSettings",
    "RunStopped",
    "allocation_cores",
    "cancel_rate_limiter_wakeups",
    "cluster_dir",
    "connect",
    "dashboard_address",
    "dashboard_link",
    "parse_walltime",
    "read_scheduler_file",
    "run_client",
    "run_stop_reason",
    "scheduler_file_path",
    "shutdown_run_cluster",
    "stop_on_signals",
    "stop_run",
    "usable_cores",
    "worker_layout",
    "worker_lifetime",
]
