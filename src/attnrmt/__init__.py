"""attnrmt: random-matrix theory of attention pooling.

Rooms (each a subpackage with a narrow public interface):

- :mod:`attnrmt.model`    — the exact generative model and one simulation cell.
- :mod:`attnrmt.theory`   — bulk law, spikes, thresholds (``paper`` and ``finite_vocab``).
- :mod:`attnrmt.sweep`    — config, planning, Dask cluster, Zarr stores.
- :mod:`attnrmt.analysis` — thresholds, comparisons, figures, report tables.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from os import PathLike
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import xarray

try:
    __version__ = version("attnrmt")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"


def open_results(run_dir: str | PathLike[str], squeeze: bool = False) -> xarray.DataTree:
    """Open ``results/<run>`` as an :class:`xarray.DataTree` (one group per sweep), lazily.

    ``squeeze=True`` drops dimensions of length one (kept as scalar coordinates); see
    :func:`attnrmt.sweep.table_reader.open_results`.
    """
    from attnrmt.sweep.table_reader import open_results as _open_results

    return _open_results(run_dir, squeeze=squeeze)


__all__ = ["__version__", "open_results"]
