"""The cell-table writer (``attnrmt.sweep.store.cell_table.writer``): gathers, append-only
updates, superseded rows, kills, memory. Synthetic cell results written by the real
fragment writer; no simulation, no Dask. Columns: test_columns.py; the id index:
test_lookup.py.

Shown to bite (scratch edits, each restored): ``_mark_superseded`` without the reset of
marks above the published version left the rows a killed writer had marked superseded
once the rerun published (``test_kill_during_update_keeps_the_previous_version[supersede]``:
8 current rows of 24); dropping the ``renamed_models`` re-read left the renamed model's
cells absent (``test_a_renamed_model_is_stored_under_its_new_name_without_recomputing``);
keeping the ingested list after rows were superseded left the shrunk-then-regrown cells
absent (``test_a_shrunk_sweep_supersedes_its_rows_and_regrows_from_its_fragments``);
symbolic links instead of hard links made a kept snapshot read the next version
(``test_cells_zarr_is_a_hard_linked_snapshot_that_never_changes``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from attnrmt.contract import AXES
from attnrmt.sweep import store
from attnrmt.sweep.spec.plan import plan_run
from attnrmt.sweep.store import fragments
from tests.sweep.conftest import (
    store_config,
    store_plan,
    synthetic_record,
    write_block,
    write_block_fragments,
)
from tests.sweep.store.cell_table.conftest import (
    EXTENSIONS,
    assert_bit_identical,
    changed_config,
    current,
    extended_plan,
    gathered,
    plain,
    reference,
    root_attrs,
    without_store_attrs,
)


def test_gather_places_every_cell_and_pads(tmp_path: Path) -> None:
    plan = store_plan(d=[6, 9], T=[3, 5])
    sweep = plan.sweeps["grid"]
    paths = []
    for index, block in enumerate(sweep.blocks):
        path = tmp_path / "fragments" / f"{index}.npz"
        write_block(plan, path, list(block.cells))
        paths.append(path)
    out = store.gather_cells(sweep, paths, tmp_path / "cells.zarr", plan.seed)
    cells = store.open_cells(out).load()
    assert cells.sizes["eig"] == 9 and cells.sizes["position"] == 5
    assert list(cells.dims)[:8] == list(AXES)
    for cell in sweep.cells[::5]:
        point = cells.sel(**{axis: getattr(cell, axis) for axis in AXES}, replicate=cell.replicate)
        expected = synthetic_record(cell)
        assert point.cell_key.item() == cell.key
        np.testing.assert_array_equal(point.eigenvalues[: cell.d], expected["eigenvalues"])
        assert np.isnan(point.eigenvalues[cell.d :]).all()
        np.testing.assert_array_equal(
            point.effective_weights[: cell.T], expected["effective_weights"]
        )
        assert point.alpha_replicate.item() == expected["alpha"]
        assert point.V.item() == expected["V"]
    xr.testing.assert_allclose(cells.alpha, cells.alpha_replicate.mean("replicate"))
    assert cells.attrs["cells_present"] == cells.attrs["cells_total"] == len(sweep.cells)
    assert not any(p.name.startswith(".") for p in tmp_path.rglob("*") if p.is_dir())
    xr.testing.assert_identical(plain(tmp_path, "cells.zarr"), plain(tmp_path))  # snapshot


def test_cells_zarr_is_a_hard_linked_snapshot_that_never_changes(tmp_path: Path) -> None:
    """The rule's output ``cells.zarr`` is the published version's files hard-linked from
    ``cell_table.zarr`` (same inodes, no byte copied); a later update replaces the table's
    files by renames, so a snapshot kept aside still reads the old version whole, and the
    next gather's snapshot the new one. Snakemake deleting ``cells.zarr`` before a rerun
    leaves the table whole: the rerun appends only the new cells."""
    base, extended = store_plan(), extended_plan("snr")
    sweep_dir = tmp_path / "grid"
    out = gathered(base, sweep_dir)
    table = sweep_dir / "cell_table.zarr"
    files = [path for path in out.rglob("*") if path.is_file()]
    assert files and all(path.samefile(table / path.relative_to(out)) for path in files)
    assert {p.name for p in out.iterdir()} == {p.name for p in table.iterdir()}  # 1 grid
    kept = tmp_path / "kept.zarr"
    out.rename(kept)  # what a reader holds (Snakemake deletes cells.zarr before a rerun)
    old = plain(tmp_path, "kept.zarr")
    gathered(extended, sweep_dir)
    assert root_attrs(sweep_dir)["table_version"] == 2
    xr.testing.assert_identical(plain(tmp_path, "kept.zarr"), old)
    assert_bit_identical(store.open_cells(kept), reference(base))
    assert_bit_identical(store.open_cells(out), reference(extended))
    assert plain(sweep_dir, "cells.zarr").sizes["cell"] == len(extended.sweeps["grid"].cells)


@pytest.mark.parametrize("kind", sorted(EXTENSIONS))
def test_incremental_update_equals_from_scratch(tmp_path: Path, kind: str) -> None:
    """An extension appends only its new cells: every old row and value is unchanged
    (the old rows of every column, and the prefix of every sample dimension), the table
    grows by the new cells, and the view equals a from-scratch store and the reference."""
    base, extended = store_plan(), extended_plan(kind)
    incremental = tmp_path / "incremental" / "grid"
    gathered(base, incremental)
    before = plain(incremental)
    gathered(extended, incremental)
    scratch = gathered(extended, tmp_path / "scratch" / "grid")
    after = plain(incremental)
    n_new = len(extended.sweeps["grid"].cells) - len(base.sweeps["grid"].cells)
    assert after.sizes["cell"] == before.sizes["cell"] + n_new
    for name, variable in before.variables.items():  # old rows and values untouched
        head = after[name].values[: before.sizes[variable.dims[0]]]
        np.testing.assert_array_equal(head, variable.values, strict=True, err_msg=name)
    assert root_attrs(incremental)["table_version"] == 2
    view = store.open_cells(incremental / "cells.zarr")
    assert_bit_identical(view, reference(extended))
    xr.testing.assert_identical(
        without_store_attrs(view.load()), without_store_attrs(store.open_cells(scratch).load())
    )


def _carried_and_looked_up(plan: Any, sweep_dir: Path) -> tuple[Any, np.ndarray]:
    """Rows of ``plan``'s cells in the published table version: carried over by
    coordinates from the previous grid (None when not applicable) and looked up id by id."""
    from attnrmt.sweep.store.cell_table import lookup, writer
    from attnrmt.sweep.store.cell_table.layout import read_state

    table = sweep_dir / "cell_table.zarr"
    state = read_state(table)
    sweep = plan.sweeps["grid"]
    positions, _ = lookup.plan_grid(sweep)

    def plan_cell_ids(cells: Any) -> np.ndarray:  # from the cells' own keys
        keys = lookup.key_bytes([cell.key for cell in cells])
        return lookup.cell_ids(keys, np.full(len(cells), plan.seed))

    carried = lookup.carried_rows(
        writer.read_grid(table, state),
        sweep,
        lookup.grid_identity(sweep, plan.seed),
        positions,
        lambda indices: plan_cell_ids([sweep.cells[i] for i in indices]),
        lambda rows: writer.read_table_ids_at(table, state, rows),
    )
    looked_up = lookup.IdIndex(writer.read_table_ids(table, state)).find(plan_cell_ids(sweep.cells))
    return carried, looked_up


def test_many_small_updates_carry_rows_and_equal_from_scratch(tmp_path: Path) -> None:
    """Eight successive small extensions (one snr value at a time, then a replicate, a
    weights model, a positional model and a d): before each, the rows carried over from
    the previous grid version equal an id-by-id lookup; each update appends only its new
    cells; the end result is bit-identical to a from-scratch store."""
    steps = [
        dict(snr=[0.0, 0.5]),
        dict(snr=[0.0, 0.5, 1.0]),
        dict(snr=[0.0, 0.5, 1.0, 2.0]),
        dict(snr=[0.0, 0.5, 1.0, 2.0, 3.0]),
    ]
    last = steps[-1]
    steps += [
        dict(last, replicates=3),
        dict(last, replicates=3, weights=["mean", "causal1", "harmonic"]),
    ]
    steps += [
        dict(steps[-1], positional=["prefix2", "iid"]),
        dict(steps[-1], positional=["prefix2", "iid"], d=[6, 8]),
    ]
    sweep_dir = tmp_path / "incremental" / "grid"
    previous = store_plan(snr=[0.0])
    gathered(previous, sweep_dir)
    for number, step in enumerate(steps, start=2):
        plan = store_plan(**step)
        carried, looked_up = _carried_and_looked_up(plan, sweep_dir)
        assert carried is not None, step
        np.testing.assert_array_equal(carried, looked_up)
        assert np.count_nonzero(carried >= 0) == len(previous.sweeps["grid"].cells)
        gathered(plan, sweep_dir)
        attrs = root_attrs(sweep_dir)
        assert attrs["table_version"] == number
        table = plain(sweep_dir)
        assert table.sizes["cell"] == len(plan.sweeps["grid"].cells)  # appended only
        assert (table.superseded_at_version == 2**31 - 1).all()
        previous = plan
    scratch = gathered(previous, tmp_path / "scratch" / "grid")
    view = store.open_cells(sweep_dir / "cells.zarr")
    assert_bit_identical(view, reference(previous))
    xr.testing.assert_identical(
        without_store_attrs(view.load()), without_store_attrs(store.open_cells(scratch).load())
    )
    grids = sorted((sweep_dir / "cell_table.zarr" / "grid").iterdir())
    assert len(grids) == 3 and grids[-1].name == attrs["table_version_id"]  # 2 old kept


@pytest.mark.parametrize("change", ["spec", "seed", "top_k"])
def test_rows_are_superseded_when_ids_change_at_equal_coordinates(
    tmp_path: Path, change: str
) -> None:
    """A model name given another spec, another root seed or another top_k changes every
    id at the same coordinates: the update looks the cells up instead (none found),
    appends the new cells and marks every old row superseded by the new version (their
    coordinates are the new rows': without the rule, the plain table has every grid
    point twice); the view is bit-identical to a from-scratch store."""
    sweep_dir = tmp_path / "grid"
    base = store_plan()
    gathered(base, sweep_dir)
    plan = plan_run(changed_config(change))
    carried, looked_up = _carried_and_looked_up(plan, sweep_dir)
    assert carried is None
    assert np.all(looked_up == -1)
    gathered(plan, sweep_dir)
    assert_bit_identical(store.open_cells(sweep_dir / "cells.zarr"), reference(plan))
    table = plain(sweep_dir)
    n_old = len(base.sweeps["grid"].cells)
    assert table.sizes["cell"] == n_old + len(plan.sweeps["grid"].cells)
    np.testing.assert_array_equal(table.superseded_at_version.values[:n_old], 2)
    assert (table.superseded_at_version.values[n_old:] == 2**31 - 1).all()
    assert current(table).sizes["cell"] == len(plan.sweeps["grid"].cells)
    coordinates = [*AXES, "replicate"]
    with pytest.raises(ValueError, match="duplicate"):
        table.set_index(cell=coordinates).unstack("cell")
    current(table).set_index(cell=coordinates).unstack("cell")


def test_a_renamed_model_is_stored_under_its_new_name_without_recomputing(
    tmp_path: Path,
) -> None:
    """Renaming a model (same spec) keeps every cell key, so no block is recomputed; the
    gather stores those cells again from their fragments under the new name (the plain
    table's coordinates are the new name's) and supersedes the rows under the old one."""
    sweep_dir = tmp_path / "grid"
    base = store_plan()
    paths = write_block_fragments(base, sweep_dir)
    store.gather_cells(base.sweeps["grid"], paths, sweep_dir / "cells.zarr", base.seed)
    config = store_config(positional=["pfx"])
    config["positional_models"] = {"pfx": {"kind": "prefix", "L": 2}}
    renamed = plan_run(config)
    assert sorted(b.key for b in renamed.sweeps["grid"].blocks) == sorted(
        b.key for b in base.sweeps["grid"].blocks
    )  # the same fragments
    store.gather_cells(renamed.sweeps["grid"], paths, sweep_dir / "cells.zarr", renamed.seed)
    assert_bit_identical(store.open_cells(sweep_dir), reference(renamed))
    rows = current(plain(sweep_dir))
    assert rows.sizes["cell"] == len(renamed.sweeps["grid"].cells)
    assert set(rows.positional.values.tolist()) == {"pfx"}


def test_a_shrunk_sweep_supersedes_its_rows_and_regrows_from_its_fragments(
    tmp_path: Path,
) -> None:
    """Dropping an snr value supersedes its rows (the plain table's current rows are the
    plan's); adding it back stores those cells again from their fragments (kept in the
    sweep's fragments and cache), since superseded rows are never current again."""
    sweep_dir = tmp_path / "grid"
    full, shrunk = store_plan(), store_plan(snr=[0.0])
    gathered(full, sweep_dir)
    gathered(shrunk, sweep_dir)
    assert_bit_identical(store.open_cells(sweep_dir), reference(shrunk))
    rows = current(plain(sweep_dir))
    assert rows.sizes["cell"] == len(shrunk.sweeps["grid"].cells)
    assert set(rows.snr.values.tolist()) == {0.0}
    paths = write_block_fragments(full, sweep_dir)
    store.gather_cells(full.sweeps["grid"], paths, sweep_dir / "cells.zarr", full.seed)
    assert_bit_identical(store.open_cells(sweep_dir), reference(full))
    table = plain(sweep_dir)
    n_full, n_shrunk = len(full.sweeps["grid"].cells), len(shrunk.sweeps["grid"].cells)
    assert table.sizes["cell"] == n_full + (n_full - n_shrunk)
    assert current(table).sizes["cell"] == n_full


@pytest.mark.parametrize("batch_fragments", [1, 2, 256])
def test_batched_ingestion_of_overlapping_fragments_equals_from_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_fragments: int
) -> None:
    """Fragments are read in batches whose cells are looked up together and held by the
    table writer until a chunk's worth: with batches of 1, 2 or all fragments, chunks
    of 3 rows and 5 values (so updates complete partial chunks), and fragments that
    overlap (a new cell in two fragments, a fragment holding old and new cells, so only
    part of it is taken), the update stores each new cell once, from its first fragment,
    bit-identical to a from-scratch store."""
    from attnrmt.sweep.store.cell_table import writer as table_writer

    monkeypatch.setattr(table_writer, "BATCH_FRAGMENTS", batch_fragments)
    monkeypatch.setattr(table_writer, "ROW_CHUNK", 3)
    monkeypatch.setattr(table_writer, "VALUE_CHUNK", 5)
    base, extended = store_plan(), extended_plan("snr")
    sweep_dir = tmp_path / "grid"
    gathered(base, sweep_dir)
    old_keys = {cell.key for cell in base.sweeps["grid"].cells}
    new_cells = [cell for cell in extended.sweeps["grid"].cells if cell.key not in old_keys]
    old_cells = list(base.sweeps["grid"].cells)
    directory = sweep_dir / fragments.FRAGMENTS_DIRNAME
    paths = [directory / "mixed.npz", directory / "repeat.npz", directory / "rest.npz"]
    write_block(extended, paths[0], [old_cells[0], new_cells[0], old_cells[1], new_cells[1]])
    write_block(extended, paths[1], [new_cells[1], new_cells[0], new_cells[2]])
    write_block(extended, paths[2], new_cells[2:])
    store.gather_cells(extended.sweeps["grid"], paths, sweep_dir / "cells.zarr", extended.seed)
    table = plain(sweep_dir)
    assert table.sizes["cell"] == len(old_cells) + len(new_cells)
    assert table.eigenvalues.encoding["chunks"] == (5,)
    assert_bit_identical(store.open_cells(sweep_dir / "cells.zarr"), reference(extended))


