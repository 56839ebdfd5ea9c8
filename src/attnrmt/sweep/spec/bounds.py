"""Inputs bounded before anything allocates (docs/getting-started.md, "Size limits"): each
sweep's cell count, largest cell's memory and one-core time by the cost model, against
``execution.max_cells`` and ``execution.max_core_days``; refused naming the key unless
``--force``. O(d, delta, gamma, T and weights list lengths) per sweep, no cell built."""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Mapping
from typing import Any

from attnrmt.contract import AXES
from attnrmt.sweep.spec.cost import DEFAULT_SECONDS_PER_WORK, cell_work


def machine_bytes() -> int:
    """Physical memory of this machine (``sysconf``); 0 where unknown. O(1)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def cell_bytes(d: int, delta: float, gamma: float, T: int) -> float:
    """Bytes one cell holds at its peak (float64): ``S``, its eigenvectors and
    ``Sigma_E`` (``3 d^2``), the samples and the table (``(N + V) d``) and the pooled
    sequences (``N T d``), ``N = d / gamma``, ``V = d / delta``. O(1)."""
    n_samples, vocabulary = d / gamma, d / delta
    return 8.0 * (3.0 * d * d + (n_samples + vocabulary) * d + n_samples * T * d)


def sweep_problems(
    name: str,
    sweep: Mapping[str, Any],
    weight_models: Mapping[str, Any],
    memory: int,
    ceilings: Mapping[str, Any],
) -> list[str]:
    """What makes sweep ``name`` too large (module docstring) under ``ceilings`` (the
    config's ``execution`` block); empty when it fits."""
    max_cells, max_core_days = int(ceilings["max_cells"]), float(ceilings["max_core_days"])
    lengths = {axis: len(sweep.get(axis) or [None]) for axis in AXES}
    replicates = sweep["replicates"]
    per_d = (
        {int(d_): int(count) for d_, count in replicates.items()}
        if isinstance(replicates, Mapping)
        else dict.fromkeys(sweep["d"], int(replicates))
    )
    line_axes = ("d", "delta", "gamma", "T", "weights")
    per_line = math.prod(lengths[axis] for axis in AXES if axis not in line_axes)
    n_cells = per_line * math.prod(lengths[a] for a in line_axes[1:]) * sum(per_d.values())
    if n_cells > max_cells:
        shape = " x ".join(f"{lengths[axis]} {axis}" for axis in AXES if lengths[axis] > 1)
        counts = sorted(set(per_d.values()))
        counted = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
        return [
            f"sweeps.{name}: {n_cells:,} cells ({shape} x {counted} replicates); at most "
            f"{max_cells:,} a sweep (execution.max_cells; attnrmt run --force to plan them "
            "anyway)"
        ]
    problems = []
    d, T = max(sweep["d"]), max(sweep["T"])
    delta, gamma = min(sweep["delta"]), min(sweep["gamma"])
    peak = cell_bytes(d, delta, gamma, T)
    if memory and peak > memory:
        key = "T" if (d / gamma) * T > 10 * (3 * d + d / gamma + d / delta) else "d"
        problems.append(
            f"sweeps.{name}.{key}: a cell at d = {d}, T = {T}, delta = {delta:g}, gamma = "
            f"{gamma:g} needs about {peak / 2**30:,.1f} GiB; this machine has "
            f"{memory / 2**30:,.1f} GiB (attnrmt run --force to try anyway)"
        )
    seconds = 0.0
    for d_, delta_, gamma_, t_, weights in itertools.product(
        sweep["d"], sweep["delta"], sweep["gamma"], sweep["T"], sweep["weights"]
    ):
        spec = weight_models.get(weights, weights)
        work = cell_work(d_, delta_, gamma_, t_, spec, str(sweep["spectrum"]))
        seconds += per_line * per_d[int(d_)] * work * DEFAULT_SECONDS_PER_WORK
    if seconds / 86400 > max_core_days:
        problems.append(
            f"sweeps.{name}: about {seconds / 86400:,.0f} one-core days by the cost model "
            f"(largest d = {d}); at most {max_core_days:,.0f} (execution.max_core_days; "
            "attnrmt run --force to run it anyway)"
        )
    return problems


def plan_problems(config: Mapping[str, Any]) -> list[str]:
    """Every sweep's :func:`sweep_problems` of a validated config."""
    memory = machine_bytes()
    models = dict(config["weight_models"])
    return [
        problem
        for name, sweep in config["sweeps"].items()
        for problem in sweep_problems(name, sweep, models, memory, config["execution"])
    ]
