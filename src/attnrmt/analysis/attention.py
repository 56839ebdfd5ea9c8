"""Real causal attention against its two candidate limits (docs/model.md, "Weights", "What
the pipeline tests"): the measured mean effective weights of ``causal_attention(tau)``
cells, normalised to ``sum = 1``, against ``harmonic`` and ``causal_limit(tau)``
(:func:`reference_weights`) by relative distance, as a function of ``d``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from attnrmt.analysis._common import mean_ci, plain
from attnrmt.contract import ALL_AXES
from attnrmt.model import causal_limit_weights, harmonic_weights


def relative_distance(w: np.ndarray, reference: np.ndarray) -> float:
    """``||w/sum(w) - r/sum(r)|| / ||r/sum(r)||`` (scale-free distance of weight vectors)."""
    w = np.asarray(w, dtype=float)
    r = np.asarray(reference, dtype=float)
    w = w / w.sum()
    r = r / r.sum()
    return float(np.linalg.norm(w - r) / np.linalg.norm(r))


def reference_weights(T: int, tau: float) -> dict[str, np.ndarray]:
    """The two limits real attention is compared with, ``harmonic`` and
    ``causal_limit(tau)`` (docs/model.md, "Weights"), each (T,). O(T)."""
    return {"harmonic": harmonic_weights(T), "causal_limit": causal_limit_weights(T, tau)}


def attention_weight_models(weight_models: Mapping[str, Any]) -> dict[str, float]:
    """Names of ``causal_attention`` weight models mapped to their ``tau`` (default 0)."""
    out = {}
    for name, spec in (weight_models or {}).items():
        if isinstance(spec, Mapping) and spec.get("kind") == "causal_attention":
            out[str(name)] = float(spec.get("tau", 0.0))
    return out


def causal_weights_table(
    sweep: str,
    cells: xr.Dataset,
    weight_models: Mapping[str, Any],
    *,
    level: float,
    n_boot: int,
    seed: int,
) -> pd.DataFrame:
    """Distance of the measured attention weights to :func:`reference_weights` for the
    ``causal_attention`` entries of ``weight_models``: ``sweep``, axes, ``tau``,
    ``reference``, ``distance`` (replicate mean), ``ci_low``, ``ci_high``
    (:func:`attnrmt.analysis._common.mean_ci`); empty without such cells. O(points x n_boot
    x replicates)."""
    models = attention_weight_models(weight_models)
    present = [w for w in models if "weights" in cells.dims and w in cells["weights"].values]
    if not present or "effective_weights" not in cells:
        return pd.DataFrame()
    eff = cells["effective_weights"].sel(weights=present)
    dims = [a for a in ALL_AXES if a in eff.dims]
    eff = eff.transpose(*dims, "replicate", "position")
    rows = []
    for index in np.ndindex(*(eff.sizes[d] for d in dims)):
        point = {d: plain(eff[d].values[i]) for d, i in zip(dims, index, strict=True)}
        T = int(point.get("T", eff.sizes["position"]))
        tau = models[str(point["weights"])]
        block = eff.values[index][:, :T]
        for ref_name, ref in reference_weights(T, tau).items():
            dist = np.array(
                [relative_distance(w, ref) if np.all(np.isfinite(w)) else np.nan for w in block]
            )
            estimates = mean_ci(dist, level=level, n_boot=n_boot, seed=seed)
            row = {"sweep": sweep, **point, "tau": tau, "reference": ref_name}
            rows.append(
                {**row, **dict(zip(("distance", "ci_low", "ci_high"), estimates, strict=True))}
            )
    return pd.DataFrame(rows)


def causal_verdict(table: pd.DataFrame) -> pd.DataFrame:
    """Which reference real attention approaches: per (weights, T, tau) the distance at the
    largest ``d`` for each reference and its log-log slope in ``d`` (negative = converging).
    """
    if table.empty:
        return pd.DataFrame()
    rows = []
    keys = [c for c in ("sweep", "weights", "T", "tau", "reference") if c in table]
    for key, frame in table.groupby(keys):
        by_d = frame.groupby("d")["distance"].mean().dropna()  # d without a finished cell out
        if by_d.empty:
            continue
        slope = np.nan
        if by_d.size >= 2 and np.all(by_d.to_numpy() > 0):
            slope = float(
                np.polyfit(np.log(by_d.index.to_numpy(float)), np.log(by_d.to_numpy()), 1)[0]
            )
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "d_max": float(by_d.index.max()),
                "distance_at_d_max": float(by_d.iloc[-1]),
                "loglog_slope_in_d": slope,
            }
        )
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    group = [k for k in keys if k != "reference"]
    best = out.loc[out.groupby(group)["distance_at_d_max"].idxmin(), [*group, "reference"]]
    return out.merge(best.rename(columns={"reference": "closest_reference"}), on=group)
