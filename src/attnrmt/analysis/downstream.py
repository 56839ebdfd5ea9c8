"""Downstream task: ridge readout accuracy of the label ``y`` by weights
(docs/model.md, "What the pipeline tests")."""

from __future__ import annotations

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from attnrmt.analysis._common import mean_ci, plain, ranked_names
from attnrmt.contract import ALL_AXES

GROUP = tuple(a for a in ALL_AXES if a != "weights")


def downstream_table(
    sweep: str, cells: xr.Dataset, *, level: float, n_boot: int, seed: int
) -> pd.DataFrame:
    """Replicate-mean ``downstream_accuracy`` with bootstrap CI and alpha/kappa per grid point.

    Only grid points with a finite accuracy (``label`` positional models) appear. ``level``,
    ``n_boot``, ``seed``: the CI's settings (:func:`attnrmt.analysis._common.mean_ci`).

    Returns
    -------
    pandas.DataFrame
        ``sweep``, axes, ``alpha_over_kappa``, ``accuracy``, ``ci_low``, ``ci_high``, ``n``.
    """
    if "downstream_accuracy" not in cells:
        return pd.DataFrame()
    acc = cells["downstream_accuracy"]
    dims = [a for a in ALL_AXES if a in acc.dims]
    acc = acc.transpose(*dims, "replicate")
    ratio = cells["alpha"] / cells["kappa"]
    if "replicate" in ratio.dims:
        ratio = ratio.mean("replicate")
    ratio = ratio.broadcast_like(acc.isel(replicate=0, drop=True)).transpose(*dims)
    rows = []
    for index in np.ndindex(*(acc.sizes[d] for d in dims)):
        values = acc.values[index]
        if not np.isfinite(values).any():
            continue
        point = {d: plain(acc[d].values[i]) for d, i in zip(dims, index, strict=True)}
        mean, low, high = mean_ci(values, level=level, n_boot=n_boot, seed=seed)
        rows.append(
            {
                "sweep": sweep,
                **point,
                "alpha_over_kappa": float(ratio.values[index]),
                "accuracy": mean,
                "ci_low": low,
                "ci_high": high,
                "n": int(np.isfinite(values).sum()),
            }
        )
    return pd.DataFrame(rows)


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x))
    # average ties
    for value in np.unique(x):
        tie = x == value
        ranks[tie] = ranks[tie].mean()
    return ranks


def spearman(x: ArrayLike, y: ArrayLike) -> float:
    """Spearman rank correlation (NaN with fewer than 2 points or a constant input)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[ok], ys[ok]
    if xs.size < 2:
        return float("nan")
    rx, ry = _ranks(xs), _ranks(ys)
    sx, sy = rx.std(), ry.std()
    if sx == 0 or sy == 0:
        return float("nan")
    return float(np.mean((rx - rx.mean()) * (ry - ry.mean())) / (sx * sy))


def downstream_ranking(table: pd.DataFrame) -> pd.DataFrame:
    """Per group (all axes but ``weights``): accuracy and alpha/kappa rankings of the weights
    (ties by name, so the config's order of the models does not show) and their Spearman
    correlation (1 = accuracy ordered exactly as alpha/kappa)."""
    if table.empty:
        return pd.DataFrame()
    group_cols = ["sweep", *[c for c in GROUP if c in table]]
    rows = []
    for key, frame in table.groupby(group_cols, sort=False, dropna=False):
        record = dict(zip(group_cols, key, strict=True))
        record["ranking_accuracy"] = ranked_names(frame.set_index("weights")["accuracy"])
        record["ranking_alpha_kappa"] = ranked_names(frame.set_index("weights")["alpha_over_kappa"])
        record["spearman"] = spearman(frame["alpha_over_kappa"], frame["accuracy"])
        rows.append(record)
    return pd.DataFrame(rows)


__all__ = [
    "GROUP",
    "downstream_ranking",
    "downstream_table",
    "spearman",
]
