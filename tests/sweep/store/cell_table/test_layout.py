"""The cell table's on-disk names and its published state
(``attnrmt.sweep.store.cell_table.layout``; docs/data-contract.md, "cells.zarr"), on a
real gathered table."""

from __future__ import annotations

import json
from pathlib import Path

import zarr

from attnrmt.contract import AXES, VARIABLE_ATTRS
from attnrmt.sweep.store.cell_table import layout
from tests.sweep.conftest import store_plan
from tests.sweep.store.cell_table.conftest import gathered


def test_ragged_names_follow_the_cf_pattern() -> None:
    names = layout.ragged_names("eigenvalues")
    assert (names.count, names.start, names.sample) == (
        "eigenvalue_count",
        "eigenvalue_start",
        "eigenvalue_sample",
    )
    assert layout.ragged_names("effective_weights").sample == "effective_weight_sample"


def test_coordinates_are_the_sweep_axes_then_the_replicate() -> None:
    assert layout.coordinate_names(AXES) == (*AXES, "replicate")
    with_table = layout.coordinate_names([*AXES, "table"])
    assert with_table[-1] == "replicate" and "table" in with_table
    assert with_table.index("weights") < with_table.index("table") < with_table.index("snr")


def test_every_column_has_a_long_name_and_units() -> None:
    for name in ("cell_key", "root_seed", "superseded_at_version", "eigenvalue_count"):
        attrs = layout.column_attrs(name)
        assert attrs["long_name"] and attrs["units"] == "1"
    assert "eigenvalue_sample" in layout.column_attrs("eigenvalue_start")["long_name"]
    assert layout.column_attrs("alpha") == dict(VARIABLE_ATTRS["alpha"])
    attrs = layout.column_attrs("alpha")
    attrs["units"] = "changed"  # a copy: the contract's attributes stay as they are
    assert layout.column_attrs("alpha") == dict(VARIABLE_ATTRS["alpha"])


def test_a_path_names_its_table(tmp_path: Path) -> None:
    sweep_dir = tmp_path / "grid"
    assert layout.store_dir(sweep_dir) == sweep_dir / layout.TABLE_STORE_NAME
    assert layout.table_store(sweep_dir) == sweep_dir / "cell_table.zarr"
    snapshot = sweep_dir / layout.CELLS_STORE_NAME
    assert layout.table_store(snapshot) == snapshot  # a .zarr names itself


def test_the_published_state_describes_the_table_on_disk(tmp_path: Path) -> None:
    plan = store_plan()
    cells = gathered(plan, tmp_path / "grid")
    state = layout.read_state(cells)
    assert state is not None
    assert state.version == 1 and state.version_id
    n_cells = len(plan.sweeps["grid"].cells)
    assert state.rows == n_cells == state.length("alpha")
    assert state.length("no_such_column") == 0
    root = zarr.open_group(cells, mode="r")
    grid = zarr.open_group(cells / state.grid, mode="r")  # outside the consolidated metadata
    rows = grid[layout.ROW_ARRAY][...]
    assert sorted(rows.ravel().tolist()) == list(range(n_cells))  # every row once, none absent
    assert state.length("eigenvalues") == int(root["eigenvalue_count"][:].sum())
    assert layout.read_state(layout.table_store(tmp_path / "grid")).version == 1


def test_no_state_is_read_from_what_is_not_a_published_table(tmp_path: Path) -> None:
    assert layout.read_state(tmp_path / "absent.zarr") is None
    torn = tmp_path / "torn.zarr"
    torn.mkdir()
    (torn / "zarr.json").write_text('{"attributes": ')
    assert layout.read_state(torn) is None
    other = tmp_path / "other.zarr"
    zarr.open_group(other, mode="w").attrs[layout.FORMAT_ATTR] = 2  # another format
    assert json.loads((other / "zarr.json").read_text())["attributes"][layout.FORMAT_ATTR] == 2
    assert layout.read_state(other) is None
