"""Block fragments (attnrmt.sweep.store.fragments: atomic npz, the cache copy, salvage)
and their integrity: every read verifies what it reads, a damaged file is moved aside
and restored from its intact copy or counted missing. Synthetic cell results (no
simulation, no Dask)."""

from __future__ import annotations

import contextlib
import io
import os
import re
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from attnrmt.sweep import store
from attnrmt.sweep.spec import identity
from attnrmt.sweep.store import fragments
from tests.sweep.conftest import store_plan, synthetic_record, write_block
from tests.sweep.oracles import decode_fragment, read_fragment

# --------------------------------------------------------------------------- fragments


def test_fragment_round_trip_is_bit_identical(tmp_path: Path) -> None:
    plan = store_plan(d=[6, 9], T=[3, 5])
    cells = plan.sweeps["grid"].cells[:7]
    path = tmp_path / "fragments" / "b.npz"
    write_block(plan, path, cells)
    fragment = read_fragment(path)
    assert fragment.cell_keys == [cell.key for cell in cells]
    assert fragment.computed.tolist() == [True] * 7
    for cell, record in zip(cells, fragment.records, strict=True):
        expected = synthetic_record(cell)
        assert set(record) == set(expected)
        for name, value in expected.items():
            np.testing.assert_array_equal(record[name], value, strict=False)
        assert isinstance(record["V"], int) and isinstance(record["alpha"], float)
    with np.load(path, allow_pickle=False) as npz:  # no object arrays anywhere
        assert all(npz[name].dtype != object for name in npz.files)


