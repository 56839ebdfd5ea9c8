"""The ``dask:`` block of a config as validated settings (defaults: the config schema only;
worker-job settings a profile leaves unset: dask-jobqueue's configuration)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_JOBQUEUE_SYSTEMS = ("slurm", "pbs", "lsf", "sge", "htcondor", "oar")
"""Batch systems whose workers dask-jobqueue submits as jobs (``dask.mode`` values)."""
MODES = ("local", "address", "job", *_JOBQUEUE_SYSTEMS)
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ClusterSettings:
    """Validated Dask settings of a run (the config's ``dask:`` block, described in the
    schema), the dashboard as a bind address, ``max_cores`` (Snakemake's ``--cores``) and
    ``jobqueue`` without its null values."""

    mode: str
    n_workers: int | None
    threads_per_worker: int
    task_retries: int
    address: str | None = None
    scheduler_file: str | None = None
    memory_limit: str | None = None
    local_directory: str | None = None
    dashboard: str | None = None
    idle_timeout: float | None = None
    max_cores: int | None = None
    jobqueue: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(
        cls, dask_config: Mapping[str, Any] | None, max_cores: int | None = None
    ) -> ClusterSettings:
        """Settings of a ``dask:`` block (a partial one gets the schema's defaults); ValueError for
        an unknown mode. O(keys)."""
        cfg = dict(dask_config or {})
        keys = {name.name for name in dataclasses.fields(cls)} - {"max_cores"}
        if not keys <= cfg.keys() or "n_workers" not in (cfg.get("jobqueue") or {}):
            defaults = schema_defaults()
            jobqueue = {**defaults["jobqueue"], **dict(cfg.get("jobqueue") or {})}
            cfg = {**defaults, **cfg, "jobqueue": jobqueue}
        mode = str(cfg["mode"])
        if mode not in MODES:
            raise ValueError(f"dask.mode must be one of {MODES}, got {mode!r}")
        return cls(
            mode=mode,
            n_workers=None if cfg["n_workers"] is None else int(cfg["n_workers"]),
            threads_per_worker=int(cfg["threads_per_worker"]),
            task_retries=int(cfg["task_retries"]),
            **{k: cfg.get(k) or None for k in ("address", "scheduler_file", "memory_limit")},
            local_directory=cfg.get("local_directory") or None,
            dashboard=dashboard_address(cfg.get("dashboard", False)),
            idle_timeout=None if cfg.get("idle_timeout") is None else float(cfg["idle_timeout"]),
            max_cores=None if not max_cores else max(1, int(max_cores)),
            jobqueue={
                key: value
                for key, value in dict(cfg.get("jobqueue") or {}).items()
                if value is not None and value != []
            },
        )

    @property
    def is_jobqueue(self) -> bool:
        """Whether workers are batch jobs submitted by dask-jobqueue."""
        return self.mode in _JOBQUEUE_SYSTEMS


def schema_defaults() -> dict[str, Any]:
    """Defaults of the ``dask:`` block (:func:`attnrmt.sweep.spec.schema.schema_default`)."""
    from attnrmt.sweep.spec.schema import schema_default

    return dict(schema_default("dask"))


def dashboard_address(setting: bool | str | int | None) -> str | None:
    """``dask.dashboard`` as a bind address (None: off): ``True`` a free loopback port, an int a
    loopback port, a string as given (``:port`` on loopback). O(1)."""
    if isinstance(setting, str):  # as written on a command line
        text = setting.strip()
        if text.lower() in ("", "false", "no", "off", "none", "null"):
            return None
        if text.lower() in ("true", "yes", "on"):
            setting = True
        elif text.isdigit():
            setting = int(text)
        else:
            return f"{LOOPBACK}{text}" if text.startswith(":") else text
    if setting is None or setting is False:
        return None
    if setting is True:
        return f"{LOOPBACK}:0"
    return f"{LOOPBACK}:{int(setting)}"
