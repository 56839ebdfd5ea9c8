"""The cell-table reader (``attnrmt.sweep.store.cell_table.reader``) and what a plain
xarray or Zarr reader gets from ``cells.zarr``: the lazy dense view, the CF table along
``cell``, its unstacking into the dense grid, snapshots while a writer publishes,
``open_results``.

Shown to bite (scratch edits, each restored): columns created without
``dimension_names`` fail ``test_plain_xarray_opens_the_table...`` (on the first array);
``eigenvalue_start`` one value off fails ``test_spectra_are_a_cf_contiguous_ragged_array``.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from attnrmt.contract import AXES, VARIABLE_ATTRS
from attnrmt.sweep import store
from attnrmt.sweep.store.cell_table.reader import read_ragged
from tests.sweep.conftest import store_plan, synthetic_record
from tests.sweep.store.cell_table.conftest import (
    assert_bit_identical,
    current,
    extended_plan,
    gathered,
    plain,
    reference,
    without_store_attrs,
)

COORDINATES = [*AXES, "replicate"]


def test_view_is_lazy_and_bit_identical_to_the_dense_assembly(tmp_path: Path) -> None:
    plan = store_plan(d=[6, 9], T=[3, 5])
    out = gathered(plan, tmp_path / "grid")
    view = store.open_cells(out)
    assert all(view[name].chunks is not None for name in view.data_vars)  # dask-backed
    assert view.attrs["store_format_version"] == store.STORE_FORMAT_VERSION == 3
    assert_bit_identical(view, reference(plan))
    # the sweep directory (its table) and the table itself open the same version
    assert_bit_identical(store.open_cells(tmp_path / "grid"), reference(plan))
    assert_bit_identical(store.open_cells(tmp_path / "grid" / "cell_table.zarr"), reference(plan))


def test_plain_xarray_opens_the_table_and_unstacks_it_into_the_dense_grid(
    tmp_path: Path,
) -> None:
    """``xr.open_zarr(cells.zarr)``, no attnrmt involved: Zarr v3, dimension_names on
    every array, CF attributes (Conventions, long_name on every variable, units that
    UDUNITS parses where a variable has any), the grid coordinates as coordinates along
    ``cell``; ``set_index(cell=...).unstack("cell")`` of the current rows gives the dense
    view's values at every grid point (the lazy view's, independently assembled)."""
    import cf_units
    import zarr

    plan = store_plan(d=[6, 9], T=[3, 5])
    out = gathered(plan, tmp_path / "grid")
    group = zarr.open_group(str(out), mode="r")
    assert group.metadata.zarr_format == 3
    for name, array in group.arrays():
        assert array.metadata.dimension_names is not None, name
    table = xr.open_zarr(out)
    assert table.attrs["Conventions"] == "CF-1.10"
    assert set(COORDINATES) <= set(table.coords)
    for name, variable in table.variables.items():
        assert variable.attrs.get("long_name"), name
        if "units" in variable.attrs:  # dimensionless ones have none (CF 1.10, 3.1)
            cf_units.Unit(variable.attrs["units"])  # raises on a unit UDUNITS rejects
    assert table.eigenvalue_count.attrs["sample_dimension"] == "eigenvalue_sample"
    grid = current(table.load()).set_index(cell=COORDINATES).unstack("cell")
    dense = store.open_cells(out).load()
    points = {axis: dense[axis].values for axis in COORDINATES}
    for name, dense_name in (
        ("alpha", "alpha_replicate"),
        ("kappa", "kappa_replicate"),
        ("compute_seconds", None),
        ("downstream_accuracy", None),
        ("top_eigenvalues", None),
        ("environment_id", None),
    ):
        expected = dense[dense_name or name]
        got = grid[name].transpose(*expected.dims).reindex(points)
        np.testing.assert_array_equal(got.values, expected.values, err_msg=name)
    for name in ("V", "N"):  # over the axes in the view (equal across replicates here)
        got = grid[name].transpose(*COORDINATES).reindex(points)
        np.testing.assert_array_equal(got.max("replicate").values, dense[name].values)
        np.testing.assert_array_equal(got.min("replicate").values, dense[name].values)
    keys = grid.cell_key.transpose(*COORDINATES, "key_byte").reindex(points).values
    hexed = np.apply_along_axis(lambda row: bytes(row.astype(np.uint8)).hex(), -1, keys)
    np.testing.assert_array_equal(hexed, dense.cell_key.values)


def test_spectra_are_a_cf_contiguous_ragged_array(tmp_path: Path) -> None:
    """Every stored spectrum, unpadded, along ``eigenvalue_sample``: splitting the values
    by ``eigenvalue_count`` (CF's contiguous ragged array rule: cell i holds the next
    count[i] values) gives each cell's own spectrum, of its own length d;
    ``eigenvalue_start`` is the cumulative count (random access)."""
    plan = store_plan(d=[6, 90])
    gathered(plan, tmp_path / "grid")
    table = plain(tmp_path / "grid")
    cells = {cell.key: cell for cell in plan.sweeps["grid"].cells}
    counts = table.eigenvalue_count.values
    assert table.sizes["eigenvalue_sample"] == counts.sum() == sum(c.d for c in cells.values())
    np.testing.assert_array_equal(
        table.eigenvalue_start.values, np.concatenate([[0], np.cumsum(counts)[:-1]])
    )
    spectra = np.split(table.eigenvalues.values, np.cumsum(counts)[:-1])
    weights = np.split(
        table.effective_weights.values, np.cumsum(table.effective_weight_count.values)[:-1]
    )
    for row, (spectrum, effective) in enumerate(zip(spectra, weights, strict=True)):
        cell = cells[bytes(table.cell_key.values[row]).hex()]
        expected = synthetic_record(cell)
        assert table.d.values[row] == cell.d == spectrum.size
        np.testing.assert_array_equal(spectrum, expected["eigenvalues"])
        np.testing.assert_array_equal(effective, expected["effective_weights"])


def test_numeric_coordinates_are_ascending(tmp_path: Path) -> None:
    plan = store_plan(d=[9, 6], snr=[2.0, 1.0, 0.0])
    view = store.open_cells(gathered(plan, tmp_path / "grid")).load()
    assert view.d.values.tolist() == [6, 9] and view.snr.values.tolist() == [0.0, 1.0, 2.0]
    assert_bit_identical(view, reference(plan))
    assert view.sel(snr=slice(0, 1)).sizes["snr"] == 2
    cell = plan.sweeps["grid"].cells[0]  # d=9, snr=2.0 in the config's order
    point = view.sel(**{axis: getattr(cell, axis) for axis in AXES}, replicate=cell.replicate)
    assert point.cell_key.item() == cell.key


def test_readers_see_the_old_or_the_new_version_never_a_mix(tmp_path: Path) -> None:
    """While updates publish (an extension, then shrinking back and regrowing three times:
    rows superseded and appended again), readers opening and loading in a loop see the
    old version or the new one, never a mix;
    views opened before the update, by attnrmt and by plain xarray, still read the old
    version whole (its shapes and values)."""
    base, extended = store_plan(), extended_plan("snr")
    sweep_dir = tmp_path / "grid"
    gathered(base, sweep_dir)
    opened_before = store.open_cells(sweep_dir)  # lazy: nothing read yet
    plain_before = xr.open_zarr(sweep_dir / "cell_table.zarr")
    old_table = plain(sweep_dir)
    old, new = reference(base), reference(extended)
    seen: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def read_repeatedly() -> None:
        while not stop.is_set():
            try:
                view = without_store_attrs(store.open_cells(sweep_dir).load())
                seen.append(
                    "new" if view.identical(new) else "old" if view.identical(old) else "mixed"
                )
            except BaseException as exc:
                errors.append(exc)
                return

    reader = threading.Thread(target=read_repeatedly)
    reader.start()
    try:
        gathered(extended, sweep_dir)
        for _ in range(3):
            gathered(base, sweep_dir)
            gathered(extended, sweep_dir)
    finally:
        stop.set()
        reader.join()
    assert not errors, errors
    assert seen and "mixed" not in seen
    assert_bit_identical(opened_before, old)
    xr.testing.assert_identical(plain_before.load(), old_table)


def test_open_results_has_one_group_per_sweep(tmp_path: Path) -> None:
    plan = store_plan()
    sweep = plan.sweeps["grid"]
    run_dir = tmp_path / "results" / "unit"
    store.write_theory(sweep, run_dir / "grid" / "theory.zarr", plan.seed)
    gathered(plan, run_dir / "grid")
    xr.Dataset({"x": ("snr", [1.0, 2.0])}).to_zarr(
        run_dir / "grid" / "analysis.zarr", zarr_format=3, consolidated=False
    )
    (run_dir / "logs").mkdir()
    tree = store.open_results(run_dir)
    assert set(tree.children) == {"grid"}
    assert set(tree["grid"].children) == {"cells", "theory", "analysis"}
    assert tree["grid/cells"].dataset.attrs["root_seed"] == 5
    assert_bit_identical(tree["grid/cells"].to_dataset(), reference(plan))
    with pytest.raises(FileNotFoundError):
        store.open_results(tmp_path / "nope")


def test_open_results_opens_a_dense_store(tmp_path: Path) -> None:
    """A dense ``cells.zarr`` (format 1, or a synthetic dataset) opens as it is."""
    plan = store_plan()
    run_dir = tmp_path / "results" / "unit"
    store.write_zarr_atomically(reference(plan), run_dir / "grid" / "cells.zarr")
    xr.testing.assert_identical(
        store.open_results(run_dir)["grid/cells"].to_dataset().load(), reference(plan)
    )


def test_open_results_names_a_sweep_directory_and_an_empty_run(tmp_path: Path) -> None:
    plan = store_plan()
    run_dir = tmp_path / "results" / "unit"
    gathered(plan, run_dir / "grid")
    with pytest.raises(ValueError, match="one sweep, not of a run"):
        store.open_results(run_dir / "grid")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no sweep results"):
        store.open_results(tmp_path / "empty")


def test_open_results_squeezed_view_keeps_the_full_one(tmp_path: Path) -> None:
    plan = store_plan()
    run_dir = tmp_path / "results" / "unit"
    gathered(plan, run_dir / "grid")
    full = store.open_results(run_dir)["grid/cells"].to_dataset()
    squeezed = store.open_results(run_dir, squeeze=True)["grid/cells"].to_dataset()
    assert full.top_eigenvalues.ndim == 10
    assert set(squeezed.top_eigenvalues.dims) == {"weights", "snr", "centered", "replicate", "k"}
    assert squeezed.d.item() == 6  # the dropped dimension stays as a scalar coordinate
    xr.testing.assert_identical(squeezed.load(), full.squeeze().load())


def test_current_rows_stream_only_the_published_versions_current_rows(tmp_path: Path) -> None:
    """``iter_current_rows`` (the provenance summary's reader) yields the columns of the
    current rows only: after a shrink, the superseded rows are left out."""
    from attnrmt.sweep.store.cell_table.reader import iter_current_rows

    sweep_dir = tmp_path / "grid"
    gathered(store_plan(), sweep_dir)
    gathered(store_plan(snr=[0.0]), sweep_dir)
    chunks = list(iter_current_rows(sweep_dir, ["snr", "attempt", "no_such_column"], chunk_rows=3))
    snr = np.concatenate([chunk["snr"] for chunk in chunks])
    assert snr.size == len(store_plan(snr=[0.0]).sweeps["grid"].cells) and (snr == 0).all()
    assert np.isnan(np.concatenate([chunk["no_such_column"] for chunk in chunks])).all()
    assert list(iter_current_rows(tmp_path / "nowhere", ["snr"])) == []


def test_table_attributes_name_every_variable(tmp_path: Path) -> None:
    """The contract's attributes label every measured column and coordinate of the table
    (the table's own bookkeeping has its own long_name)."""
    gathered(store_plan(), tmp_path / "grid")
    table = plain(tmp_path / "grid")
    for name in (*COORDINATES, "alpha", "top_eigenvalues", "eigenvalues", "attempt"):
        for key, value in VARIABLE_ATTRS[name].items():
            assert table[name].attrs[key] == value, (name, key)
    assert table.attrs["grid_index"] == f"grid/{table.attrs['table_version_id']}"


def test_fields_outside_per_setting_are_one_chunk_with_the_same_values(tmp_path: Path) -> None:
    """``open_cells(per_setting=[...])``: the named fields keep one Dask chunk per setting,
    every other field is a single chunk (one read per column when loaded); the values are
    those of the default view."""
    plan = store_plan(d=[6, 9], T=[3, 5])
    out = gathered(plan, tmp_path / "grid")
    default = store.open_cells(out)
    view = store.open_cells(out, per_setting=["eigenvalues"])
    assert view["eigenvalues"].chunks == default["eigenvalues"].chunks
    assert max(len(c) for c in default["V"].chunks) > 1  # the default splits by setting
    for name in view.data_vars:
        if name != "eigenvalues":
            assert all(len(c) == 1 for c in view[name].chunks), name
    assert_bit_identical(view, reference(plan))


def test_read_ragged_gathers_unsorted_overlapping_and_truncated_ranges() -> None:
    """Ranges in any order, overlapping, adjacent, across chunk edges, empty or longer
    than ``width``: each row is its slice of ``values`` (cut at ``width``), NaN after;
    the naive one-slice-per-row gather is the oracle."""
    import zarr

    rng = np.random.default_rng(11)
    values = zarr.create_array(store={}, shape=(500,), chunks=(16,), dtype="f8")
    values[:] = rng.normal(size=500)
    starts = rng.integers(0, 450, size=60)
    counts = rng.integers(0, 50, size=60)
    counts[:3] = 0
    width = 30
    expected = np.full((60, width), np.nan)
    stored = values[:]
    for row, (start, count) in enumerate(zip(starts, counts, strict=True)):
        length = min(int(count), width)
        expected[row, :length] = stored[start : start + length]
    np.testing.assert_array_equal(read_ragged(starts, counts, values, width), expected)


def test_a_format_2_table_is_refused_with_the_command_that_rebuilds_it(tmp_path: Path) -> None:
    """A sweep folder of attnrmt 0.1 (``cell_table/manifest.json``, a ``cells.zarr``
    pointer): opened by folder or by ``cells.zarr``, the error names the folder and says
    how to rebuild it from the fragments (docs/data-contract.md, "Older formats")."""
    sweep = tmp_path / "results" / "old" / "transition"
    (sweep / "cell_table").mkdir(parents=True)
    (sweep / "cell_table" / "manifest.json").write_text('{"format_version": 2}')
    (sweep / "cells.zarr").mkdir()
    (sweep / "cells.zarr" / "manifest.json").write_text('{"format_version": 2}')
    for path in (sweep, sweep / "cells.zarr"):
        with pytest.raises(ValueError, match="format 2") as refused:
            store.open_cells(path)
        assert str(sweep) in str(refused.value)
        assert "rerun `attnrmt run CONFIG`" in str(refused.value)