def test_an_unchanged_rerun_publishes_nothing(tmp_path: Path) -> None:
    plan = store_plan()
    gathered(plan, tmp_path / "grid")
    root = (tmp_path / "grid" / "cell_table.zarr" / "zarr.json").read_bytes()
    gathered(plan, tmp_path / "grid")
    assert (tmp_path / "grid" / "cell_table.zarr" / "zarr.json").read_bytes() == root
    assert root_attrs(tmp_path / "grid")["table_version"] == 1


KILL_SCRIPT = """
import os, signal, sys
from pathlib import Path
from attnrmt.sweep.spec.plan import plan_run
from attnrmt.sweep.store.cell_table import columns, writer
from tests.sweep.store.cell_table.conftest import changed_config, extended_plan
from tests.sweep.conftest import write_block_fragments

point, sweep_dir = sys.argv[1], Path(sys.argv[2])
plan = plan_run(changed_config("seed")) if point == "supersede" else extended_plan("snr")
real_write = columns.write_bytes_atomically

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

def die_at_root(path, *args, **kwargs):
    if Path(path).parent.name == "cell_table.zarr":
        die()
    return real_write(path, *args, **kwargs)

if point == "chunks":
    columns._fsync_files = die  # every chunk written, nothing published
else:
    columns.write_bytes_atomically = die_at_root  # arrays' zarr.json written, not the root
paths = write_block_fragments(plan, sweep_dir)
writer.gather_cells(plan.sweeps["grid"], paths, sweep_dir / "cells.zarr", plan.seed)
"""


