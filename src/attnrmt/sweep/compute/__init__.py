"""How cells get computed.

Block jobs, worker tasks, failures, calibration, run locks and the Dask cluster."""

from attnrmt._lazy import lazy_door

#: Where each public name lives (imported on first use, PEP 562).
_EXPORTS: dict[str, str] = {}

__getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

__all__: list[str] = []
