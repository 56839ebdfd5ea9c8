"""Pooling strategies by weights: alpha/kappa, measured recovery and the downstream
readout's accuracy (docs/model.md, "Pooling scalars", "What the pipeline tests"): only
``alpha/kappa`` sets the signal spike, so it should order recovery and the readout too."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr
from numpy.typing import ArrayLike

from attnrmt.analysis._common import at_signal, mean_ci, plain, ranked_names
from attnrmt.contract import ALL_AXES

GROUP = tuple(a for a in ALL_AXES if a != "weights")


def _point_rows(
    sweep: str,
    cells: xr.Dataset,
    values: xr.DataArray,
    names: tuple[str, str, str],
    *,
    skip_empty: bool,
    **ci: Any,
) -> pd.DataFrame:
    """One row per grid point (with a finite value, if ``skip_empty``): ``sweep``, the axes,
    ``alpha_over_kappa`` (replicate mean) and the replicate mean of ``values`` with its
    bootstrap CI (:func:`attnrmt.analysis._common.mean_ci` with ``ci``) under ``names``, and ``n``.
    O(points x n_boot x replicates)."""
    ratio = cells["alpha"] / cells["kappa"]
    if "replicate" in ratio.dims:
        ratio = ratio.mean("replicate")
    dims = [a for a in ALL_AXES if a in values.dims]
    values = values.transpose(*dims, "replicate")
    ratio = ratio.broadcast_like(values.isel(replicate=0, drop=True)).transpose(*dims)
    rows = []
    for index in np.ndindex(*(values.sizes[d] for d in dims)):
        point_values = values.values[index]
        if skip_empty and not np.isfinite(point_values).any():
            continue
        point = {d: plain(values[d].values[i]) for d, i in zip(dims, index, strict=True)}
        estimates = mean_ci(point_values, **ci)
        rows.append(
            {
                "sweep": sweep,
                **point,
                "alpha_over_kappa": float(ratio.values[index]),
                **dict(zip(names, estimates, strict=True)),
                "n": int(np.isfinite(point_values).sum()),
            }
        )
    return pd.DataFrame(rows)


def pooling_table(
    sweep: str, cells: xr.Dataset, *, level: float, n_boot: int, seed: int
) -> pd.DataFrame:
    """alpha/kappa and recovery (replicate-mean overlap of the signal eigenvector with
    ``u``, bootstrap CI with the config's ``level``, ``n_boot``, ``seed``) per grid point:
    ``sweep``, axes, ``alpha_over_kappa``, ``recovery``, ``recovery_ci_low``,
    ``recovery_ci_high``, ``n``."""
    overlap = at_signal(cells, "overlap_signal").drop_vars("k", errors="ignore")
    names = ("recovery", "recovery_ci_low", "recovery_ci_high")
    return _point_rows(
        sweep, cells, overlap, names, skip_empty=False, level=level, n_boot=n_boot, seed=seed
    )


def downstream_table(
    sweep: str, cells: xr.Dataset, *, level: float, n_boot: int, seed: int
) -> pd.DataFrame:
    """Replicate-mean ``downstream_accuracy`` with bootstrap CI and alpha/kappa per grid
    point with a finite accuracy (``label`` positional models): ``sweep``, axes,
    ``alpha_over_kappa``, ``accuracy``, ``ci_low``, ``ci_high``, ``n``."""
    if "downstream_accuracy" not in cells:
        return pd.DataFrame()
    accuracy = cells["downstream_accuracy"]
    names = ("accuracy", "ci_low", "ci_high")
    return _point_rows(
        sweep, cells, accuracy, names, skip_empty=True, level=level, n_boot=n_boot, seed=seed
    )


def ordering_table(pooling: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """Does the claimed decreasing ``order`` of weights (names absent from a group skipped)
    hold in ``pooling`` (:func:`pooling_table`), for alpha/kappa and for recovery? One row per
    group (all axes but ``weights``): ``ranking_alpha_kappa``, ``ranking_recovery`` (names by
    decreasing value, ``>``-joined, ties by name), ``order_holds_alpha_kappa``,
    ``order_holds_recovery`` (strict decrease), ``order_resolved_recovery`` (adjacent CIs
    apart). O(rows)."""
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