@pytest.mark.parametrize("point", ["chunks", "root", "supersede"])
def test_kill_during_update_keeps_the_previous_version(tmp_path: Path, point: str) -> None:
    """A writer killed after writing its chunks, or its arrays' metadata (an extension, or
    an update superseding every row: another seed), leaves the published version whole
    (attnrmt and plain xarray read it); the next gather cleans up (no temporaries, no
    unpublished grid version) and publishes a correct version, with the rows the killed
    writer had marked superseded current again."""
    base = store_plan()
    sweep_dir = tmp_path / "grid"
    gathered(base, sweep_dir)
    before = plain(sweep_dir)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parents[4]), os.environ.get("PYTHONPATH", "")]
        ),
    }
    process = subprocess.run(
        [sys.executable, "-c", KILL_SCRIPT, point, str(sweep_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert process.returncode == -signal.SIGKILL, process.stderr
    table = sweep_dir / "cell_table.zarr"
    if point == "supersede":  # the killed writer had marked every old row
        import zarr

        marks = zarr.open_array(str(table / "superseded_at_version"), mode="r")[:16]
        assert (marks == 2).all(), marks
    assert_bit_identical(store.open_cells(sweep_dir), reference(base))
    marks = "superseded_at_version"  # a killed writer's marks read as current
    xr.testing.assert_identical(plain(sweep_dir).drop_vars(marks), before.drop_vars(marks))
    xr.testing.assert_identical(
        current(plain(sweep_dir)), current(before).assign({marks: current(plain(sweep_dir))[marks]})
    )
    gathered(base, sweep_dir)  # the base plan again: nothing to add, marks reset
    assert_bit_identical(store.open_cells(sweep_dir), reference(base))
    assert (current(plain(sweep_dir)).sizes["cell"]) == len(base.sweeps["grid"].cells)
    extended = extended_plan("snr")
    gathered(extended, sweep_dir)
    assert_bit_identical(store.open_cells(sweep_dir), reference(extended))
    assert current(plain(sweep_dir)).sizes["cell"] == len(extended.sweeps["grid"].cells)
    leftovers = [p for p in table.rglob("*") if p.name.endswith((".tmp", ".partial"))]
    assert leftovers == []
    version = root_attrs(sweep_dir)["table_version_id"]
    assert sorted(p.name for p in (table / "grid").iterdir())[-1] == version


def _gather_peak(n_gamma: int, sweep_dir: Path) -> int:
    """tracemalloc peak (bytes) of one first gather of a sweep of 4,000 ``n_gamma`` tiny
    cells in fragments of 1,000 cells (plan and fragments made before tracing)."""
    import gc
    import tracemalloc

    plan = plan_run(
        store_config(
            d=[2],
            T=[2],
            weights=["mean", "last", "harmonic", "optimal"],
            gamma=[0.1 * (i + 1) for i in range(n_gamma)],
            snr=[0.01 * i for i in range(100)],
            replicates=10,
            centered=[True],
        )
        | {"execution": {"block_size": 1000}}
    )
    paths = write_block_fragments(plan, sweep_dir)
    gc.collect()
    tracemalloc.start()
    try:
        store.gather_cells(plan.sweeps["grid"], paths, sweep_dir / "cells.zarr", plan.seed)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_gather_memory_grows_by_arrays_not_objects_per_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gather reads the plan's cells as arrays (grid positions, raw keys) and streams
    fragments one at a time: its tracemalloc peak grows by <= 160 bytes per extra cell
    between 8,000 and 32,000 cells (same fragment size). Measured ~90 B per cell
    (positions, rows, ids of the missing cells and their digest index: int64 and 40-byte
    arrays; the superseded marks, int32); with the cells' hex keys built as Python
    strings (the gather before the array plan) it was 209 B per cell. The table's column
    buffers hold at most one chunk each: chunks of 1,024 rows keep them out of the
    difference (the default, 131,072 rows, is ~50 MB of buffers at most).

    Each size is measured twice and the smaller peak kept: pathlib interns every path
    component (``sys.intern``), and when the interpreter's table of interned strings
    grows during one gather it allocates a few MB at once, whatever that gather does
    (seen in the whole tests/sweep run: 3.7 MB in one allocation at pathlib.py:71, i.e.
    ~250 B per cell in the difference; a second gather of the same size does not grow
    it again). Growth per cell shows in both measurements."""
    from attnrmt.sweep.store.cell_table import writer as table_writer

    monkeypatch.setattr(table_writer, "ROW_CHUNK", 1024)
    monkeypatch.setattr(table_writer, "VALUE_CHUNK", 1024)
    _gather_peak(1, tmp_path / "warm-up")  # imports (zarr, codecs) are not the gather's
    peaks = [
        min(_gather_peak(n_gamma, tmp_path / f"{n_gamma}-{run}") for run in range(2))
        for n_gamma in (2, 8)
    ]
    assert (peaks[1] - peaks[0]) / 24_000 <= 160, peaks


def test_a_cell_twice_in_one_batch_is_stored_once(tmp_path: Path) -> None:
    """In-batch de-duplication: one batch (the default sizes: a few fragments of a handful
    of cells never reach a flush) holding a cell twice in one fragment and again in
    another is stored once per cell, from its first occurrence, bit-identical to the
    reference. (With a chunk of 3 rows, as the test above uses, a batch is flushed before
    it can hold a duplicate.)"""
    plan = store_plan()
    cells = list(plan.sweeps["grid"].cells)
    directory = tmp_path / "grid" / fragments.FRAGMENTS_DIRNAME
    paths = [directory / "twice.npz", directory / "again.npz", directory / "rest.npz"]
    write_block(plan, paths[0], [cells[0], cells[1], cells[0]])
    write_block(plan, paths[1], [cells[1], cells[2]])
    write_block(plan, paths[2], cells[2:])
    store.gather_cells(plan.sweeps["grid"], paths, tmp_path / "grid" / "cells.zarr", plan.seed)
    table = plain(tmp_path / "grid")
    assert table.sizes["cell"] == len(cells)
    assert_bit_identical(store.open_cells(tmp_path / "grid" / "cells.zarr"), reference(plan))


def test_superseded_rows_on_both_sides_of_a_chunk_boundary_are_all_marked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks of 3 rows: dropping snr 2.0 supersedes rows in every chunk, at its first and
    its last row (either side of each boundary); every one of them, and only they, is
    marked, so the current rows are exactly the shrunk plan's."""
    from attnrmt.sweep.store.cell_table import writer as table_writer

    monkeypatch.setattr(table_writer, "ROW_CHUNK", 3)
    sweep_dir = tmp_path / "grid"
    full, shrunk = store_plan(), store_plan(snr=[0.0])
    gathered(full, sweep_dir)
    gathered(shrunk, sweep_dir)
    table = plain(sweep_dir)
    dropped = np.flatnonzero(table.snr.values != 0.0)
    assert {0, 2} <= set((dropped % 3).tolist())  # rows either side of a boundary
    expected = np.where(table.snr.values != 0.0, 2, 2**31 - 1)
    np.testing.assert_array_equal(table.superseded_at_version.values, expected)
    assert_bit_identical(store.open_cells(sweep_dir), reference(shrunk))
