"""Shared helpers of the cell-table tests: gathered sweeps, the dense reference, the
published state of a table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from attnrmt.contract import PROVENANCE_FIELDS
from attnrmt.sweep import store
from attnrmt.sweep.spec.plan import plan_run
from tests.sweep.conftest import store_config, synthetic_record, write_block_fragments
from tests.sweep.oracles import cells_dataset

#: Extensions of :func:`tests.sweep.conftest.store_plan`, one per axis kind.
EXTENSIONS = {
    "snr": {"snr": [0.0, 2.0, 3.0]},
    "replicates": {"replicates": 3},
    "positional": {"positional": ["prefix2", "markov"]},
    "weights": {"weights": ["mean", "causal1", "harmonic"]},
    "d": {"d": [6, 8]},
}


def extended_plan(kind: str) -> Any:
    config = store_config(**EXTENSIONS[kind])
    config["positional_models"]["markov"] = {"kind": "markov", "r": 0.5}
    return plan_run(config)


def changed_config(change: str) -> dict[str, Any]:
    """The store config with the cells' ids changed at equal coordinates: a model's spec
    (``spec``), the root seed (``seed``) or ``top_k``."""
    config = store_config()
    if change == "spec":
        config["positional_models"]["prefix2"] = {"kind": "prefix", "L": 1}
    elif change == "seed":
        config["seed"] = 6
    else:
        config["sweeps"]["grid"]["top_k"] = 1
    return config


def gathered(plan: Any, sweep_dir: Path) -> Path:
    """Fragments of every block of ``plan`` in ``sweep_dir``, gathered; the cells.zarr."""
    paths = write_block_fragments(plan, sweep_dir)
    return store.gather_cells(plan.sweeps["grid"], paths, sweep_dir / "cells.zarr", plan.seed)


def reference(plan: Any) -> xr.Dataset:
    """The in-memory dense assembly of every cell of ``plan`` (synthetic records)."""
    sweep = plan.sweeps["grid"]
    return cells_dataset(
        sweep, {cell.key: synthetic_record(cell) for cell in sweep.cells}, plan.seed
    )


def without_store_attrs(dataset: xr.Dataset) -> xr.Dataset:
    """The view minus what only the table has (format, spectrum storage, provenance)."""
    extra = ("store_format_version", "spectrum_storage", "environments")
    trimmed = dataset.drop_vars([name for name in PROVENANCE_FIELDS if name in dataset])
    trimmed.attrs = {k: v for k, v in dataset.attrs.items() if k not in extra}
    return trimmed


def assert_bit_identical(view: xr.Dataset, expected: xr.Dataset) -> None:
    """Same variables, dims, coords, attrs and values (NaN where NaN) as the reference."""
    xr.testing.assert_identical(without_store_attrs(view.load()), expected)


def root_attrs(sweep_dir: Path) -> dict[str, Any]:
    """The published root attributes of ``<sweep_dir>/cell_table.zarr`` (read as JSON)."""
    return json.loads((sweep_dir / "cell_table.zarr" / "zarr.json").read_text())["attributes"]


def plain(sweep_dir: Path, name: str = "cell_table.zarr") -> xr.Dataset:
    """The sweep's table (or ``name``, e.g. its ``cells.zarr`` snapshot) opened by plain
    xarray, loaded."""
    return xr.open_zarr(sweep_dir / name).load()


def current(table: xr.Dataset) -> xr.Dataset:
    """The current rows of a plainly opened table (the documented rule)."""
    return table.isel(
        cell=np.asarray(table.superseded_at_version.values > table.attrs["table_version"])
    )
