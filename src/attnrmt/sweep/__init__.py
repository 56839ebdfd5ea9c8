"""The sweep machinery: config, plan, Dask cluster, blocks, Zarr stores.

Design in docs/architecture.md; what the stores hold in docs/data-contract.md.

Public here (light imports only; ``cluster``, ``blocks`` and ``store`` are imported from
their modules because they pull in Dask and Zarr):

- :func:`load_config`, :func:`check_config`, :class:`ConfigError` — config + schema.
- :func:`plan_run`, :class:`RunPlan`, :class:`SweepPlan`, :class:`Cell`, :class:`Block`.
"""

from attnrmt.contract import AXES
from attnrmt.sweep.config import ConfigError, check_config, load_config
from attnrmt.sweep.plan import MODEL_VERSION, Block, Cell, RunPlan, SweepPlan, plan_run

__all__ = [
    "AXES",
    "MODEL_VERSION",
    "Block",
    "Cell",
    "ConfigError",
    "RunPlan",
    "SweepPlan",
    "check_config",
    "load_config",
    "plan_run",
]
