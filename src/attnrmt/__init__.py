"""attnrmt: random-matrix theory of attention pooling.

Rooms (each a subpackage with a narrow public interface):

- :mod:`attnrmt.model`    — the exact generative model and one simulation cell.
- :mod:`attnrmt.theory`   — bulk law, spikes, thresholds (``paper`` and ``finite_vocab``).
- :mod:`attnrmt.sweep`    — config, planning, Dask cluster, Zarr stores.
- :mod:`attnrmt.analysis` — thresholds, comparisons, figures, report tables.
- :mod:`attnrmt.workflow` — the Snakemake workflow and its profiles (package data).

From Python: :func:`open_results` opens a run's results, :func:`run` runs a sweep
(docs/python-api.md). Both are imported on first use (PEP 562), so ``import attnrmt``
imports neither xarray nor Snakemake.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from attnrmt._lazy import lazy_door

try:
    __version__ = version("attnrmt")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

#: Where each public name lives (imported on first use, PEP 562).
_EXPORTS: dict[str, str] = {
    "open_results": "attnrmt.sweep.store",
    "run": "attnrmt.api",
}

__getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

__all__ = ["__version__", "open_results", "run"]
