"""Fragments (atomic npz), gather into cells.zarr, theory.zarr and open_results, with
synthetic cell results (no simulation, no Dask)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from attnrmt.contract import PROVENANCE_FIELDS
from attnrmt.sweep import fragments, store
from attnrmt.sweep.plan import plan_run
from attnrmt.theory import bulk_edges, mean_spike, spike
from tests.sweep.conftest import (
    synthetic_record,
    tiny_config,
    tiny_plan,
    write_block,
    write_block_fragments,
)

# --------------------------------------------------------------------------- fragments


def test_fragment_round_trip_is_bit_identical(tmp_path: Path) -> None:
    plan = tiny_plan(d=[6, 9], T=[3, 5])
    cells = plan.sweeps["grid"].cells[:7]
    path = tmp_path / "fragments" / "b.npz"
    write_block(plan, path, cells)
    fragment = store.read_fragment(path)
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
    plan = tiny_plan()

    def crash(handle, *args, **kwargs):
        handle.write(b"PK\x03\x04 partial zip")
        raise OSError("disk full")

    monkeypatch.setattr(fragments.np, "savez", crash)
    with pytest.raises(OSError, match="disk full"):
        write_block(plan, path)
    assert list(path.parent.iterdir()) == []  # neither the fragment nor a temp file


def test_failed_rewrite_keeps_the_previous_complete_fragment(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "fragments" / "b.npz"
    plan = tiny_plan()
    write_block(plan, path)
    before = path.read_bytes()
    monkeypatch.setattr(fragments.os, "replace", lambda *a: (_ for _ in ()).throw(OSError("x")))
    with pytest.raises(OSError):
        write_block(plan, path)
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == ["b.npz"]


def test_index_ignores_temporary_and_corrupt_files(tmp_path: Path) -> None:
    plan = tiny_plan()
    sweep_dir = tmp_path / "grid"
    cells = write_block(plan, sweep_dir / "fragments" / "good.npz", plan.sweeps["grid"].cells[:3])
    salvaged = write_block(
        plan, sweep_dir / "salvage" / "other.npz", plan.sweeps["grid"].cells[3:4]
    )
    (sweep_dir / "fragments" / ".good.npz.123.abc.tmp").write_bytes(b"PK partial")
    (sweep_dir / "fragments" / "truncated.npz").write_bytes(b"PK\x03\x04 truncated")
    index = store.fragment_index(sweep_dir)
    assert {key for key, _ in index} == {cell.key for cell in cells + salvaged}
    assert store.finished_cell_keys(sweep_dir) == {cell.key for cell in cells + salvaged}
    excluded = store.fragment_index(sweep_dir, exclude=[sweep_dir / "fragments" / "good.npz"])
    assert {key for key, _ in excluded} == {salvaged[0].key}


@pytest.mark.parametrize("merge_every", [1, 2, 64])
def test_locate_cells_finds_what_the_full_index_finds(
    tmp_path: Path, monkeypatch, merge_every: int
) -> None:
    """Block jobs ask :func:`fragments.locate_cells` (fingerprints, merged every few
    files) instead of building the run's whole index: same answers, same exclusions, in
    the sibling sweeps too, whether the files are merged (1, 2) or not yet (64)."""
    locator = fragments.CellLocator()
    locator.MERGE_EVERY = merge_every
    monkeypatch.setattr(fragments, "_LOCATOR", locator)
    plan = tiny_plan()
    grid = plan.sweeps["grid"].cells
    sweep_dir = tmp_path / "grid"
    write_block(plan, sweep_dir / "fragments" / "a.npz", grid[:3])
    write_block(plan, sweep_dir / "salvage" / "b.npz", grid[3:4])
    write_block(plan, tmp_path / "other" / "cache" / "c.npz", grid[4:6])
    (sweep_dir / "fragments" / "truncated.npz").write_bytes(b"PK\x03\x04 truncated")
    wanted = [(cell.key, store.seed_token(cell.seed_words(plan.seed))) for cell in grid]
    wanted.append((grid[0].key, store.seed_token(grid[0].seed_words(plan.seed + 1))))
    for _ in range(2):  # the second call answers from what the first one read
        full = store.fragment_index(sweep_dir, run_wide=True)
        located = fragments.locate_cells(wanted, sweep_dir, run_wide=True)
        assert located == {cell_id: full[cell_id] for cell_id in wanted if cell_id in full}
        assert set(located) == set(wanted[:6])
    own = fragments.locate_cells(wanted, sweep_dir)
    assert set(own) == set(wanted[:4])
    excluded = fragments.locate_cells(
        wanted, sweep_dir, exclude=[sweep_dir / "fragments" / "a.npz"]
    )
    assert set(excluded) == {wanted[3]}
    records = store.load_cell_records(wanted, located)
    assert set(records) == set(wanted[:6])


def test_records_match_on_key_and_seed(tmp_path: Path) -> None:
    plan = tiny_plan()
    sweep_dir = tmp_path / "grid"
    cells = write_block(plan, sweep_dir / "fragments" / "a.npz", plan.sweeps["grid"].cells[:2])
    index = store.fragment_index(sweep_dir)
    same = (cells[0].key, store.seed_token(cells[0].seed_words(plan.seed)))
    other_seed = (cells[0].key, store.seed_token(cells[0].seed_words(plan.seed + 1)))
    records = store.load_cell_records([same, other_seed], index)
    assert list(records) == [same]
    np.testing.assert_array_equal(
        records[same]["eigenvalues"], synthetic_record(cells[0])["eigenvalues"]
    )


# --------------------------------------------------------------------------- cells.zarr


def test_gather_places_every_cell_and_pads(tmp_path: Path) -> None:
    plan = tiny_plan(d=[6, 9], T=[3, 5])
    sweep = plan.sweeps["grid"]
    paths = []
    for index, block in enumerate(sweep.blocks):
        path = tmp_path / "fragments" / f"{index}.npz"
        write_block(plan, path, list(block.cells))
        paths.append(path)
    out = store.gather_cells(sweep, paths, tmp_path / "cells.zarr", plan.seed)
    cells = store.open_cells(out).load()
    assert cells.sizes["eig"] == 9 and cells.sizes["position"] == 5
    assert list(cells.dims)[:8] == list(store.AXES)
    for cell in sweep.cells[::5]:
        point = cells.sel(
            **{axis: getattr(cell, axis) for axis in store.AXES}, replicate=cell.replicate
        )
        expected = synthetic_record(cell)
        assert point.cell_key.item() == cell.key
        np.testing.assert_array_equal(point.eigenvalues[: cell.d], expected["eigenvalues"])
        assert np.isnan(point.eigenvalues[cell.d :]).all()
        np.testing.assert_array_equal(
            point.effective_weights[: cell.T], expected["effective_weights"]
        )
        assert point.alpha_replicate.item() == expected["alpha"]
        assert point.V.item() == expected["V"]
    # alpha over the axes is the replicate mean (replicates differ by 1 here)
    xr.testing.assert_allclose(cells.alpha, cells.alpha_replicate.mean("replicate"))
    assert cells.attrs["cells_present"] == cells.attrs["cells_total"] == len(sweep.cells)
    assert not any(p.name.startswith(".") for p in tmp_path.rglob("*") if p.is_dir())


def test_absent_cells_are_nan_minus_one_and_empty(tmp_path: Path) -> None:
    plan = tiny_plan()
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
    plan = tiny_plan()
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


# --------------------------------------------------------------------------- theory.zarr


def test_theory_matches_spike_predictions(tmp_path: Path) -> None:
    plan = tiny_plan(d=[40])
    sweep = plan.sweeps["grid"]
    out = store.write_theory(sweep, tmp_path / "theory.zarr", plan.seed)
    theory = xr.open_zarr(out).load()
    assert theory.variant.values.tolist() == ["paper", "finite_vocab"]
    assert "replicate" not in theory.dims
    point = theory.sel(d=40, delta=0.5, gamma=0.5, T=3, positional="prefix2", centered=True)
    # mean weights on T=3 with prefix L=2: alpha = (1/9) * (4 + 1) = 5/9, kappa = 1/3
    alpha, kappa = point.alpha.sel(weights="mean").item(), point.kappa.sel(weights="mean").item()
    assert alpha == pytest.approx(5 / 9) and kappa == pytest.approx(1 / 3)
    delta_eff = theory.delta_effective.item()
    gamma_eff = theory.gamma_effective.item()
    for variant in ("paper", "finite_vocab"):
        expected = spike(delta_eff, gamma_eff, 2.0, alpha, kappa, variant=variant)
        got = point.sel(weights="mean", snr=2.0, variant=variant)
        assert got.threshold_snr_sample.item() == pytest.approx(expected.threshold_snr_sample)
        np.testing.assert_allclose(got.sample_outlier.item(), expected.sample_outlier)
    _, upper = bulk_edges(delta_eff, gamma_eff)
    assert point.bulk_upper_edge.sel(weights="mean", snr=0.0, variant="paper").item() == (
        pytest.approx(kappa * upper)
    )
    # the mean spike exists only for uncentred S
    assert np.isnan(theory.mean_spike_outlier.sel(centered=True)).all()
    sigma = point.sigma.sel(weights="mean").item()
    expected_mean = mean_spike(delta_eff, gamma_eff, sigma, kappa)
    np.testing.assert_allclose(
        theory.mean_spike_pop_outlier.sel(
            d=40, delta=0.5, gamma=0.5, T=3, positional="prefix2", weights="mean", snr=0.0
        ).sel(centered=False),
        expected_mean.population_outlier,
    )
    assert (theory.alpha.sel(weights="causal1") > 0).all()  # causal_attention -> its limit


def test_open_results_has_one_group_per_sweep(tmp_path: Path) -> None:
    plan = tiny_plan()
    sweep = plan.sweeps["grid"]
    run_dir = tmp_path / "results" / "unit"
    store.write_theory(sweep, run_dir / "grid" / "theory.zarr", plan.seed)
    records = {cell.key: synthetic_record(cell) for cell in sweep.cells}
    store.write_zarr_atomically(
        store.cells_dataset(sweep, records, plan.seed), run_dir / "grid" / "cells.zarr"
    )
    xr.Dataset({"x": ("snr", [1.0, 2.0])}).to_zarr(
        run_dir / "grid" / "analysis.zarr", zarr_format=3, consolidated=False
    )
    (run_dir / "logs").mkdir()
    tree = store.open_results(run_dir)
    assert set(tree.children) == {"grid"}
    assert set(tree["grid"].children) == {"cells", "theory", "analysis"}
    assert tree["grid/cells"].dataset.attrs["root_seed"] == 5
    with pytest.raises(FileNotFoundError):
        store.open_results(tmp_path / "nope")


# --------------------------------------------------------------------------- CLI types


def test_command_line_strings_get_their_schema_types_back() -> None:
    from attnrmt.sweep.config import load_schema
    from attnrmt.sweep.config_types import restore_scalar_types

    # what Snakemake makes of a profile's `config: {dask: {...}}` (YAML BaseLoader)
    config = {
        "run": "2026",  # a string in the schema: stays a string
        "dask": {
            "mode": "slurm",
            "n_workers": "null",
            "dashboard": "false",
            "jobqueue": {"cores": "4", "memory": "16GB", "walltime": "02:00:00", "queue": "null"},
        },
        "positional_models": {"m": {"kind": "markov", "r": "0.5"}},
        "sweeps": {"a": {"d": ["20", "40"], "centered": ["true"], "replicates": "2"}},
    }
    same_object = config["dask"]
    restored = restore_scalar_types(config, load_schema())
    assert restored is config and config["dask"] is same_object  # updated in place
    assert config["run"] == "2026"
    assert config["dask"]["n_workers"] is None and config["dask"]["dashboard"] is False
    assert config["dask"]["jobqueue"] == {
        "cores": 4,
        "memory": "16GB",
        "walltime": "02:00:00",
        "queue": None,
    }
    assert config["positional_models"]["m"]["r"] == 0.5
    assert config["sweeps"]["a"] == {"d": [20, 40], "centered": [True], "replicates": 2}


# --------------------------------------------------------------------------- cell table


def _gathered(plan: Any, sweep_dir: Path) -> Path:
    """Fragments of every block of ``plan`` in ``sweep_dir``, gathered; the cells.zarr."""
    paths = write_block_fragments(plan, sweep_dir)
    return store.gather_cells(plan.sweeps["grid"], paths, sweep_dir / "cells.zarr", plan.seed)


def _reference(plan: Any) -> xr.Dataset:
    sweep = plan.sweeps["grid"]
    return store.cells_dataset(
        sweep, {cell.key: synthetic_record(cell) for cell in sweep.cells}, plan.seed
    )


def _without_store_attrs(dataset: xr.Dataset) -> xr.Dataset:
    """The view minus what only the table has (format, spectrum storage, provenance)."""
    extra = ("store_format_version", "spectrum_storage", "environments")
    trimmed = dataset.drop_vars([name for name in PROVENANCE_FIELDS if name in dataset])
    trimmed.attrs = {k: v for k, v in dataset.attrs.items() if k not in extra}
    return trimmed


def assert_bit_identical(view: xr.Dataset, reference: xr.Dataset) -> None:
    """Same variables, dims, coords, attrs and values (NaN where NaN) as the reference."""
    xr.testing.assert_identical(_without_store_attrs(view.load()), reference)


def test_view_is_lazy_and_bit_identical_to_the_dense_assembly(tmp_path: Path) -> None:
    plan = tiny_plan(d=[6, 9], T=[3, 5])
    out = _gathered(plan, tmp_path / "grid")
    view = store.open_cells(out)
    assert all(view[name].chunks is not None for name in view.data_vars)  # dask-backed
    assert view.attrs["store_format_version"] == store.STORE_FORMAT_VERSION
    assert_bit_identical(view, _reference(plan))
    # the sweep directory opens the same (newest) version
    assert_bit_identical(store.open_cells(tmp_path / "grid"), _reference(plan))


def test_spectra_are_stored_ragged_not_padded(tmp_path: Path) -> None:
    import zarr

    plan = tiny_plan(d=[6, 90])
    _gathered(plan, tmp_path / "grid")
    (segment,) = (tmp_path / "grid" / "cell_table" / "segments").iterdir()
    values = zarr.open_array(str(segment / "eigenvalues__values"), mode="r")
    # exactly sum(d) values: padding every spectrum to max(d) would store 2 x 90 per pair
    assert values.shape[0] == sum(cell.d for cell in plan.sweeps["grid"].cells)


@pytest.mark.parametrize(
    ("chunk", "n_rows", "expected"), [(64, 10, (10,)), (4, 10, (4,)), (4, 0, (1,))]
)
def test_segment_columns_shorter_than_a_chunk_are_chunked_by_their_length(
    tmp_path: Path, chunk: int, n_rows: int, expected: tuple[int]
) -> None:
    """A column shorter than one chunk (a small update's segment) is one chunk of its own
    length, so Zarr does not fill and compress a whole ``ROW_CHUNK``; a longer one keeps
    chunks of ``chunk`` rows; the values read back are the values appended."""
    import zarr

    from attnrmt.sweep.table_writer import _Appender

    group = zarr.open_group(str(tmp_path / "segment"), mode="w", zarr_format=3)
    column = _Appender(group, "x", chunk)
    values = np.arange(n_rows, dtype=np.float64)
    for part in np.array_split(values, 3):
        column.add(part)
    column.close()
    stored = zarr.open_array(str(tmp_path / "segment" / "x"), mode="r")
    assert stored.chunks == expected
    np.testing.assert_array_equal(stored[:], values)


EXTENSIONS = {
    "snr": {"snr": [0.0, 2.0, 3.0]},
    "replicates": {"replicates": 3},
    "positional": {"positional": ["prefix2", "markov"]},
    "weights": {"weights": ["mean", "causal1", "harmonic"]},
    "d": {"d": [6, 8]},
}


def extended_plan(kind: str) -> Any:
    from attnrmt.sweep.plan import plan_run

    config = tiny_config(**EXTENSIONS[kind])
    config["positional_models"]["markov"] = {"kind": "markov", "r": 0.5}
    return plan_run(config)


@pytest.mark.parametrize("kind", sorted(EXTENSIONS))
def test_incremental_update_equals_from_scratch(tmp_path: Path, kind: str) -> None:
    base, extended = tiny_plan(), extended_plan(kind)
    incremental = tmp_path / "incremental" / "grid"
    _gathered(base, incremental)
    first = json.loads((incremental / "cell_table" / "manifest.json").read_text())
    _gathered(extended, incremental)
    scratch = _gathered(extended, tmp_path / "scratch" / "grid")
    manifest = json.loads((incremental / "cell_table" / "manifest.json").read_text())
    # the update appended one segment holding only the new cells; old ones untouched
    assert manifest["segments"][:-1] == first["segments"]
    n_new = len(extended.sweeps["grid"].cells) - len(base.sweeps["grid"].cells)
    assert manifest["segments"][-1]["rows"] == n_new
    view = store.open_cells(incremental / "cells.zarr")
    assert_bit_identical(view, _reference(extended))
    xr.testing.assert_identical(
        _without_store_attrs(view.load()), _without_store_attrs(store.open_cells(scratch).load())
    )


def _carried_and_looked_up(plan: Any, sweep_dir: Path) -> tuple[Any, np.ndarray]:
    """Rows of ``plan``'s cells in the current table version: carried over by coordinates
    from the previous grid (None when not applicable) and looked up id by id."""
    from attnrmt.sweep import table_writer as writer

    directory = sweep_dir / "cell_table"
    manifest = json.loads((directory / "manifest.json").read_text())
    sweep = plan.sweeps["grid"]
    positions, _ = writer.plan_grid(sweep)
    carried = writer.carried_rows(
        directory,
        manifest,
        sweep,
        writer.grid_identity(sweep, plan.seed),
        positions,
        lambda indices: writer.plan_cell_ids([sweep.cells[i] for i in indices], plan.seed),
    )
    looked_up = writer.IdIndex(writer.read_table_ids(directory, manifest["segments"])).find(
        writer.plan_cell_ids(sweep.cells, plan.seed)
    )
    return carried, looked_up


def test_many_small_updates_carry_rows_and_equal_from_scratch(tmp_path: Path) -> None:
    """Eight successive small extensions (one snr value at a time, then a replicate, a
    weights model, a positional model and a d): before each, the rows carried over from
    the previous grid version equal an id-by-id lookup; each update appends one segment
    of only its new cells; the end result is bit-identical to a from-scratch store."""
    snr = [0.0]
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
    previous = tiny_plan(snr=snr)
    _gathered(previous, sweep_dir)
    for step in steps:
        plan = tiny_plan(**step)
        carried, looked_up = _carried_and_looked_up(plan, sweep_dir)
        assert carried is not None, step
        np.testing.assert_array_equal(carried, looked_up)
        assert np.count_nonzero(carried >= 0) == len(previous.sweeps["grid"].cells)
        before = json.loads((sweep_dir / "cell_table" / "manifest.json").read_text())
        _gathered(plan, sweep_dir)
        after = json.loads((sweep_dir / "cell_table" / "manifest.json").read_text())
        assert after["segments"][:-1] == before["segments"]
        assert after["segments"][-1]["rows"] == (
            len(plan.sweeps["grid"].cells) - len(previous.sweeps["grid"].cells)
        )
        previous = plan
    assert len(after["segments"]) == len(steps) + 1
    scratch = _gathered(previous, tmp_path / "scratch" / "grid")
    view = store.open_cells(sweep_dir / "cells.zarr")
    assert_bit_identical(view, _reference(previous))
    xr.testing.assert_identical(
        _without_store_attrs(view.load()), _without_store_attrs(store.open_cells(scratch).load())
    )


@pytest.mark.parametrize("change", ["spec", "seed", "top_k"])
def test_rows_are_not_carried_when_ids_change_at_equal_coordinates(
    tmp_path: Path, change: str
) -> None:
    """A model name given another spec, another root seed or another top_k changes every
    id at the same coordinates: the update looks the cells up instead, and stores the
    new cells (bit-identical to a from-scratch store)."""
    from attnrmt.sweep.plan import plan_run

    sweep_dir = tmp_path / "grid"
    _gathered(tiny_plan(), sweep_dir)
    config = tiny_config()
    if change == "spec":
        config["positional_models"]["prefix2"] = {"kind": "prefix", "L": 1}
    elif change == "seed":
        config["seed"] = 6
    else:
        config["sweeps"]["grid"]["top_k"] = 1
    plan = plan_run(config)
    carried, looked_up = _carried_and_looked_up(plan, sweep_dir)
    assert carried is None
    assert np.all(looked_up == -1)
    _gathered(plan, sweep_dir)
    assert_bit_identical(store.open_cells(sweep_dir / "cells.zarr"), _reference(plan))


@pytest.mark.parametrize("batch_fragments", [1, 2, 256])
def test_batched_ingestion_of_overlapping_fragments_equals_from_scratch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_fragments: int
) -> None:
    """Fragments are read in batches whose cells are looked up together and held by the
    segment writer until a chunk's worth: with batches of 1, 2 or all fragments, chunks
    of 3 rows and 5 values, and fragments that overlap (a new cell in two fragments, a
    fragment holding old and new cells, so only part of it is taken), the update stores
    each new cell once, from its first fragment, bit-identical to a from-scratch store."""
    from attnrmt.sweep import table_writer

    monkeypatch.setattr(table_writer, "BATCH_FRAGMENTS", batch_fragments)
    monkeypatch.setattr(table_writer, "ROW_CHUNK", 3)
    monkeypatch.setattr(table_writer, "VALUE_CHUNK", 5)
    base, extended = tiny_plan(), extended_plan("snr")
    sweep_dir = tmp_path / "grid"
    _gathered(base, sweep_dir)
    old_keys = {cell.key for cell in base.sweeps["grid"].cells}
    new_cells = [cell for cell in extended.sweeps["grid"].cells if cell.key not in old_keys]
    old_cells = list(base.sweeps["grid"].cells)
    directory = sweep_dir / fragments.FRAGMENTS_DIRNAME
    paths = [directory / "mixed.npz", directory / "repeat.npz", directory / "rest.npz"]
    write_block(extended, paths[0], [old_cells[0], new_cells[0], old_cells[1], new_cells[1]])
    write_block(extended, paths[1], [new_cells[1], new_cells[0], new_cells[2]])
    write_block(extended, paths[2], new_cells[2:])
    store.gather_cells(extended.sweeps["grid"], paths, sweep_dir / "cells.zarr", extended.seed)
    manifest = json.loads((sweep_dir / "cell_table" / "manifest.json").read_text())
    assert manifest["segments"][-1]["rows"] == len(new_cells)
    assert_bit_identical(store.open_cells(sweep_dir / "cells.zarr"), _reference(extended))


def test_id_index_finds_ids_and_survives_digest_collisions() -> None:
    """Lookups by 64-bit digest equal an exact search; ids sharing a digest (same first 8
    key bytes and seed, other bytes different) switch the index to exact sorting."""
    from attnrmt.sweep.table_writer import IdIndex, cell_ids, sorted_search, unique_ids

    rng = np.random.default_rng(3)
    keys = rng.integers(0, 256, size=(3000, 32), dtype=np.uint8)
    ids = cell_ids(keys.view("S32").reshape(-1), np.full(3000, 7, dtype=np.int64))
    index = IdIndex(ids[:2000])
    assert not index.exact
    found = index.find(ids)  # 3000 probes: the sorted-probe search
    np.testing.assert_array_equal(found, np.r_[np.arange(2000), np.full(1000, -1)])
    colliding = keys[:2].copy()
    colliding[1, :8] = colliding[0, :8]  # same digest, different id
    pair = cell_ids(colliding.view("S32").reshape(-1), np.full(2, 7, dtype=np.int64))
    collided = IdIndex(np.concatenate([pair, ids[2:50]]))
    assert collided.exact
    np.testing.assert_array_equal(collided.find(pair), [0, 1])
    np.testing.assert_array_equal(collided.find(ids[2:50]), np.arange(2, 50))
    assert collided.find(ids[60:61]).tolist() == [-1]
    assert sorted(unique_ids(np.concatenate([pair, pair, ids[:5]])).tolist()) == sorted(
        set(pair.tolist()) | set(ids[:5].tolist())
    )
    haystack = np.sort(rng.integers(0, 2**63, 5000).astype(np.uint64))
    needles = rng.integers(0, 2**63, 4000).astype(np.uint64)
    np.testing.assert_array_equal(
        sorted_search(haystack, needles), np.searchsorted(haystack, needles)
    )


def test_fast_fragment_reader_equals_numpy_load(tmp_path: Path) -> None:
    """:func:`read_fragment_arrays` gives numpy.load's arrays (names, dtypes, shapes,
    values) for a fragment of the block writer, and None for a torn file."""
    plan = tiny_plan(d=[6, 9], T=[3, 5])
    path = tmp_path / "fragments" / "b.npz"
    write_block(plan, path, plan.sweeps["grid"].cells[:9])
    assert fragments._stored_members(path.read_bytes()) is not None  # the fast path
    compressed = tmp_path / "compressed.npz"  # not walkable: read through zipfile
    with np.load(path, allow_pickle=False) as npz:
        np.savez_compressed(compressed, **{name: npz[name] for name in npz.files})
    assert fragments._stored_members(compressed.read_bytes()) is None
    for candidate in (path, compressed):
        arrays = fragments.read_fragment_arrays(candidate)
        with np.load(path, allow_pickle=False) as npz:
            assert set(arrays) == set(npz.files)
            for name in npz.files:
                np.testing.assert_array_equal(arrays[name], npz[name], strict=True)
    torn = tmp_path / "torn.npz"
    torn.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert fragments.read_fragment_arrays(torn) is None


def test_an_unchanged_rerun_writes_no_segment(tmp_path: Path) -> None:
    plan = tiny_plan()
    _gathered(plan, tmp_path / "grid")
    _gathered(plan, tmp_path / "grid")
    manifest = json.loads((tmp_path / "grid" / "cell_table" / "manifest.json").read_text())
    assert len(manifest["segments"]) == 1


def test_numeric_coordinates_are_ascending(tmp_path: Path) -> None:
    plan = tiny_plan(d=[9, 6], snr=[2.0, 1.0, 0.0])
    view = store.open_cells(_gathered(plan, tmp_path / "grid")).load()
    assert view.d.values.tolist() == [6, 9] and view.snr.values.tolist() == [0.0, 1.0, 2.0]
    assert_bit_identical(view, _reference(plan))
    assert view.sel(snr=slice(0, 1)).sizes["snr"] == 2
    cell = plan.sweeps["grid"].cells[0]  # d=9, snr=2.0 in the config's order
    point = view.sel(**{axis: getattr(cell, axis) for axis in store.AXES}, replicate=cell.replicate)
    assert point.cell_key.item() == cell.key


KILL_SCRIPT = """
import os, signal, sys
from pathlib import Path
from attnrmt.sweep import table_writer
from tests.sweep.test_store import extended_plan, write_block_fragments

