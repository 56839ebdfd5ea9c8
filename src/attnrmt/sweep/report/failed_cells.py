"""``failed_cells.csv``: one row per planned cell whose last attempt failed, described by the
plan so that it reads like the config (rule ``failed_cells``; ``docs/data-contract.md``,
"Failure causes"). Cost: O(failure records + failed cells)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from attnrmt.contract import AXES, sweep_axes
from attnrmt.sweep.store.failures import unresolved_failures

#: Columns of ``failed_cells.csv`` before and after the axes: where the cell is, then
#: (after the axes and ``replicate``) how it failed (``docs/data-contract.md``,
#: "Failure causes").
_WHERE_COLUMNS = ("sweep", "block", "cell_key")
_HOW_COLUMNS = ("cause", "error", "time")


def failed_cells_columns(axes: Iterable[str] = AXES) -> tuple[str, ...]:
    """Columns of ``failed_cells.csv`` for a run whose sweeps have the axes ``axes``: the
    place, every axis in the contract's order (``table`` only when a sweep has it), the
    replicate, the failure. O(axes)."""
    return (*_WHERE_COLUMNS, *sweep_axes(axes), "replicate", *_HOW_COLUMNS)


def failed_cells_table(run_plan: Any, run_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per planned cell whose last attempt failed, described by the plan (model names,
    replicate) so that it reads like the config. O(failures)."""
    columns = failed_cells_columns(
        axis for sweep in run_plan.sweeps.values() for axis in sweep.axes
    )
    axes = columns[len(_WHERE_COLUMNS) : -len(_HOW_COLUMNS)]
    rows = []
    for name, sweep in run_plan.sweeps.items():
        failures = unresolved_failures(Path(run_dir) / name)
        failing = {failure.get("key") for failure in failures}
        # only the failing cells are built (the plan holds its cells as arrays)
        cells = {
            key: sweep.cells[index] for index, key in enumerate(sweep.cell_keys()) if key in failing
        }
        for failure in failures:
            cell = cells.get(failure.get("key"))
            if cell is None:
                continue
            rows.append(
                {
                    "sweep": name,
                    "block": failure["block"],
                    "cell_key": cell.key,
                    **{axis: getattr(cell, axis) for axis in axes},
                    "cause": failure["cause"],
                    "error": " ".join(str(failure.get("error", "")).split()),
                    "time": failure.get("time"),
                }
            )
    return pd.DataFrame(rows, columns=list(columns))


def write_failed_cells_table(
    run_plan: Any, run_dir: str | os.PathLike[str], output_path: str | os.PathLike[str]
) -> Path:
    """Write :func:`failed_cells_table` as CSV (rule ``failed_cells``); header only when
    nothing failed."""
    target = Path(output_path)
    target.parent.mkdir(parents=True, exist_ok=True)
    failed_cells_table(run_plan, run_dir).to_csv(target, index=False)
    return target