def test_crash_while_writing_leaves_no_fragment(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "fragments" / "b.npz"
    plan = store_plan()

    def crash(handle, *args, **kwargs):
        handle.write(b"PK\x03\x04 partial zip")
        raise OSError("disk full")

    monkeypatch.setattr(fragments.np, "savez", crash)
    with pytest.raises(OSError, match="disk full"):
        write_block(plan, path)
    assert list(path.parent.iterdir()) == []  # neither the fragment nor a temp file


def test_failed_rewrite_keeps_the_previous_complete_fragment(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "fragments" / "b.npz"
    plan = store_plan()
    write_block(plan, path)
    before = path.read_bytes()
    monkeypatch.setattr(fragments.os, "replace", lambda *a: (_ for _ in ()).throw(OSError("x")))
    with pytest.raises(OSError):
        write_block(plan, path)
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == ["b.npz"]


def test_index_ignores_temporary_and_corrupt_files(tmp_path: Path) -> None:
    plan = store_plan()
    sweep_dir = tmp_path / "grid"
    cells = write_block(plan, sweep_dir / "fragments" / "good.npz", plan.sweeps["grid"].cells[:3])
    salvaged = write_block(
        plan, sweep_dir / "salvage" / "other.npz", plan.sweeps["grid"].cells[3:4]
    )
    (sweep_dir / "fragments" / ".good.npz.123.abc.tmp").write_bytes(b"PK partial")
    (sweep_dir / "fragments" / "truncated.npz").write_bytes(b"PK\x03\x04 truncated")
    keys = [cell.key for cell in plan.sweeps["grid"].cells]
    assert fragments.finished_keys(keys, sweep_dir) == {cell.key for cell in cells + salvaged}


def _ids(plan: Any, cells: Any, seed_offset: int = 0) -> list[tuple[str, str]]:
    return [
        (cell.key, identity.seed_token(cell.seed_words(plan.seed + seed_offset))) for cell in cells
    ]


@pytest.mark.parametrize("merge_every", [1, 2, 64])
def test_the_one_index_locates_cells_merged_or_not(
    tmp_path: Path, monkeypatch, merge_every: int
) -> None:
    """:func:`fragments.locate_cells` (fingerprints, merged every few files): the first
    file holding each cell, exclusions, the sibling sweeps, whether the files are merged
    (1, 2) or not yet (64)."""
    index = fragments.CellIndex()
    index.MERGE_EVERY = merge_every
    monkeypatch.setattr(fragments, "_INDEX", index)
    plan = store_plan()
    grid = plan.sweeps["grid"].cells
    sweep_dir = tmp_path / "grid"
    a = sweep_dir / "fragments" / "a.npz"
    write_block(plan, a, grid[:3])
    write_block(plan, sweep_dir / "salvage" / "b.npz", grid[3:4])
    write_block(plan, sweep_dir / "salvage" / "b2.npz", grid[2:4])  # later: b's cells first
    write_block(plan, tmp_path / "other" / "cache" / "c.npz", grid[4:6])
    (sweep_dir / "fragments" / "truncated.npz").write_bytes(b"PK\x03\x04 truncated")
    wanted = [*_ids(plan, grid), *_ids(plan, grid[:1], 1)]
    expected = {
        **{cell_id: a for cell_id in wanted[:3]},
        wanted[3]: sweep_dir / "salvage" / "b.npz",
        **{cell_id: tmp_path / "other" / "cache" / "c.npz" for cell_id in wanted[4:6]},
    }
    for _ in range(2):  # the second call answers from what the first one read
        located = fragments.locate_cells(wanted, sweep_dir, run_wide=True)
        assert {k: v.resolve() for k, v in located.items()} == {
            k: v.resolve() for k, v in expected.items()
        }
    assert set(fragments.locate_cells(wanted, sweep_dir)) == set(wanted[:4])
    excluded = fragments.locate_cells(wanted, sweep_dir, exclude=[a])
    assert set(excluded) == set(wanted[2:4])
    sources, where = fragments.load_cell_columns(wanted, located)
    assert set(where) == set(wanted[:6])
    for cell_id, (source, row) in where.items():
        stored = sources[source]
        assert (stored["cell_key"][row], stored["cell_seed"][row]) == cell_id


def test_records_match_on_key_and_seed(tmp_path: Path) -> None:
    plan = store_plan()
    sweep_dir = tmp_path / "grid"
    cells = write_block(plan, sweep_dir / "fragments" / "a.npz", plan.sweeps["grid"].cells[:2])
    path = sweep_dir / "fragments" / "a.npz"
    same, other_seed = _ids(plan, cells[:1])[0], _ids(plan, cells[:1], 1)[0]
    sources, where = fragments.load_cell_columns([same, other_seed], {same: path, other_seed: path})
    assert list(where) == [same]
    source, row = where[same]
    record = decode_fragment(sources[source]).records[row]
    np.testing.assert_array_equal(record["eigenvalues"], synthetic_record(cells[0])["eigenvalues"])


def _columns_of(cells: list[Any], environment: str | None, attempt: int) -> dict[str, Any]:
    """Fragment columns of ``cells`` with synthetic records; ``environment`` None: a
    fragment written before provenance (no provenance members)."""
    records = [
        {**synthetic_record(cell), "environment": environment, "attempt": attempt}
        if environment is not None
        else synthetic_record(cell)
        for cell in cells
    ]
    arrays = fragments.encode_fragment(
        [cell.key for cell in cells],
        [f"[{i}]" for i in range(len(cells))],
        [True] * len(cells),
        records,
    )
    if environment is None:
        for name in ("environments", "environment_id", "peak_memory_bytes", "attempt"):
            del arrays[name]
    return arrays


def test_taking_cells_from_columns_equals_encoding_their_records() -> None:
    """take_cells (the block job's fragment, from its tasks' and reused fragments' columns)
    writes what encode_fragment writes for the decoded records of the same cells, member
    for member in value, dtype and shape: interleaved sources, a cell taken twice, a
    source written before provenance, two environments; with_identity sets keys, seeds,
    computed and attempt. Shown to bite: offsets not rebased per run (a run starting past
    row 0) fail the ragged members."""
    plan = store_plan(d=[6, 9], T=[3, 5])
    cells = list(plan.sweeps["grid"].cells[:9])
    sources = [
        _columns_of(cells[:4], '{"env": "a"}', 1),
        _columns_of(cells[4:6], None, 0),
        _columns_of(cells[6:], '{"env": "b"}', 2),
    ]
    picks = [(2, 1), (0, 2), (0, 3), (1, 1), (2, 0), (0, 0), (0, 2), (1, 0), (2, 2)]
    taken = fragments.take_cells(sources, picks)
    decoded = [decode_fragment(source) for source in sources]
    records = [decoded[source].records[row] for source, row in picks]
    expected = fragments.encode_fragment(
        [decoded[source].cell_keys[row] for source, row in picks],
        [decoded[source].cell_seeds[row] for source, row in picks],
        [True] * len(picks),
        records,
    )
    assert set(taken) == set(expected)
    for name, array in expected.items():
        assert taken[name].dtype == array.dtype and taken[name].shape == array.shape, name
        assert taken[name].tobytes() == array.tobytes(), name
    assert fragments.schema_problem(taken) is None
    assert taken["environments"].tolist() == ['{"env": "b"}', '{"env": "a"}']
    marked = fragments.with_identity(taken, cell_keys=["k"] * 9, computed=[False] * 9, attempt=4)
    assert marked["cell_key"].tolist() == ["k"] * 9 and not marked["computed"].any()
    assert marked["attempt"].tolist() == [4] * 9
    assert marked["cell_seed"] is taken["cell_seed"]
    with pytest.raises(ValueError, match="cell_seed: 1 values for 9 cells"):
        fragments.with_identity(taken, cell_seeds=["[0]"])
    empty = fragments.take_cells(sources, [])
    assert {name: a.tolist() for name, a in empty.items()} == {
        name: a.tolist() for name, a in fragments.encode_fragment([], [], [], []).items()
    }


def test_fast_fragment_reader_equals_numpy_load(tmp_path: Path) -> None:
    """:func:`read_fragment_arrays` gives numpy.load's arrays (names, dtypes, shapes,
    values) for a fragment of the block writer, and None for a torn file."""
    plan = store_plan(d=[6, 9], T=[3, 5])
    path = tmp_path / "fragments" / "b.npz"
    write_block(plan, path, plan.sweeps["grid"].cells[:9])
    compressed = tmp_path / "compressed.npz"  # members read through zipfile
    with np.load(path, allow_pickle=False) as npz:
        np.savez_compressed(compressed, **{name: npz[name] for name in npz.files})
    for candidate in (path, compressed):
        arrays = fragments.read_fragment_arrays(candidate)
        with np.load(path, allow_pickle=False) as npz:
            assert set(arrays) == set(npz.files)
            for name in npz.files:
                np.testing.assert_array_equal(arrays[name], npz[name], strict=True)
    torn = tmp_path / "torn.npz"
    torn.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert fragments.read_fragment_arrays(torn) is None


# --------------------------------------------------------------------------- integrity


def _published(plan: Any, sweep_dir: Path, block: Any) -> Path:
    """A block's fragment and cache copy as a block job writes them."""
    cells = list(block.cells)
    arrays = fragments.encode_fragment(
        [cell.key for cell in cells],
        [identity.seed_token(cell.seed_words(plan.seed)) for cell in cells],
        [True] * len(cells),
        [synthetic_record(cell) for cell in cells],
    )
    return fragments.publish_fragment(
        sweep_dir / fragments.FRAGMENTS_DIRNAME / f"{block.key}.npz", arrays
    )


def _arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}


def test_result_fields_are_the_cell_result_fields() -> None:
    """The members a fragment must hold are exactly CellResult's record fields (those
    without a default: the K-class extras are optional), ragged where the field is an
    array."""
    from attnrmt.model.cell import CellResult

    record = [field for field in fields(CellResult) if field.default is MISSING]
    assert set(fragments.RESULT_FIELDS) == {field.name for field in record}
    assert set(fragments.RAGGED_FIELDS) == {
        field.name for field in record if "ndarray" in str(field.type)
    }


def test_publish_writes_two_independent_copies(tmp_path: Path) -> None:
    plan = store_plan()
    path = _published(plan, tmp_path / "grid", plan.sweeps["grid"].blocks[0])
    cached = fragments.twin_of(path)
    assert cached == tmp_path / "grid" / "cache" / path.name
    assert cached.read_bytes() == path.read_bytes()
    assert cached.stat().st_ino != path.stat().st_ino  # damage to one leaves the other
    assert fragments.twin_of(cached) == path
    assert fragments.twin_of(tmp_path / "grid" / "salvage" / "b" / "t.npz") is None


def _byte_positions(size: int, rng: np.random.Generator) -> list[int]:
    """Every third byte of the zip structures at both ends (the first local headers and
    .npy headers, the central directory, the end records), every byte of the last 100,
    and 150 random ones in between (~700 positions: a few seconds)."""
    edges = [
        *range(0, min(400, size), 3),
        *range(max(0, size - 1200), size, 3),
        *range(max(0, size - 100), size),
    ]
    return sorted(set(edges) | set(rng.integers(0, size, 150).tolist()))


def test_no_single_damaged_byte_is_ever_read_back(tmp_path: Path) -> None:
    """Inverting any one byte of a fragment: the full reader gives None (damage found,
    file moved aside) or exactly the original arrays (a byte no member depends on, e.g.
    a time stamp); the cell-id reader raises FragmentDamaged or gives the original ids.
    Never a wrong value."""
    plan = store_plan(d=[6, 9], T=[3, 5])
    path = tmp_path / "grid" / "fragments" / "b.npz"
    write_block(plan, path, plan.sweeps["grid"].cells[:9])
    original, pristine = _arrays(path), path.read_bytes()
    ids = fragments.read_fragment_cell_ids(path)
    in_data = {
        position
        for _, begin, size, _, _ in fragments._member_spans(pristine)
        for position in range(begin, begin + size)
    }
    missed_data, found_ids = [], 0
    for position in _byte_positions(len(pristine), np.random.default_rng(7)):
        damaged = bytearray(pristine)
        damaged[position] ^= 0xFF
        path.write_bytes(bytes(damaged))
        with contextlib.redirect_stderr(io.StringIO()):
            arrays = fragments.read_fragment_arrays(path)
        if arrays is not None:  # nothing read changed: the very same arrays
            assert set(arrays) == set(original), position
            for name, value in original.items():
                np.testing.assert_array_equal(arrays[name], value, strict=True)
            if position in in_data:
                missed_data.append(position)
        path.write_bytes(bytes(damaged))
        try:
            with contextlib.redirect_stderr(io.StringIO()):
                assert fragments.read_fragment_cell_ids(path) == ids, position
        except fragments.FragmentDamaged:
            found_ids += 1
    # a byte of any member's data (the .npy header or its values) is always found (CRC32
    # catches every error burst up to 32 bits); what goes unnoticed is zip metadata no
    # reader uses (time stamps, "version made by", attributes)
    assert missed_data == []
    assert found_ids > 0


@pytest.mark.parametrize("keep", [0.0, 0.3, 0.5, 0.9, 0.999])
def test_a_truncated_fragment_is_found_by_every_reader(tmp_path: Path, keep: float) -> None:
    plan = store_plan()
    path = tmp_path / "grid" / "fragments" / "b.npz"
    write_block(plan, path)
    pristine = path.read_bytes()
    readers = [
        read_fragment,
        fragments.read_fragment_cell_ids,
        lambda p: fragments.read_fragment_members(p, ("computed",)),
    ]
    for reader in readers:
        path.write_bytes(pristine[: int(keep * len(pristine))])
        with pytest.raises(fragments.FragmentDamaged), contextlib.redirect_stderr(io.StringIO()):
            reader(path)
        assert not path.exists()  # moved aside
    assert len(list((tmp_path / "grid" / fragments.DAMAGED_DIRNAME).iterdir())) == 3


def test_a_damaged_fragment_is_restored_from_its_cache_copy(tmp_path: Path, capsys) -> None:
    plan = store_plan()
    sweep_dir = tmp_path / "grid"
    path = _published(plan, sweep_dir, plan.sweeps["grid"].blocks[0])
    cached = fragments.twin_of(path)
    os.utime(cached, ns=(1_000_000_000, 1_000_000_000))
    original = _arrays(cached)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    arrays = fragments.read_fragment_arrays(path)
    for name, value in original.items():  # the intact copy's cells
        np.testing.assert_array_equal(arrays[name], value, strict=True)
    assert path.read_bytes() == cached.read_bytes()  # restored in place
    assert path.stat().st_mtime_ns == cached.stat().st_mtime_ns  # as old as its copy
    (moved,) = (sweep_dir / fragments.DAMAGED_DIRNAME).iterdir()
    assert moved.name.endswith(f"-fragments-{path.name}") and moved.read_bytes() == data
    message = capsys.readouterr().err
    assert f"damaged fragment {path}" in message and "CRC32 mismatch" in message
    assert f"moved to {moved}" in message and f"restored from its intact copy {cached}" in message
    # and the other way round: a damaged cache copy comes back from the fragment
    cached.write_bytes(cached.read_bytes()[:100])
    assert fragments.read_fragment_cell_ids(cached) == fragments.read_fragment_cell_ids(path)
    assert cached.read_bytes() == path.read_bytes()


def test_both_copies_damaged_the_cells_are_missing_everywhere(tmp_path: Path, capsys) -> None:
    plan = store_plan()
    sweep = plan.sweeps["grid"]
    sweep_dir = tmp_path / "grid"
    paths = [_published(plan, sweep_dir, block) for block in sweep.blocks]
    lost = paths[1]
    for copy in (lost, fragments.twin_of(lost)):
        copy.write_bytes(copy.read_bytes()[:-30])
    expected = {key for block in sweep.blocks if block.key != lost.stem for key in block.cell_keys}
    assert fragments.finished_keys(sweep.cell_keys(), sweep_dir) == expected
    message = capsys.readouterr().err
    assert f"damaged fragment {lost}" in message and "is damaged too" in message
    assert "its cells count as missing; rerun the same command" in message
    assert not lost.exists() and not fragments.twin_of(lost).exists()
    with pytest.raises(fragments.FragmentsLost, match=re.escape(str(lost))):
        fragments.raise_for_lost_fragments(paths)
    fragments.raise_for_lost_fragments(paths[:1])  # nothing lost: no error


@pytest.mark.parametrize(
    "change", ["missing field", "short column", "offsets", "top-k", "seeds", "format"]
)
def test_members_and_shapes_are_checked(tmp_path: Path, change: str) -> None:
    """A fragment whose bytes are intact (valid CRCs) but whose members are not what a
    block writes is damaged too."""
    plan = store_plan()
    path = tmp_path / "grid" / "fragments" / "b.npz"
    write_block(plan, path)
    arrays = dict(_arrays(path))
    assert fragments.schema_problem(arrays) is None
    if change == "missing field":
        del arrays["alpha"]
    elif change == "short column":
        arrays["kappa"] = arrays["kappa"][:-1]
    elif change == "offsets":
        arrays["eigenvalues__offsets"] = arrays["eigenvalues__offsets"] + 1
    elif change == "top-k":
        values = arrays["overlap_signal__values"]
        arrays["overlap_signal__values"] = values[:-1]
        arrays["overlap_signal__offsets"] = np.minimum(
            arrays["overlap_signal__offsets"], values.size - 1
        )
    elif change == "seeds":
        arrays["cell_seed"] = arrays["cell_seed"][:-1]
    else:
        arrays["format_version"] = np.array([1, 1])
    assert fragments.schema_problem(arrays) is not None
    fragments.write_fragment(path, arrays)
    with pytest.raises(fragments.FragmentDamaged), contextlib.redirect_stderr(io.StringIO()):
        read_fragment(path)


def test_a_file_rewritten_since_it_was_read_is_not_moved_aside(tmp_path: Path) -> None:
    plan = store_plan()
    path = tmp_path / "grid" / "fragments" / "b.npz"
    write_block(plan, path)
    assert fragments.quarantine(path, inode=path.stat().st_ino + 1) is None
    assert path.exists()
    moved = fragments.quarantine(path, inode=path.stat().st_ino)
    assert moved is not None and moved.parent == tmp_path / "grid" / "damaged"
    assert fragments.quarantine(path) is None  # gone already


def test_salvaged_tasks_are_listed_reused_and_cleared(tmp_path: Path) -> None:
    plan = store_plan()
    sweep = plan.sweeps["grid"]
    sweep_dir = tmp_path / "grid"
    block = sweep.blocks[0]
    first = _published(plan, sweep_dir, sweep.blocks[1])
    for index, cell in enumerate(block.cells[:2]):
        arrays = fragments.encode_fragment(
            [cell.key],
            [identity.seed_token(cell.seed_words(plan.seed))],
            [True],
            [synthetic_record(cell)],
        )
        fragments.write_salvage(sweep_dir, block.key, f"task{index}", arrays)
    salvaged = [fragments.salvage_dir(sweep_dir, block.key) / f"task{i}.npz" for i in (0, 1)]
    assert fragments.fragment_paths(sweep_dir) == [first, *salvaged, fragments.twin_of(first)]
    assert fragments.finished_keys(block.cell_keys, sweep_dir) == set(block.cell_keys[:2])
    wanted = [(cell.key, identity.seed_token(cell.seed_words(plan.seed))) for cell in block.cells]
    assert set(fragments.locate_cells(wanted, sweep_dir)) == set(wanted[:2])
    fragments.clear_salvage(sweep_dir, block.key)
    assert not fragments.salvage_dir(sweep_dir, block.key).exists()
    assert fragments.fragment_paths(sweep_dir) == [first, fragments.twin_of(first)]


def _overwrite_member(path: Path, member: str, value: float) -> None:
    """Overwrite the first float64 of one member's data in place (the CRCs stay stale),
    keeping the mtime: what a stray writer does."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    (begin,) = [
        begin
        for name, begin, _, _, _ in fragments._member_spans(bytes(data))
        if name == f"{member}.npy"
    ]
    header = int.from_bytes(data[begin + 8 : begin + 10], "little")
    start = begin + 10 + header
    data[start : start + 8] = np.float64(value).tobytes()
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_a_gather_stores_no_damaged_value(tmp_path: Path, capsys) -> None:
    """An eigenvalue overwritten with 3.94e181 in a fragment: with its cache copy intact
    the table holds the true value; with both copies overwritten the block's cells are
    absent (never the wrong number) and the gather's caller is told."""
    plan = store_plan()
    sweep = plan.sweeps["grid"]
    sweep_dir = tmp_path / "grid"
    paths = [_published(plan, sweep_dir, block) for block in sweep.blocks]
    _overwrite_member(paths[0], "eigenvalues__values", 3.94e181)
    for copy in (paths[1], fragments.twin_of(paths[1])):
        _overwrite_member(copy, "eigenvalues__values", 3.94e181)
    out = store.gather_cells(sweep, paths, sweep_dir / "cells.zarr", plan.seed)
    view = store.open_cells(out).load()
    assert np.nanmax(view["eigenvalues"].values) < 1e3
    n_lost = len(sweep.blocks[1].cells)
    assert view.attrs["cells_present"] == len(sweep.cells) - n_lost
    assert capsys.readouterr().err.count("damaged fragment") == 2
    with pytest.raises(fragments.FragmentsLost):
        fragments.raise_for_lost_fragments(paths)
    reference = {cell.key: synthetic_record(cell) for cell in sweep.cells}
    kept = [key for block in sweep.blocks if block.key != paths[1].stem for key in block.cell_keys]
    stored = {
        key: values
        for key, values in zip(
            view["cell_key"].values.ravel().tolist(),
            view["eigenvalues"].values.reshape(-1, view["eigenvalues"].shape[-1]),
            strict=True,
        )
    }
    for key in kept:
        expected = reference[key]["eigenvalues"]
        np.testing.assert_array_equal(stored[key][: expected.size], expected)


def test_status_plan_and_summary_agree_on_a_truncated_fragment(tmp_path: Path) -> None:
    from attnrmt.cli import sweep_summary
    from attnrmt.sweep.report import status
    from attnrmt.sweep.report.status import count_sweep
    from attnrmt.sweep.report.summary import tally_cells

    plan = store_plan()
    sweep = plan.sweeps["grid"]
    run_dir = tmp_path / "unit"
    paths = [_published(plan, run_dir / "grid", block) for block in sweep.blocks]
    paths[0].write_bytes(paths[0].read_bytes()[: paths[0].stat().st_size // 2])
    os.remove(fragments.twin_of(paths[0]))  # no copy to restore it from
    done = len(sweep.cells) - len(sweep.blocks[0].cells)
    with contextlib.redirect_stderr(io.StringIO()):
        assert status.run_status(plan, run_dir).total.done == done
        count = count_sweep(sweep, run_dir / "grid")
        assert sweep_summary(sweep, count.done, 1e-9)["done_cells"] == done
        tally = tally_cells(plan, run_dir, None)
    assert tally.planned - tally.missing == done
