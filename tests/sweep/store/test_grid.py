"""The dense assembly of cells and its atomic Zarr write (attnrmt.sweep.store.grid), with
synthetic cell results (no simulation, no Dask)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import xarray as xr

from attnrmt.contract import ABSENT_INT, AXES
from attnrmt.sweep import store
from attnrmt.sweep.store import grid
from tests.sweep.conftest import (
    store_plan,
    synthetic_record,
)
from tests.sweep.oracles import cells_dataset


def test_absent_cells_are_nan_minus_one_and_empty(tmp_path: Path) -> None:
    plan = store_plan()
    sweep = plan.sweeps["grid"]
    present = sweep.cells[: len(sweep.cells) // 2]
    records = {cell.key: synthetic_record(cell) for cell in present}
    dataset = cells_dataset(sweep, records, plan.seed)
    absent = sweep.cells[-1]
    point = dataset.sel(
        **{axis: getattr(absent, axis) for axis in AXES}, replicate=absent.replicate
    )
    assert point.cell_key.item() == ""
    assert np.isnan(point.eigenvalues).all() and np.isnan(point.top_eigenvalues).all()
    assert dataset.attrs["cells_present"] == len(present)
    store.write_zarr_atomically(dataset, tmp_path / "cells.zarr")
    reread = xr.open_zarr(tmp_path / "cells.zarr").load()
    assert reread.V.dtype == np.int64
    assert (reread.V.values == ABSENT_INT).any()
    xr.testing.assert_identical(reread.drop_encoding(), dataset)


def test_rewriting_a_store_replaces_it(tmp_path: Path) -> None:
    plan = store_plan()
    sweep = plan.sweeps["grid"]
    target = tmp_path / "cells.zarr"
    empty = cells_dataset(sweep, {}, plan.seed)
    store.write_zarr_atomically(empty, target)
    full = cells_dataset(
        sweep, {cell.key: synthetic_record(cell) for cell in sweep.cells}, plan.seed
    )
    store.write_zarr_atomically(full, target)
    assert xr.open_zarr(target).attrs["cells_present"] == len(sweep.cells)
    assert sorted(os.listdir(tmp_path)) == ["cells.zarr", "cells.zarr.digest.json"]


def _lazy_dataset(sizes: dict[str, int]) -> xr.Dataset:
    """A dataset of one float64 variable over ``sizes``, Dask zeros (no memory)."""
    import dask.array as da

    data = da.zeros(tuple(sizes.values()), chunks=-1, dtype=np.float64)
    return xr.Dataset({"value": (tuple(sizes), data)})


def test_dense_chunks_are_whole_along_fast_axes_and_group_settings_up_to_the_bound() -> None:
    """``dataset_encoding``: fast axes (snr, eig) whole; slow axes (d, delta) grouped,
    innermost first, while a chunk stays within ``STORE_CHUNK_BYTES``; a single setting
    larger than the bound is one chunk; a small store is one chunk."""
    bound = grid.STORE_CHUNK_BYTES
    point = bound // 4 // 8 // 4  # float64 values per snr value: a setting is bound / 4
    chunks = grid.dataset_encoding(_lazy_dataset({"d": 6, "delta": 5, "snr": 4, "eig": point}))
    assert chunks["value"]["chunks"] == (1, 4, 4, point)
    large = grid.dataset_encoding(_lazy_dataset({"d": 3, "delta": 2, "snr": 4, "eig": 8 * point}))
    assert large["value"]["chunks"] == (1, 1, 4, 8 * point)
    small = grid.dataset_encoding(_lazy_dataset({"d": 3, "delta": 2, "snr": 4, "eig": 10}))
    assert small["value"]["chunks"] == (3, 2, 4, 10)
