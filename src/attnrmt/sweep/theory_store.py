"""``theory.zarr``: theory predictions on a sweep's axes (``docs/data-contract.md``,
"theory.zarr"), computed by :func:`attnrmt.theory.predict_grid`.

Depends on the config only (no cells).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from attnrmt.sweep.grid import (
    axis_coordinates,
    dataset_attrs,
    log_line,
    write_zarr_atomically,
)


def theory_dataset(sweep_plan: Any, root_seed: int) -> Any:
    """Theory predictions on a sweep's axes, both variants (``theory.zarr``): a thin adapter
    over :func:`attnrmt.theory.predict_grid` (the one theory engine; ``docs/model.md``,
    "Spikes", and ``docs/data-contract.md``, "theory.zarr").

    Ratios are the *effective* ``delta = d/V`` and ``gamma = d/N`` of the realised sizes,
    so theory and simulation share them at finite d; ``alpha``, ``kappa``, ``sigma`` come
    from the deterministic weights (``causal_attention`` uses ``causal_limit(tau)``).
    Eigenvalue-like quantities are in units of S (kappa included). O(grid points).
    """
    from attnrmt.contract import with_variable_attrs
    from attnrmt.theory import predict_grid

    grid = getattr(sweep_plan, "grid", None)
    if grid is not None:  # the plan's specs per (name, T): no cell built (O(models))
        positional_specs, weights_specs = grid.positional_specs, grid.weights_specs
    else:
        positional_specs = {(c.positional, int(c.T)): c.positional_spec for c in sweep_plan.cells}
        weights_specs = {(c.weights, int(c.T)): c.weights_spec for c in sweep_plan.cells}
    predicted = predict_grid(axis_coordinates(sweep_plan.axes), positional_specs, weights_specs)
    # Text coordinates as object arrays: Zarr v3 has no specified fixed-width string type.
    text = {
        name: predicted[name].values.astype(object)
        for name in predicted.coords
        if predicted[name].dtype.kind == "U"
    }
    out = with_variable_attrs(predicted.assign_coords(text))
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
