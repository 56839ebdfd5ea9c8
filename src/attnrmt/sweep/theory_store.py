"""``theory.zarr``: theory predictions on a sweep's axes (moved unchanged from ``store.py``).

Depends on the config only (no cells). The integrator will switch
:func:`theory_dataset` to ``attnrmt.theory.predict``. See ``docs/model.md``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.contract import AXES, VARIANTS
from attnrmt.sweep.grid import (
    CELL_ATTRS,
    axis_coordinates,
    dataset_attrs,
    log_line,
    write_zarr_atomically,
)


def theory_dataset(sweep_plan: Any, root_seed: int) -> Any:
    """Theory predictions on a sweep's axes (no replicates), both variants (``theory.zarr``).

    Ratios are the *effective* ``delta = d/V`` and ``gamma = d/N`` of the realised sizes
    (:func:`attnrmt.model.realised_sizes`), so theory and simulation share them at finite
    d. ``alpha``, ``kappa``, ``sigma`` come from the deterministic weights
    (:func:`attnrmt.model.pooling_weights`; ``causal_attention`` uses its limit
    ``causal_limit(tau)``). Eigenvalue-like quantities are in units of S (times kappa).
    """
    import xarray as xr

    from attnrmt.model import (
        pooling_scalars,
        pooling_weights,
        positional_correlation,
        realised_sizes,
    )
    from attnrmt.theory import bulk_atom, bulk_edges, mean_spike, spike

    coords = axis_coordinates(sweep_plan.axes)
    positional_specs = {(c.positional, int(c.T)): c.positional_spec for c in sweep_plan.cells}
    weights_specs = {(c.weights, int(c.T)): c.weights_spec for c in sweep_plan.cells}
    shape = tuple(len(coords[axis]) for axis in AXES)

    def along(axis: str, values: np.ndarray) -> np.ndarray:
        view = [1] * len(AXES)
        view[AXES.index(axis)] = -1
        return np.broadcast_to(np.asarray(values).reshape(view), shape)

    # effective ratios on (d, delta, gamma)
    delta_eff = np.empty(shape[:3])
    gamma_eff = np.empty(shape[:3])
    for i, d in enumerate(coords["d"]):
        for j, delta in enumerate(coords["delta"]):
            for m, gamma in enumerate(coords["gamma"]):
                V, N = realised_sizes(int(d), float(delta), float(gamma))
                delta_eff[i, j, m] = d / V
                gamma_eff[i, j, m] = d / N
    # pooling scalars on (T, positional, weights)
    scalars = np.empty((*shape[3:6], 3))
    for i, T in enumerate(coords["T"]):
        for j, positional in enumerate(coords["positional"]):
            R = positional_correlation(positional_specs[(positional, int(T))], int(T))
            for m, weights_name in enumerate(coords["weights"]):
                w = pooling_weights(weights_specs[(weights_name, int(T))], int(T), R)
                scalars[i, j, m] = pooling_scalars(w, R)
    full = (*shape[:3], 1, 1, 1, 1, 1)
    delta = np.broadcast_to(delta_eff.reshape(full), shape)
    gamma = np.broadcast_to(gamma_eff.reshape(full), shape)
    mid = (1, 1, 1, *shape[3:6], 1, 1)
    alpha = np.broadcast_to(scalars[..., 0].reshape(mid), shape)
    kappa = np.broadcast_to(scalars[..., 1].reshape(mid), shape)
    sigma = np.broadcast_to(scalars[..., 2].reshape(mid), shape)
    snr = along("snr", coords["snr"].astype(np.float64))
    centered = along("centered", coords["centered"])

    lower, upper = bulk_edges(delta, gamma)
    atom = np.broadcast_to(bulk_atom(delta, gamma), shape)
    per_variant: dict[str, list[np.ndarray]] = {}
    for variant in VARIANTS:
        prediction = spike(delta, gamma, snr, alpha, kappa, variant=variant)
        fields = {
            "bulk_lower_edge": kappa * np.asarray(lower),
            "bulk_upper_edge": kappa * np.asarray(upper),
            "bulk_atom": atom,
            "pop_outlier": prediction.population_outlier,
            "sample_outlier": prediction.sample_outlier,
            "pop_overlap_signal": prediction.population_overlap,
            "sample_overlap_signal": prediction.sample_overlap,
            "threshold_snr_population": prediction.threshold_snr_population,
            "threshold_snr_sample": prediction.threshold_snr_sample,
            "theta": prediction.theta,
        }
        for name, values in fields.items():
            per_variant.setdefault(name, []).append(
                np.broadcast_to(np.asarray(values, dtype=np.float64), shape)
            )
    mean = mean_spike(delta, gamma, sigma, kappa)
    uncentred = ~centered

    def where_uncentred(values: Any) -> np.ndarray:
        return np.where(uncentred, np.broadcast_to(np.asarray(values, float), shape), np.nan)

    theory_attrs = {
        "bulk_lower_edge": {"long_name": "left edge of the bulk of S", "units": "S"},
        "bulk_upper_edge": {"long_name": "right edge of the bulk of S", "units": "S"},
        "bulk_atom": {"long_name": "mass of the bulk's atom at 0", "units": "1"},
        "pop_outlier": {
            "long_name": "population outlier of Sigma_E (NaN below threshold)",
            "units": "S",
        },
        "sample_outlier": {"long_name": "sample outlier of S (NaN below threshold)", "units": "S"},
        "pop_overlap_signal": {"long_name": "squared overlap of population eigvec with u"},
        "sample_overlap_signal": {"long_name": "squared overlap of sample eigvec with u"},
        "threshold_snr_population": {"long_name": "snr at the population BBP threshold"},
        "threshold_snr_sample": {"long_name": "snr at the sample BBP threshold"},
        "theta": {"long_name": "signal spike strength theta", "units": "kappa"},
        "alpha": {"long_name": "alpha = w^T R w of the deterministic weights", "units": "1"},
        "kappa": {"long_name": "kappa = ||w||^2 of the deterministic weights", "units": "1"},
        "sigma": {"long_name": "sigma = sum_t w_t of the deterministic weights", "units": "1"},
        "delta_effective": {"long_name": "effective ratio d/V", "units": "1"},
        "gamma_effective": {"long_name": "effective ratio d/N", "units": "1"},
        "mean_spike_outlier": {
            "long_name": "sample outlier of the uncentred mean spike (NaN where centred)",
            "units": "S",
        },
        "mean_spike_pop_outlier": {
            "long_name": "population outlier of the uncentred mean spike (NaN where centred)",
            "units": "S",
        },
        "mean_spike_overlap": {
            "long_name": "squared overlap of the sample eigvec with mbar (NaN where centred)"
        },
    }
    variant_dims = (*AXES, "variant")
    data_vars: dict[str, tuple[tuple[str, ...], np.ndarray]] = {
        name: (variant_dims, np.stack(values, axis=-1)) for name, values in per_variant.items()
    }
    data_vars.update(
        {
            "alpha": (AXES[3:6], scalars[..., 0]),
            "kappa": (AXES[3:6], scalars[..., 1]),
            "sigma": (AXES[3:6], scalars[..., 2]),
            "delta_effective": (AXES[:3], delta_eff),
            "gamma_effective": (AXES[:3], gamma_eff),
            "mean_spike_outlier": (AXES, where_uncentred(mean.sample_outlier)),
            "mean_spike_pop_outlier": (AXES, where_uncentred(mean.population_outlier)),
            "mean_spike_overlap": (AXES, where_uncentred(mean.sample_overlap)),
        }
    )
    return xr.Dataset(
        data_vars={
            name: xr.Variable(dims, values, attrs=theory_attrs.get(name, {}))
            for name, (dims, values) in data_vars.items()
        },
        coords={
            **{axis: (axis, values, CELL_ATTRS[axis]) for axis, values in coords.items()},
            "variant": ("variant", np.asarray(VARIANTS, dtype=object), CELL_ATTRS["variant"]),
        },
        attrs={
            **dataset_attrs(sweep_plan, root_seed, "attnrmt theory predictions"),
            "ratios": (
                "effective delta = d/V, gamma = d/N with V = 2 round(d/(2 delta_nominal)), "
                "N = round(d/gamma_nominal); coordinates delta, gamma are the nominal values"
            ),
            "pooling_scalars": (
                "alpha, kappa, sigma of the deterministic weights; causal_attention uses its "
                "deterministic limit causal_limit(tau)"
            ),
            "units": "eigenvalue-like quantities in units of S (kappa included)",
        },
    )


def write_theory(
    sweep_plan: Any,
    output_path: str | os.PathLike[str],
    root_seed: int,
    log_path: str | os.PathLike[str] | None = None,
) -> Path:
    """Compute and write a sweep's ``theory.zarr`` (rule ``theory``)."""
    started = time.perf_counter()
    target = write_zarr_atomically(theory_dataset(sweep_plan, root_seed), output_path)
    log_line(log_path, f"{target}: written in {time.perf_counter() - started:.2f} s")
    return target
