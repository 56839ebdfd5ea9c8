"""Sizing: how the cores of a machine or a job are split between Dask workers, threads and
BLAS, and when batch workers retire before their walltime. Pure functions, O(1)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

BLAS_THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def usable_cores() -> int:
    """Cores this process may use (CPU affinity, falling back to ``os.cpu_count``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def allocation_cores(environ: Mapping[str, str] | None = None) -> int:
    """Cores of the current SLURM allocation (``SLURM_CPUS_PER_TASK``) or the usable cores."""
    env = os.environ if environ is None else environ
    value = env.get("SLURM_CPUS_PER_TASK", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    return usable_cores()


@dataclass(frozen=True)
class WorkerLayout:
    """How a machine's cores are split: processes x threads x BLAS threads <= cores."""

    n_workers: int
    threads_per_worker: int
    blas_threads: int


def worker_layout(cores: int, n_workers: int | None, threads_per_worker: int) -> WorkerLayout:
    """Size workers so that ``n_workers * threads_per_worker * blas_threads <= cores``
    (``n_workers`` None: ``max(1, cores // threads_per_worker)``; BLAS threads at least 1)."""
    cores = max(1, int(cores))
    threads = max(1, int(threads_per_worker))
    workers = max(1, cores // threads) if n_workers is None else max(1, int(n_workers))
    blas = max(1, cores // (workers * threads))
    return WorkerLayout(n_workers=workers, threads_per_worker=threads, blas_threads=blas)


#: Dask's periodic housekeeping a sweep's cluster runs less often, ``{key: (Dask's default,
#: ours)}`` (docs/scaling.md, "Pipeline overhead"); the memory monitor is kept.
HOUSEKEEPING: dict[str, tuple[object, object]] = {
    "distributed.admin.tick.interval": ("20ms", "1s"),
    "distributed.admin.system-monitor.interval": ("500ms", "2s"),
    "distributed.worker.memory.monitor-interval": ("100ms", "500ms"),
    "distributed.worker.profile.enabled": (True, False),
}


def configure_worker_environment(blas_threads: int) -> None:
    """Make nanny-spawned workers start with ``blas_threads`` BLAS threads (Dask's
    ``pre-spawn-environ``) and run housekeeping less often (:data:`HOUSEKEEPING`, only where
    Dask's default is still set). O(1)."""
    import dask

    environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    environ.update({name: str(int(blas_threads)) for name in BLAS_THREAD_VARIABLES})
    # A cell allocates and frees arrays of tens of MB; trimming the heap after each free
    # (Dask's default threshold, 64 KiB) makes every cell fault its memory in again.
    environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    changes: dict[str, object] = {"distributed.nanny.pre-spawn-environ": environ}
    for key, (default, ours) in HOUSEKEEPING.items():
        if dask.config.get(key, default=default) == default:
            changes[key] = ours
    dask.config.set(changes)


def parse_walltime(walltime: str) -> int:
    """Seconds in a SLURM walltime (``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH[:MM[:SS]]``)."""
    days, _, clock = str(walltime).strip().rpartition("-")
    parts = [int(part) for part in clock.split(":")]
    if days:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = parts + [0] * (3 - len(parts))
    else:  # MM, MM:SS, HH:MM:SS
        hours, minutes, seconds = parts if len(parts) == 3 else [0, *parts, 0][:3]
    return ((int(days or 0) * 24 + hours) * 60 + minutes) * 60 + seconds


def worker_lifetime(walltime_seconds: int) -> tuple[int, int]:
    """Worker ``--lifetime`` and ``--lifetime-stagger`` (seconds) for a SLURM walltime: retire
    with a margin of 10% (2 to 15 min) plus a stagger of 5% (at most 5 min)."""
    margin = min(max(120, walltime_seconds // 10), 900)
    stagger = min(walltime_seconds // 20, 300)
    lifetime = max(60, walltime_seconds - margin - stagger)
    return lifetime, stagger