point, sweep_dir = sys.argv[1], Path(sys.argv[2])
plan = extended_plan("snr")

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

if point == "segment":
    table_writer.SegmentWriter.commit = die
else:
    table_writer.write_json_atomically = die
paths = write_block_fragments(plan, sweep_dir)
table_writer.gather_cells(plan.sweeps["grid"], paths, sweep_dir / "cells.zarr", plan.seed)
"""


@pytest.mark.parametrize("point", ["segment", "manifest"])
def test_kill_during_update_keeps_the_previous_version(tmp_path: Path, point: str) -> None:
    base, extended = tiny_plan(), extended_plan("snr")
    sweep_dir = tmp_path / "grid"
    _gathered(base, sweep_dir)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")]
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
    # the previous version opens, from the sweep directory and from the pointer
    assert_bit_identical(store.open_cells(sweep_dir), _reference(base))
    assert_bit_identical(store.open_cells(sweep_dir / "cells.zarr"), _reference(base))
    # the rerun completes and cleans up what the killed writer left
    _gathered(extended, sweep_dir)
    assert_bit_identical(store.open_cells(sweep_dir), _reference(extended))
    leftovers = [p for p in (sweep_dir / "cell_table").rglob(".*.tmp")]
    assert leftovers == []
    manifest = json.loads((sweep_dir / "cell_table" / "manifest.json").read_text())
    on_disk = {p.name for p in (sweep_dir / "cell_table" / "segments").iterdir()}
    assert on_disk == {segment["name"] for segment in manifest["segments"]}  # no orphan


def test_readers_see_the_old_or_the_new_version_never_a_mix(tmp_path: Path) -> None:
    base, extended = tiny_plan(), extended_plan("snr")
    sweep_dir = tmp_path / "grid"
    _gathered(base, sweep_dir)
    opened_before = store.open_cells(sweep_dir)  # lazy: nothing read yet
    old, new = _reference(base), _reference(extended)
    seen: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def read_repeatedly() -> None:
        while not stop.is_set():
            try:
                view = _without_store_attrs(store.open_cells(sweep_dir).load())
                seen.append(
                    "new" if view.identical(new) else "old" if view.identical(old) else "mixed"
                )
            except BaseException as exc:
                errors.append(exc)
                return

    reader = threading.Thread(target=read_repeatedly)
    reader.start()
    try:
        _gathered(extended, sweep_dir)
        for _ in range(3):  # more versions of the same content: grids are swapped again
            store.gather_cells(extended.sweeps["grid"], [], sweep_dir / "cells.zarr", extended.seed)
    finally:
        stop.set()
        reader.join()
    assert not errors, errors
    assert seen and "mixed" not in seen
    # a view opened before the update still reads the old version, whole
    assert_bit_identical(opened_before, old)


def test_old_format_store_is_rebuilt_from_fragments(tmp_path: Path) -> None:
    plan = tiny_plan()
    sweep_dir = tmp_path / "grid"
    paths = write_block_fragments(plan, sweep_dir)
    store.write_zarr_atomically(_reference(plan), sweep_dir / "cells.zarr")  # format 1
    xr.testing.assert_identical(store.open_cells(sweep_dir).load(), _reference(plan))
    for path in paths:  # the fragments only survive in the cache (a forced rerun's state)
        (sweep_dir / "cache").mkdir(exist_ok=True)
        path.rename(sweep_dir / "cache" / path.name)
    out = store.gather_cells(plan.sweeps["grid"], [], sweep_dir / "cells.zarr", plan.seed)
    assert (out / "manifest.json").is_file() and not (out / "zarr.json").exists()
    assert_bit_identical(store.open_cells(out), _reference(plan))


def test_partial_fragments_give_the_finished_cells(tmp_path: Path) -> None:
    plan = tiny_plan()
    sweep = plan.sweeps["grid"]
    sweep_dir = tmp_path / "grid"
    first = sweep.blocks[0]
    write_block(plan, sweep_dir / "fragments" / f"{first.key}.npz", list(first.cells))
    store.gather_cells(sweep, [], sweep_dir / "cells.zarr", plan.seed)
    view = store.open_cells(sweep_dir).load()
    assert view.attrs["cells_present"] == len(first.cells) < view.attrs["cells_total"]
    records = {cell.key: synthetic_record(cell) for cell in first.cells}
    assert_bit_identical(view, store.cells_dataset(sweep, records, plan.seed))


def test_a_failed_run_stores_its_finished_cells(tmp_path: Path) -> None:
    from attnrmt.sweep.table_writer import store_finished_cells

    plan = tiny_plan()
    run_dir = tmp_path / "results" / "unit"
    first = plan.sweeps["grid"].blocks[0]
    write_block(plan, run_dir / "grid" / "fragments" / f"{first.key}.npz", list(first.cells))
    (lines,) = store_finished_cells(plan, run_dir)
    assert f"{len(first.cells)}/" in lines
    assert not (run_dir / "grid" / "cells.zarr").exists()  # the rule's output: untouched
    cells = store.open_results(run_dir)["grid/cells"].to_dataset()
    assert int((cells.cell_key != "").sum()) == len(first.cells)


def test_open_results_names_a_sweep_directory_and_an_empty_run(tmp_path: Path) -> None:
    plan = tiny_plan()
    run_dir = tmp_path / "results" / "unit"
    _gathered(plan, run_dir / "grid")
    with pytest.raises(ValueError, match="one sweep, not of a run"):
        store.open_results(run_dir / "grid")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no sweep results"):
        store.open_results(tmp_path / "empty")


def test_open_results_squeezed_view_keeps_the_full_one(tmp_path: Path) -> None:
    plan = tiny_plan()
    run_dir = tmp_path / "results" / "unit"
    _gathered(plan, run_dir / "grid")
    full = store.open_results(run_dir)["grid/cells"].to_dataset()
    squeezed = store.open_results(run_dir, squeeze=True)["grid/cells"].to_dataset()
    assert full.top_eigenvalues.ndim == 10
    assert set(squeezed.top_eigenvalues.dims) == {"weights", "snr", "centered", "replicate", "k"}
    assert squeezed.d.item() == 6  # the dropped dimension stays as a scalar coordinate
    xr.testing.assert_identical(squeezed.load(), full.squeeze().load())


def _gather_peak(n_gamma: int, sweep_dir: Path) -> int:
    """tracemalloc peak (bytes) of one first gather of a sweep of 4,000 ``n_gamma`` tiny
    cells in fragments of 1,000 cells (plan and fragments made before tracing)."""
    import gc
    import tracemalloc

    plan = plan_run(
        tiny_config(
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
    between 8,000 and 32,000 cells (same fragment size). Measured ~92 B per cell
    (positions, rows, ids of the missing cells and their digest index: int64 and 40-byte
    arrays); with the cells' hex keys built as Python strings (the gather before the
    array plan) it was 209 B per cell. The segment's column buffers hold at most one
    chunk each (~400 B per row here): chunks of 1,024 rows keep them out of the
    difference (the default, 131,072 rows, is ~50 MB of buffers at most).

    Each size is measured twice and the smaller peak kept: pathlib interns every path
    component (``sys.intern``), and when the interpreter's table of interned strings
    grows during one gather it allocates a few MB at once, whatever that gather does
    (seen in the whole tests/sweep run: 3.7 MB in one allocation at pathlib.py:71, i.e.
    ~250 B per cell in the difference; a second gather of the same size does not grow
    it again). Growth per cell shows in both measurements."""
    from attnrmt.sweep import table_writer

    monkeypatch.setattr(table_writer, "ROW_CHUNK", 1024)
    monkeypatch.setattr(table_writer, "VALUE_CHUNK", 1024)
    _gather_peak(1, tmp_path / "warm-up")  # imports (zarr, codecs) are not the gather's
    peaks = [
        min(_gather_peak(n_gamma, tmp_path / f"{n_gamma}-{run}") for run in range(2))
        for n_gamma in (2, 8)
    ]
    assert (peaks[1] - peaks[0]) / 24_000 <= 160, peaks
