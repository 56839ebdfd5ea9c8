"""Synthetic ``cells.zarr``/``theory.zarr``-shaped datasets with planted answers.

Used by the analysis tests and for developing the analysis without running the simulator.
The spectra are deterministic quantiles of the bulk law (so the bulk KS distance is known to
be ``~1/(2n)``), and the outliers/overlaps follow the spike formulas (docs/model.md,
"Spikes") for a chosen planted ``theta(snr)`` plus Gaussian noise, so an estimator must
recover the planted thresholds.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from attnrmt.contract import AXES
from attnrmt.model import (
    causal_limit_weights,
    pooling_scalars,
    pooling_weights,
    positional_correlation,
)
from attnrmt.theory import (
    bulk_atom,
    bulk_cdf,
    bulk_edges,
    mean_spike,
    spike,
)


@functools.lru_cache(maxsize=64)
def bulk_quantiles(n: int, delta: float, gamma: float) -> np.ndarray:
    """``n`` mid-quantiles of ``MP_delta ⊠ MP_gamma`` (mean-1 units, ascending, atom as 0).

    Inverts :func:`attnrmt.theory.bulk_cdf` by bisection at ``(i - 1/2)/n``.
    """
    p = (np.arange(n) + 0.5) / n
    lower, upper = (float(e) for e in bulk_edges(delta, gamma))
    low = np.full(n, min(lower, 0.0) if lower > 0 else 0.0)
    high = np.full(n, upper)
    for _ in range(60):
        mid = 0.5 * (low + high)
        below = np.asarray(bulk_cdf(mid, delta, gamma)) < p
        low = np.where(below, mid, low)
        high = np.where(below, high, mid)
    out = 0.5 * (low + high)
    atom = float(bulk_atom(delta, gamma))
    out[p < atom] = 0.0
    return out


def make_synthetic(
    *,
    d: Sequence[int] = (200,),
    delta: Sequence[float] = (0.5,),
    gamma: Sequence[float] = (0.5,),
    T: Sequence[int] = (8,),
    positional: Mapping[str, Any] | None = None,
    weights: Mapping[str, Any] | None = None,
    snr: Sequence[float] = (0.0, 1.0, 2.0),
    centered: Sequence[bool] = (True,),
    replicates: int = 4,
    top_k: int = 3,
    variant: str = "finite_vocab",
    noise: float = 0.01,
    seed: int = 0,
) -> tuple[xr.Dataset, xr.Dataset]:
    """Contract-shaped ``(cells, theory)`` with the signal spike planted from ``variant``.

    Parameters
    ----------
    d, delta, gamma, T, snr, centered : sequences
        Axis values.
    positional, weights : mapping name -> spec
        Named models (defaults ``{"iid": {"kind": "iid"}}`` and ``{"mean": "mean"}``).
    replicates, top_k : int
    variant : {"paper", "finite_vocab"}
        Which theory variant
        (docs/model.md, "Two variants of the theory") generates the outliers and overlaps (the
        planted truth).
    noise : float
        Relative Gaussian noise on outliers and absolute noise on overlaps.
    seed : int

    Returns
    -------
    cells, theory : xarray.Dataset
        ``theory`` is :func:`attnrmt.analysis.comparison.theory_from_cells` of ``cells``
        (both variants, effective ratios).
    """
    from attnrmt.analysis.comparison import theory_from_cells

    positional = dict(positional or {"iid": {"kind": "iid"}})
    weights = dict(weights or {"mean": "mean"})
    rng = np.random.default_rng(seed)
    coords: dict[str, Any] = {
        "d": list(d),
        "delta": list(delta),
        "gamma": list(gamma),
        "T": list(T),
        "positional": list(positional),
        "weights": list(weights),
        "snr": list(snr),
        "centered": list(centered),
    }
    shape = tuple(len(coords[a]) for a in AXES)
    n_eig = max(d)
    eig = np.full((*shape, replicates, n_eig), np.nan)
    names_k = (
        "top_eigenvalues",
        "overlap_signal",
        "overlap_class_mean",
        "overlap_table_mean",
        "pop_top_eigenvalues",
        "pop_overlap_signal",
    )
    per_k = {name: np.full((*shape, replicates, top_k), np.nan) for name in names_k}
    scal = {name: np.full(shape, np.nan) for name in ("alpha", "kappa", "sigma", "V", "N")}
    max_t = max(T)
    eff_w = np.full((*shape, replicates, max_t), np.nan)
    accuracy = np.full((*shape, replicates), np.nan)
    seconds = np.full((*shape, replicates), 0.01)
    for index in np.ndindex(*shape):
        p = dict(zip(AXES, (coords[a][i] for a, i in zip(AXES, index, strict=True)), strict=True))
        dd, tt = int(p["d"]), int(p["T"])
        V = 2 * round(dd / (2 * p["delta"]))
        N = round(dd / p["gamma"])
        de, ge = dd / V, dd / N
        R = positional_correlation(positional[p["positional"]], tt)
        wspec = weights[p["weights"]]
        w = pooling_weights(wspec, tt, R)
        alpha, kappa, sigma = pooling_scalars(w, R)
        for name, value in zip(
            ("alpha", "kappa", "sigma", "V", "N"), (alpha, kappa, sigma, V, N), strict=True
        ):
            scal[name][index] = value
        pred = spike(de, ge, p["snr"], alpha, kappa, variant=variant)
        _lower, upper = (float(e) for e in bulk_edges(de, ge))
        bulk = kappa * bulk_quantiles(dd, float(de), float(ge))
        pop_edge = kappa * (1 + np.sqrt(de)) ** 2
        mean_pred = mean_spike(de, ge, sigma, kappa)
        for r in range(replicates):
            spectrum = bulk.copy()
            tops = [kappa * upper * (1 - 0.002 * j) for j in range(top_k)]
            pops = [pop_edge * (1 - 0.002 * j) for j in range(top_k)]
            ov = np.abs(rng.normal(0, 0.3 / dd, top_k))
            ovc = np.abs(rng.normal(0, 0.3 / dd, top_k))
            ovm = np.abs(rng.normal(0, 0.3 / dd, top_k))
            pov = np.abs(rng.normal(0, 0.3 / dd, top_k))
            spikes = []
            if np.isfinite(pred.sample_outlier):
                spikes.append(("signal", float(pred.sample_outlier)))
            if not p["centered"] and np.isfinite(mean_pred.sample_outlier):
                spikes.append(("mean", float(mean_pred.sample_outlier)))
            spikes.sort(key=lambda item: -item[1])
            for j, (kind, value) in enumerate(spikes[:top_k]):
                tops[j] = value * (1 + noise * rng.normal())
                if kind == "signal":
                    q = float(pred.sample_overlap)
                    ov[j] = np.clip(q + noise * rng.normal(), 0, 1)
                    scale = p["snr"] / (p["snr"] + de) if variant == "finite_vocab" else 1.0
                    ovc[j] = np.clip(q / max(scale, 1e-12) + noise * rng.normal(), 0, 1)
                else:
                    ovm[j] = np.clip(float(mean_pred.sample_overlap) + noise * rng.normal(), 0, 1)
            if np.isfinite(pred.population_outlier):
                pops[0] = float(pred.population_outlier) * (1 + noise * rng.normal())
                pov[0] = np.clip(float(pred.population_overlap) + noise * rng.normal(), 0, 1)
            tops_sorted = np.sort(np.asarray(tops))[::-1]
            order = np.argsort(-np.asarray(tops), kind="stable")
            spectrum[-top_k:] = tops_sorted[::-1]
            eig[(*index, r, slice(0, dd))] = np.sort(spectrum)
            per_k["top_eigenvalues"][(*index, r)] = tops_sorted
            per_k["overlap_signal"][(*index, r)] = ov[order]
            per_k["overlap_class_mean"][(*index, r)] = ovc[order]
            per_k["overlap_table_mean"][(*index, r)] = ovm[order]
            per_k["pop_top_eigenvalues"][(*index, r)] = pops
            per_k["pop_overlap_signal"][(*index, r)] = pov
            if isinstance(wspec, Mapping) and wspec.get("kind") == "causal_attention":
                limit = causal_limit_weights(tt, float(wspec.get("tau", 0.0)))
                jitter = rng.normal(0, 1.0 / np.sqrt(dd), tt) * limit
                eff_w[(*index, r, slice(0, tt))] = (limit + jitter) / (limit + jitter).sum()
            else:
                eff_w[(*index, r, slice(0, tt))] = w
            if positional[p["positional"]].get("kind") == "label":
                accuracy[(*index, r)] = (
                    0.5
                    + 0.45 * (1 - np.exp(-alpha / kappa * (0.2 + p["snr"])))
                    + rng.normal(0, 0.01)
                )
    dims = list(AXES)
    ds = xr.Dataset(
        {
            "eigenvalues": ([*dims, "replicate", "eig"], eig),
            **{name: ([*dims, "replicate", "k"], values) for name, values in per_k.items()},
            **{name: (dims, values) for name, values in scal.items()},
            "effective_weights": ([*dims, "replicate", "position"], eff_w),
            "downstream_accuracy": ([*dims, "replicate"], accuracy),
            "compute_seconds": ([*dims, "replicate"], seconds),
        },
        coords={
            **coords,
            "replicate": np.arange(replicates),
            "k": np.arange(top_k),
            "eig": np.arange(n_eig),
            "position": np.arange(max_t),
        },
        attrs={"synthetic_variant": variant},
    )
    from attnrmt.analysis.pipeline import objectify_strings

    return objectify_strings(ds), objectify_strings(theory_from_cells(ds))


__all__ = ["bulk_quantiles", "make_synthetic"]
