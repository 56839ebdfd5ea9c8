"""Centring: the uncentred mean spike and what centring changes
(docs/model.md, "Spikes", "What the pipeline tests").

Uncentred ``S`` carries an extra spike ``sigma^2 mbar mbar^T`` with
``theta_mean = sigma^2 delta / kappa`` (:func:`attnrmt.theory.mean_spike`); it can outrank
the signal so that the top eigenvector of uncentred ``S`` is the table-mean direction
(``overlap_table_mean`` at ``k = 0``), and the signal moves to ``k = 1``.
"""

from __future__ import annotations

import pandas as pd
import xarray as xr

from attnrmt.analysis._common import drop_variant
from attnrmt.contract import ALL_AXES


def centring_table(sweep: str, cells: xr.Dataset, theory: xr.Dataset) -> pd.DataFrame:
    """Centred versus uncentred cells at every other grid point (docs/model.md, "Spikes"):
    per (axes but ``centered``) ``top_eigenvalue_uncentred``, ``mean_spike_theory``,
    ``top_overlap_table_mean_uncentred`` (top eigenvector with ``mbar``),
    ``mean_spike_overlap_theory`` (from the completed ``theory``,
    :func:`attnrmt.analysis.comparison.complete_theory`), ``top_overlap_signal_centred`` /
    ``_uncentred`` (k = 0), ``best_overlap_signal_uncentred`` (max over k),
    ``signal_k_uncentred`` (modal k of the signal eigenvector), ``top_is_mean_fraction``
    (replicates whose top eigenvector is closer to ``mbar`` than to ``u``). Empty unless
    both centred and uncentred cells exist. O(cells).
    """
    if "centered" not in cells.dims or cells.sizes["centered"] < 2:
        return pd.DataFrame()
    cen = cells.sel(centered=True, drop=True)
    unc = cells.sel(centered=False, drop=True)
    data = xr.Dataset(
        {
            "top_eigenvalue_uncentred": unc["top_eigenvalues"].isel(k=0).mean("replicate"),
            "top_eigenvalue_centred": cen["top_eigenvalues"].isel(k=0).mean("replicate"),
            "top_overlap_table_mean_uncentred": unc["overlap_table_mean"]
            .isel(k=0)
            .mean("replicate"),
            "top_overlap_signal_centred": cen["overlap_signal"].isel(k=0).mean("replicate"),
            "top_overlap_signal_uncentred": unc["overlap_signal"].isel(k=0).mean("replicate"),
            "best_overlap_signal_uncentred": unc["overlap_signal"].max("k").mean("replicate"),
            "signal_k_uncentred": unc["overlap_signal"].fillna(-1).argmax("k").median("replicate"),
            "top_is_mean_fraction": (
                unc["overlap_table_mean"].isel(k=0) > unc["overlap_signal"].isel(k=0)
            ).mean("replicate"),
            "mean_spike_theory": drop_variant(theory["mean_spike_outlier"]).sel(
                centered=False, drop=True
            ),
            "mean_spike_overlap_theory": drop_variant(theory["mean_spike_overlap"]).sel(
                centered=False, drop=True
            ),
        }
    )
    data = data.drop_vars([c for c in data.coords if c not in data.dims])
    frame = data.to_dataframe().reset_index()
    frame.insert(0, "sweep", sweep)
    cols = [
        "sweep",
        *[a for a in ALL_AXES if a in frame],
        *[c for c in frame if c not in ALL_AXES and c != "sweep"],
    ]
    return frame.loc[:, cols]


__all__ = [
    "centring_table",
]
