"""One Dask cluster per run, secured with per-run TLS credentials; the modes
(``dask.mode``: local, a batch system through dask-jobqueue, address, job) are described
in docs/cluster.md. Modules: settings, sizing, security, lifecycle (start, clients, stop,
signals), jobqueue and slurm (batch systems), blockwatch (unrunnable block jobs)."""

from attnrmt._lazy import lazy_door

#: Where each public name lives (imported on first use, PEP 562).
_EXPORTS = {
    "BlocksLeft": "attnrmt.sweep.compute.cluster.lifecycle",
    "ClusterSettings": "attnrmt.sweep.compute.cluster.settings",
    "MODES": "attnrmt.sweep.compute.cluster.settings",
    "RunStopped": "attnrmt.sweep.compute.cluster.lifecycle",
    "allocation_cores": "attnrmt.sweep.compute.cluster.sizing",
    "cancel_rate_limiter_wakeups": "attnrmt.sweep.compute.cluster.lifecycle",
    "cluster_dir": "attnrmt.sweep.compute.cluster.lifecycle",
    "connect": "attnrmt.sweep.compute.cluster.lifecycle",
    "dashboard_address": "attnrmt.sweep.compute.cluster.settings",
    "dashboard_link": "attnrmt.sweep.compute.cluster.lifecycle",
    "parse_walltime": "attnrmt.sweep.compute.cluster.sizing",
    "read_scheduler_file": "attnrmt.sweep.compute.cluster.lifecycle",
    "run_client": "attnrmt.sweep.compute.cluster.lifecycle",
    "run_stop_reason": "attnrmt.sweep.compute.cluster.lifecycle",
    "scheduler_file_path": "attnrmt.sweep.compute.cluster.lifecycle",
    "shutdown_run_cluster": "attnrmt.sweep.compute.cluster.lifecycle",
    "stop_on_signals": "attnrmt.sweep.compute.cluster.lifecycle",
    "stop_run": "attnrmt.sweep.compute.cluster.lifecycle",
    "usable_cores": "attnrmt.sweep.compute.cluster.sizing",
    "worker_layout": "attnrmt.sweep.compute.cluster.sizing",
    "worker_lifetime": "attnrmt.sweep.compute.cluster.sizing",
}

__getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

__all__ = sorted(_EXPORTS)
