"""Stores of older formats (format 2: attnrmt.sweep.store.cell_table.legacy, read as they
are; format 1: the dense store), partial runs and failed runs become a format-3
``cells.zarr`` from their fragments, without recomputing a cell.

The format-2 oracle is ``tests/sweep/data/format2_store`` (written by the format-2
writer, see its README).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from attnrmt.sweep import store
from tests.sweep.conftest import store_plan, synthetic_record, write_block, write_block_fragments
from tests.sweep.oracles import cells_dataset
from tests.sweep.store.cell_table.conftest import assert_bit_identical, current, plain, reference

FORMAT_2 = Path(__file__).parents[2] / "data" / "format2_store" / "grid"


def _format_2_copy(tmp_path: Path) -> Path:
    sweep_dir = tmp_path / "grid"
    shutil.copytree(FORMAT_2, sweep_dir)
    return sweep_dir


def test_a_format_2_store_opens_as_it_is(tmp_path: Path) -> None:
    """The test data is what the format-2 writer left (a ``cell_table/`` manifest of two
    segments, base plan then the snr extension, and a ``cells.zarr`` holding only the
    pointer); today's reader opens it, from the sweep, the pointer and ``open_results``,
    bit-identical to the reference of the plan it was gathered for."""
    sweep_dir = _format_2_copy(tmp_path)
    manifest = json.loads((sweep_dir / "cell_table" / "manifest.json").read_text())
    assert manifest["format_version"] == 2 and len(manifest["segments"]) == 2
    assert [p.name for p in (sweep_dir / "cells.zarr").iterdir()] == ["manifest.json"]
    expected = reference(store_plan(snr=[0.0, 2.0, 3.0]))
    written_by = {"attnrmt_version": "0.1.0"}  # the version that wrote the oracle
    for path in (sweep_dir, sweep_dir / "cells.zarr"):
        view = store.open_cells(path)
        assert view.attrs["store_format_version"] == 2
        assert_bit_identical(view, expected.assign_attrs(written_by))
    assert_bit_identical(
        store.open_results(tmp_path)["grid/cells"].to_dataset(), expected.assign_attrs(written_by)
    )


@pytest.mark.parametrize("where", ["fragments", "cache"])
def test_a_format_2_store_is_upgraded_from_its_fragments(tmp_path: Path, where: str) -> None:
    """The next gather (the rule's input: the current blocks' fragments; or nothing
    given, the fragments only in ``cache/``, as after a forced rerun) builds the format-3
    table from the fragments: every cell of the plan present, bit-identical to the
    reference, the old ``cell_table/`` and pointer gone; plain xarray opens it."""
    sweep_dir = _format_2_copy(tmp_path)
    plan = store_plan(snr=[0.0, 2.0, 3.0])  # the plan of the second format-2 gather
    paths = [sweep_dir / "fragments" / f"{block.key}.npz" for block in plan.sweeps["grid"].blocks]
    assert all(path.is_file() for path in paths)  # the rule's input
    if where == "cache":
        (sweep_dir / "cache").mkdir()
        for path in (sweep_dir / "fragments").glob("*.npz"):
            path.rename(sweep_dir / "cache" / path.name)
        paths = []
    out = store.gather_cells(plan.sweeps["grid"], paths, sweep_dir / "cells.zarr", plan.seed)
    assert not (sweep_dir / "cell_table").exists()
    assert not (out / "manifest.json").exists() and (out / "zarr.json").is_file()
    for path in (out, sweep_dir):
        view = store.open_cells(path)
        assert view.attrs["store_format_version"] == 3
        assert_bit_identical(view, reference(plan))
    table = current(plain(sweep_dir, "cells.zarr"))
    assert table.sizes["cell"] == len(plan.sweeps["grid"].cells) == 24


def test_a_format_2_store_grows_after_its_upgrade(tmp_path: Path) -> None:
    """After the upgrade, an extension appends only its new cells (the upgrade is a
    table like any other)."""
    sweep_dir = _format_2_copy(tmp_path)
    plan = store_plan(snr=[0.0, 2.0, 3.0])
    store.gather_cells(plan.sweeps["grid"], [], sweep_dir / "cells.zarr", plan.seed)
    grown = store_plan(snr=[0.0, 2.0, 3.0, 4.0])
    paths = write_block_fragments(grown, sweep_dir)
    store.gather_cells(grown.sweeps["grid"], paths, sweep_dir / "cells.zarr", grown.seed)
    assert_bit_identical(store.open_cells(sweep_dir), reference(grown))
    assert plain(sweep_dir).sizes["cell"] == len(grown.sweeps["grid"].cells)


def test_old_dense_store_is_rebuilt_from_fragments(tmp_path: Path) -> None:
    """A format-1 ``cells.zarr`` (dense) still opens; the next gather replaces it by the
    table, from the fragments in the cache."""
    plan = store_plan()
    sweep_dir = tmp_path / "grid"
    paths = write_block_fragments(plan, sweep_dir)
    store.write_zarr_atomically(reference(plan), sweep_dir / "cells.zarr")  # format 1
    xr.testing.assert_identical(store.open_cells(sweep_dir).load(), reference(plan))
    for path in paths:  # the fragments only survive in the cache (a forced rerun's state)
        (sweep_dir / "cache").mkdir(exist_ok=True)
        path.rename(sweep_dir / "cache" / path.name)
    out = store.gather_cells(plan.sweeps["grid"], [], sweep_dir / "cells.zarr", plan.seed)
    assert (
        json.loads((out / "zarr.json").read_text())["attributes"]["attnrmt_cell_table_format"] == 3
    )  # the dense group replaced by the snapshot
    assert_bit_identical(store.open_cells(out), reference(plan))


def test_partial_fragments_give_the_finished_cells(tmp_path: Path) -> None:
    plan = store_plan()
    sweep = plan.sweeps["grid"]
    sweep_dir = tmp_path / "grid"
    first = sweep.blocks[0]
    write_block(plan, sweep_dir / "fragments" / f"{first.key}.npz", list(first.cells))
    store.gather_cells(sweep, [], sweep_dir / "cells.zarr", plan.seed)
    view = store.open_cells(sweep_dir).load()
    assert view.attrs["cells_present"] == len(first.cells) < view.attrs["cells_total"]
    records = {cell.key: synthetic_record(cell) for cell in first.cells}
    assert_bit_identical(view, cells_dataset(sweep, records, plan.seed))
    # the rest arrives: appended, the finished cells untouched
    paths = write_block_fragments(plan, sweep_dir)
    store.gather_cells(sweep, paths, sweep_dir / "cells.zarr", plan.seed)
    assert_bit_identical(store.open_cells(sweep_dir), reference(plan))
    table = plain(sweep_dir)
    assert table.sizes["cell"] == len(sweep.cells)
    np.testing.assert_array_equal(table.superseded_at_version.values, 2**31 - 1)


def test_a_failed_run_stores_its_finished_cells(tmp_path: Path) -> None:
    from attnrmt.sweep.store.cell_table.writer import store_finished_cells

    plan = store_plan()
    run_dir = tmp_path / "results" / "unit"
    first = plan.sweeps["grid"].blocks[0]
    write_block(plan, run_dir / "grid" / "fragments" / f"{first.key}.npz", list(first.cells))
    (lines,) = store_finished_cells(plan, run_dir)
    assert f"{len(first.cells)}/" in lines
    assert not (run_dir / "grid" / "cells.zarr").exists()  # the rule's output: untouched
    cells = store.open_results(run_dir)["grid/cells"].to_dataset()
    assert int((cells.cell_key != "").sum()) == len(first.cells)
