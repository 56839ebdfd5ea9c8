"""The sweep machinery: config, plan, Dask cluster, blocks, Zarr stores.

Design in docs/architecture.md; what the stores hold in docs/data-contract.md.

Public here (light imports only; ``cluster``, ``blocks`` and ``store`` are imported from
their modules because they pull in Dask and Zarr):

- :func:`load_config`, :func:`validate_config`, :class:`ConfigError` — config + schema.
- :func:`plan_run`, :class:`RunPlan`, :class:`SweepPlan`, :class:`Cell`, :class:`Block`.
"""

from attnrmt._lazy import lazy_door

#: Where each public name lives (imported on first use, PEP 562).
_EXPORTS = {
    "AXES": "attnrmt.contract",
    "Block": "attnrmt.sweep.spec.plan",
    "Cell": "attnrmt.sweep.spec.plan",
    "ConfigError": "attnrmt.sweep.spec.config",
    "MODEL_VERSION": "attnrmt.sweep.spec.identity",
    "RunPlan": "attnrmt.sweep.spec.plan",
    "SweepPlan": "attnrmt.sweep.spec.plan",
    "validate_config": "attnrmt.sweep.spec.config",
    "ValidConfig": "attnrmt.sweep.spec.config",
    "load_config": "attnrmt.sweep.spec.config",
    "plan_run": "attnrmt.sweep.spec.plan",
}

__getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

__all__ = [
    "AXES",
    "MODEL_VERSION",
    "Block",
    "Cell",
    "ConfigError",
    "RunPlan",
    "SweepPlan",
    "ValidConfig",
    "load_config",
    "plan_run",
    "validate_config",
]
