"""The dense assembly of cells and its atomic Zarr write (attnrmt.sweep.store.grid), with
synthetic cell results (no simulation, no Dask)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xarray as xr

from attnrmt.sweep import store
from tests.sweep.conftest import (
    store_plan,
    synthetic_record,
)


def test_absent_cells_are_nan_minus_one_and_empty(tmp_path: Path) -> None:
    plan = store_plan()
    sweep = plan.sweeps["grid"]
    present = sweep.cells[: len(sweep.cells) // 2]
    records = {cell.key: synthetic_record(cell) for cell in present}
    dataset = store.cells_dataset(sweep, records, plan.seed)
    absent = sweep.cells[-1]
    point = dataset.sel(
        **{axis: getattr(absent, axis) for axis in store.AXES}, replicate=absent.replicate
    )
    assert point.cell_key.item() == ""
    assert np.isnan(point.eigenvalues).all() and np.isnan(point.top_eigenvalues).all()
    assert dataset.attrs["cells_present"] == len(present)
    store.write_zarr_atomically(dataset, tmp_path / "cells.zarr")
    reread = xr.open_zarr(tmp_path / "cells.zarr").load()
    assert reread.V.dtype == np.int64
    assert (reread.V.values == store.ABSENT_INT).any()
    xr.testing.assert_identical(reread.drop_encoding(), dataset)


def test_rewriting_a_store_replaces_it(tmp_path: Path) -> None:
    plan = store_plan()
    sweep = plan.sweeps["grid"]
    target = tmp_path / "cells.zarr"
    empty = store.cells_dataset(sweep, {}, plan.seed)
    store.write_zarr_atomically(empty, target)
    full = store.cells_dataset(
        sweep, {cell.key: synthetic_record(cell) for cell in sweep.cells}, plan.seed
    )
    store.write_zarr_atomically(full, target)
    assert xr.open_zarr(target).attrs["cells_present"] == len(sweep.cells)
    assert sorted(os.listdir(tmp_path)) == ["cells.zarr"]
