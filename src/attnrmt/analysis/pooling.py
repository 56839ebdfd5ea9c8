"""Pooling strategies: alpha/kappa and measured recovery by weights
(docs/model.md, "Pooling scalars", "What the pipeline tests").

The theory
(docs/model.md, "Spikes") says only ``alpha/kappa = w^T R w / ||w||^2`` sets the signal spike,
so the ordering of weights by alpha/kappa should be the ordering of recovery (squared
overlap of the signal eigenvector with ``u``): ``optimal > causal > mean`` for early-signal
``R`` (prefix, label), possibly reversed for stationary ``R`` (markov).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import xarray as xr

from attnrmt.analysis._common import at_signal, mean_ci, plain, ranked_names
from attnrmt.contract import ALL_AXES

GROUP = tuple(a for a in ALL_AXES if a != "weights")


def pooling_table(
    sweep: str, cells: xr.Dataset, *, level: float, n_boot: int, seed: int
) -> pd.DataFrame:
    """alpha/kappa and recovery (mean overlap with ``u`` and bootstrap CI) per grid point.

    Parameters
    ----------
    sweep : str
    cells : xarray.Dataset
        Contract-shaped cells.
    level, n_boot, seed : float, int, int
        CI level, bootstrap resamples and seed of the recovery's CI
        (:func:`attnrmt.analysis._common.mean_ci`; the config's ``analysis:`` block).

    Returns
    -------
    pandas.DataFrame
        ``sweep``, axes, ``alpha_over_kappa``, ``recovery``, ``recovery_ci_low``,
        ``recovery_ci_high``, ``n``.
    """
    ratio = cells["alpha"] / cells["kappa"]
    if "replicate" in ratio.dims:
        ratio = ratio.mean("replicate")
    overlap = at_signal(cells, "overlap_signal").drop_vars("k", errors="ignore")
    dims = [a for a in ALL_AXES if a in overlap.dims]
    overlap = overlap.transpose(*dims, "replicate")
    ratio = ratio.broadcast_like(overlap.isel(replicate=0, drop=True)).transpose(*dims)
    rows = []
    for index in np.ndindex(*(overlap.sizes[d] for d in dims)):
        point = {d: plain(overlap[d].values[i]) for d, i in zip(dims, index, strict=True)}
        values = overlap.values[index]
        mean, low, high = mean_ci(values, level=level, n_boot=n_boot, seed=seed)
        rows.append(
            {
                "sweep": sweep,
                **point,
                "alpha_over_kappa": float(ratio.values[index]),
                "recovery": mean,
                "recovery_ci_low": low,
                "recovery_ci_high": high,
                "n": int(np.isfinite(values).sum()),
            }
        )
    return pd.DataFrame(rows)


def ordering_table(pooling: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """Does the expected order of weights hold, for alpha/kappa and for recovery?

    Parameters
    ----------
    pooling : pandas.DataFrame
        From :func:`pooling_table`.
    order : sequence of str
        Weight names in the claimed decreasing order (e.g. ``optimal, causal1, mean``);
        names absent from a group are skipped.

    Returns
    -------
    pandas.DataFrame
        One row per group (all axes but ``weights``): ``ranking_alpha_kappa`` and
        ``ranking_recovery`` (names by decreasing value, ``>``-joined, ties by name),
        ``order_holds_alpha_kappa``, ``order_holds_recovery`` (strict decrease along
        ``order``), ``order_resolved_recovery`` (adjacent CIs do not overlap).
    """
    group_cols = ["sweep", *[c for c in GROUP if c in pooling]]
    rows = []
    for key, frame in pooling.groupby(group_cols, sort=False, dropna=False):
        frame = frame.set_index("weights")
        present = [w for w in order if w in frame.index]
        record = dict(zip(group_cols, key if isinstance(key, tuple) else (key,), strict=True))
        for col, label in (("alpha_over_kappa", "alpha_kappa"), ("recovery", "recovery")):
            record[f"ranking_{label}"] = ranked_names(frame[col])
            vals = frame.loc[present, col].to_numpy(dtype=float)
            record[f"order_holds_{label}"] = (
                bool(np.all(np.diff(vals) < 0)) if len(present) >= 2 else None
            )
        lows = frame.loc[present, "recovery_ci_low"].to_numpy(dtype=float)
        highs = frame.loc[present, "recovery_ci_high"].to_numpy(dtype=float)
        record["order_resolved_recovery"] = (
            bool(np.all(lows[:-1] > highs[1:])) if len(present) >= 2 else None
        )
        record["order"] = " > ".join(present)
        rows.append(record)
    return pd.DataFrame(rows)


__all__ = [
    "GROUP",
    "ordering_table",
    "pooling_table",
]
