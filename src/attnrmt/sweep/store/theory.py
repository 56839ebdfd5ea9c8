"""``theory.zarr``: theory predictions on a sweep's axes (``docs/data-contract.md``,
"theory.zarr"), computed by :func:`attnrmt.theory.predict_grid` from the config only."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from attnrmt.contract import TABLE_AXIS
from attnrmt.sweep.store.grid import (
    axis_coordinates,
    dataset_attrs,
    log_line,
    write_zarr_atomically,
)


def theory_dataset(sweep_plan: Any, root_seed: int) -> Any:
    """Theory predictions on a sweep's axes, both variants (``theory.zarr``,
    ``docs/data-contract.md``): an adapter over :func:`attnrmt.theory.predict_grid` at the
    realised sizes' effective ``delta`` and ``gamma``, weights' ``alpha``, ``kappa``,
    ``sigma`` (``docs/model.md``, "Spikes"). O(grid points)."""
    from attnrmt.contract import with_variable_attrs
    from attnrmt.theory import predict_grid

    if getattr(sweep_plan, "classes", None):  # K classes: per-spike theory
        return _classes_theory_dataset(sweep_plan, root_seed)
    grid = sweep_plan.grid  # the plan's specs per (name, T): no cell built (O(models))
    positional_specs, weights_specs = grid.positional_specs, grid.weights_specs
    predicted = predict_grid(
        axis_coordinates(sweep_plan.axes),
        positional_specs,
        weights_specs,
        table_laws=grid.table_specs,
    )
    out = with_variable_attrs(_text_as_object(predicted))
    out.attrs = {
        **dataset_attrs(sweep_plan, root_seed, "attnrmt theory predictions"),
        "ratios": (
            "effective delta = d/V, gamma = d/N with V = 2 round(d/(2 delta_nominal)), "
            "N = round(d/gamma_nominal); coordinates delta, gamma are the nominal values"
        ),
        "pooling_scalars": (
            "alpha, kappa, sigma of the deterministic weights; causal_attention uses its "
            "deterministic limit causal_limit(tau)"
        ),
    }
    return out


def _classes_theory_dataset(sweep_plan: Any, root_seed: int) -> Any:
    """``theory.zarr`` of a K-class sweep: :func:`attnrmt.theory.predict_classes_grid` on
    its axes, both variants, one entry per spike (docs/data-contract.md, "K-class
    sweeps"). O(grid points x variants x K^3)."""
    from attnrmt.theory import along_table_laws, predict_classes_grid

    grid = sweep_plan.grid
    spikes = int(sweep_plan.classes["spikes"])  # computed once by the plan
    axes = axis_coordinates(sweep_plan.axes)
    axes = {axis: values for axis, values in axes.items() if axis != TABLE_AXIS}
    inputs = (axes, grid.positional_specs, grid.weights_specs, spikes)
    predicted = predict_classes_grid(*inputs)
    if grid.table_specs is not None:  # a table axis: gaussian or file (classes.py)
        laws = grid.table_specs
        own = {
            n: predict_classes_grid(*inputs, law)
            for n, law in laws.items()
            if law["kind"] == "file"
        }
        predicted = along_table_laws(predicted, laws, own)
    out = _text_as_object(predicted)
    out.attrs = {
        **dataset_attrs(sweep_plan, root_seed, "attnrmt K-class theory predictions"),
        "no_theory": predicted.attrs.get("no_theory", ""),
        "ratios": (
            "effective delta = d/V, gamma = d/N with V = K round(d/(K delta_nominal)), "
            "N = round(d/gamma_nominal); coordinates delta, gamma are the nominal values"
        ),
    }
    return out


def _text_as_object(dataset: Any) -> Any:
    """Text coordinates as object arrays (Zarr v3 has no fixed-width string type)."""
    text = {
        n: dataset[n].values.astype(object) for n in dataset.coords if dataset[n].dtype.kind == "U"
    }
    return dataset.assign_coords(text)


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
