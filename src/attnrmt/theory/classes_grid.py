"""K-class theory on a sweep's axes: the content of a K-class sweep's ``theory.zarr``
(docs/model.md, "K-class spikes", "K-class thresholds"; docs/data-contract.md, "K-class
sweeps").

Every grid point ``(d, delta, gamma, T, positional, weights, snr, centered)`` and variant
gets :func:`attnrmt.theory.classes.class_spikes` at the *effective* ratios of the realised
sizes (``V = K round(d/(K delta))``, ``N = round(d/gamma)``), so theory and simulation
share them at finite d; the pooled signal matrix ``B``, ``kappa`` and the weights come from
:func:`attnrmt.model.classes.class_theory_inputs` (``optimal`` at the point's ``snr`` and
effective ``delta``). A label model that is not balanced has no theory: NaN, with the
reason in the attribute ``no_theory``. O(grid points x variants x K^3 + thresholds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from attnrmt.contract import AXES, VARIANTS, with_variable_attrs

#: Per-spike variables of a K-class ``theory.zarr`` (dims ``(*AXES, variant, spike)``).
CLASS_THEORY_FIELDS: tuple[str, ...] = (
    "spike_theta",
    "spike_pop_outlier",
    "spike_sample_outlier",
    "spike_pop_eigenvalue",
    "spike_sample_eigenvalue",
    "spike_pop_overlap",
    "spike_sample_overlap",
    "spike_threshold_population",
    "spike_threshold_sample",
)


def _point(
    spec: Mapping[str, Any],
    weights: Mapping[str, Any],
    T: int,
    snr: float,
    centered: bool,
    delta: float,
    gamma: float,
    spikes: int,
) -> dict[str, np.ndarray]:
    """Both variants' per-spike predictions at one grid point, ``(variant, spike)`` each
    (NaN-padded beyond ``rank B``). Raises ValueError for unbalanced labels."""
    from attnrmt.model.classes import class_theory_inputs
    from attnrmt.theory.bulk import bulk_edges
    from attnrmt.theory.classes import class_spikes

    K = int(spec["K"])
    inputs = class_theory_inputs(spec["labels"], weights, T, K, spec["means"], snr, delta, centered)
    kappa = inputs["kappa"]
    upper = kappa * float(bulk_edges(delta, gamma)[1])
    pop_edge = kappa * (1.0 + np.sqrt(delta)) ** 2
    out = {name: np.full((len(VARIANTS), spikes), np.nan) for name in CLASS_THEORY_FIELDS}
    for row, variant in enumerate(VARIANTS):
        found = class_spikes(
            inputs["signal_matrix"], inputs["gram"], snr, delta, gamma, kappa, variant
        )
        r = min(spikes, found.theta.size)
        values = {
            "spike_theta": found.theta,
            "spike_pop_outlier": found.population_outlier,
            "spike_sample_outlier": found.sample_outlier,
            "spike_pop_eigenvalue": np.where(
                np.isfinite(found.population_outlier), found.population_outlier, pop_edge
            ),
            "spike_sample_eigenvalue": np.where(
                np.isfinite(found.sample_outlier), found.sample_outlier, upper
            ),
            "spike_pop_overlap": found.population_overlap,
            "spike_sample_overlap": found.sample_overlap,
            "spike_threshold_population": found.threshold_snr_population,
            "spike_threshold_sample": found.threshold_snr_sample,
        }
        for name, value in values.items():
            out[name][row, :r] = np.asarray(value, dtype=float)[:r]
    return out


def _file_point(
    law: Mapping[str, Any],
    spec: Mapping[str, Any],
    weights: Mapping[str, Any],
    T: int,
    snr: float,
    centered: bool,
    gamma: float,
    spikes: int,
) -> dict[str, np.ndarray]:
    """:func:`attnrmt.theory.classes.file_class_spikes` at one grid point, the same in both
    variants (the table is given: no finite-vocabulary correction to make); no ``theta`` and
    no population threshold (NaN: a given table has no population transition); the sample
    eigenvalue of a spike without outlier is the bulk edge ``sample_edge``; population
    overlaps on each spike's own direction (as the cells' ``spike_pop_overlap_*``), sample
    overlaps on the span of the spike directions (``finite_vocab``: the table's, ``paper``:
    the centred class means; the cells' ``overlap_class_mean``, ``overlap_signal``): at
    finite ``N`` close spikes' sample eigenvectors turn within that span."""
    from attnrmt.theory.classes import file_class_spikes

    found = file_class_spikes(law, spec["labels"], weights, T, snr, gamma, centered)
    out = {name: np.full((len(VARIANTS), spikes), np.nan) for name in CLASS_THEORY_FIELDS}
    r = min(spikes, found["population_outlier"].size)
    for name, key in (
        ("spike_pop_outlier", "population_outlier"), ("spike_pop_eigenvalue", "population_outlier"),
        ("spike_sample_outlier", "sample_outlier"), ("spike_sample_eigenvalue", "sample_outlier"),
        ("spike_pop_overlap", "population_overlap_spike"),
        ("spike_threshold_sample", "sample_threshold"),
    ):  # fmt: skip
        out[name][:, :r] = found[key][:r]
    for row, key in enumerate(("sample_overlap_signal", "sample_overlap")):  # VARIANTS' order
        out["spike_sample_overlap"][row, :r] = found[key][:r]
    below = np.isnan(out["spike_sample_eigenvalue"][:, :r])
    out["spike_sample_eigenvalue"][:, :r][below] = found["sample_edge"]
    return out


def predict_classes_grid(
    axes: Mapping[str, Sequence[Any]],
    positional: Mapping[tuple[str, int], Mapping[str, Any]],
    weights: Mapping[tuple[str, int], Mapping[str, Any]],
    spikes: int,
    table: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """K-class predictions on a sweep's axes (module docstring); of a ``file`` table law
    ``table`` (canonical spec) by :func:`_file_point` instead.

    Parameters
    ----------
    axes : mapping axis -> coordinate values
        Every axis of :data:`attnrmt.contract.AXES` (models by name).
    positional : mapping ``(name, T)`` -> K-class positional spec
        ``{"kind": "classes", "K", "means", "labels"}``
        (:func:`attnrmt.sweep.spec.classes.classes_spec`).
    weights : mapping ``(name, T)`` -> weights spec
    spikes : int >= 1
        Length of the ``spike`` dimension.

    Returns
    -------
    xarray.Dataset
        :data:`CLASS_THEORY_FIELDS` on ``(*AXES, variant, spike)``; ``delta_effective``,
        ``gamma_effective`` on ``(d, delta, gamma)``; attribute ``no_theory`` naming the
        label models without a theory (``""`` when none).
    """
    from attnrmt.model.classes import class_sizes

    sizes = [len(axes[axis]) for axis in AXES]
    shape = (*sizes, len(VARIANTS), spikes)
    data = {name: np.full(shape, np.nan) for name in CLASS_THEORY_FIELDS}
    ratios = np.full((*sizes[:3], 2), np.nan)
    refused: dict[str, str] = {}
    for index in np.ndindex(*sizes):
        point = {axis: axes[axis][i] for axis, i in zip(AXES, index, strict=True)}
        d, delta, gamma, T = point["d"], point["delta"], point["gamma"], point["T"]
        name, weight, snr, centered = (
            point[a] for a in ("positional", "weights", "snr", "centered")
        )
        spec = positional[(name, T)]
        V, N = class_sizes(int(d), float(delta), float(gamma), int(spec["K"]))
        delta_eff, gamma_eff = d / V, d / N
        ratios[index[:3]] = (delta_eff, gamma_eff)
        args = (weights[(weight, T)], int(T), float(snr), bool(centered))
        try:
            predicted = (
                _file_point(table, spec, *args, float(gamma), spikes)
                if table is not None
                else _point(spec, *args, delta_eff, gamma_eff, spikes)
            )
        except ValueError as error:
            refused.setdefault(str(name), str(error))
            continue
        for field, values in predicted.items():
            data[field][index] = values
    coords: dict[str, Any] = {axis: list(axes[axis]) for axis in AXES}
    coords.update(variant=list(VARIANTS), spike=np.arange(spikes))
    dims = (*AXES, "variant", "spike")
    out = xr.Dataset(
        {name: (dims, values) for name, values in data.items()},
        coords=coords,
    )
    out["delta_effective"] = (("d", "delta", "gamma"), ratios[..., 0])
    out["gamma_effective"] = (("d", "delta", "gamma"), ratios[..., 1])
    out.attrs["no_theory"] = "; ".join(f"{name}: {why}" for name, why in refused.items())
    return with_variable_attrs(out)
