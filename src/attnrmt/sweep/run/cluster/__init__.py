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

from attnrmt._lazy import lazy_door

#: Where each public name lives (imported on first use, PEP 562).
_EXPORTS = {
    "BlocksLeft": "attnrmt.sweep.run.cluster.lifecycle",
    "ClusterSettings": "attnrmt.sweep.run.cluster.settings",
    "MODES": "attnrmt.sweep.run.cluster.settings",
    "RunStopped": "attnrmt.sweep.run.cluster.lifecycle",
    "allocation_cores": "attnrmt.sweep.run.cluster.sizing",
    "cancel_rate_limiter_wakeups": "attnrmt.sweep.run.cluster.lifecycle",
    "cluster_dir": "attnrmt.sweep.run.cluster.lifecycle",
    "connect": "attnrmt.sweep.run.cluster.lifecycle",
    "dashboard_address": "attnrmt.sweep.run.cluster.settings",
    "dashboard_link": "attnrmt.sweep.run.cluster.lifecycle",
    "parse_walltime": "attnrmt.sweep.run.cluster.sizing",
    "read_scheduler_file": "attnrmt.sweep.run.cluster.lifecycle",
    "run_client": "attnrmt.sweep.run.cluster.lifecycle",
    "run_stop_reason": "attnrmt.sweep.run.cluster.lifecycle",
    "scheduler_file_path": "attnrmt.sweep.run.cluster.lifecycle",
    "shutdown_run_cluster": "attnrmt.sweep.run.cluster.lifecycle",
    "stop_on_signals": "attnrmt.sweep.run.cluster.lifecycle",
    "stop_run": "attnrmt.sweep.run.cluster.lifecycle",
    "usable_cores": "attnrmt.sweep.run.cluster.sizing",
    "worker_layout": "attnrmt.sweep.run.cluster.sizing",
    "worker_lifetime": "attnrmt.sweep.run.cluster.sizing",
}

__getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

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
