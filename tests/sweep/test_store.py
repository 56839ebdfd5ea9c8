"""Fragments (atomic npz), gather into cells.zarr, theory.zarr and open_results, with
synthetic cell results (no simulation, no Dask)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from attnrmt.sweep import fragments, store
from attnrmt.sweep.plan import plan_run
from attnrmt.theory import bulk_edges, mean_spike, spike


def tiny_plan(d: list[int] | None = None, T: list[int] | None = None) -> Any:
    """Plan of one small sweep: 2 weights x 2 snr x 2 replicates per (d, T)."""
    config = {
        "run": "unit",
        "seed": 5,
        "positional_models": {"prefix2": {"kind": "prefix", "L": 2}},
        "weight_models": {"causal1": {"kind": "causal_attention", "tau": 1.0}},
        "sweeps": {
            "grid": {
                "d": d or [6],
                "delta": [0.5],
                "gamma": [0.5],
                "T": T or [3],
                "positional": ["prefix2"],
                "weights": ["mean", "causal1"],
                "snr": [0.0, 2.0],
                "centered": [True, False],
                "replicates": 2,
                "top_k": 2,
            }
        },
    }
    return plan_run(config)


def synthetic_record(cell: Any) -> dict[str, Any]:
    """A CellResult.to_dict()-like record whose numbers identify the cell."""
    tag = int(cell.key[:6], 16) / 16**6
    return {
        "eigenvalues": np.sort(np.arange(cell.d) + tag),
        "top_eigenvalues": np.arange(cell.d, cell.d - cell.top_k, -1) + tag,
        "overlap_signal": np.full(cell.top_k, tag),
        "overlap_class_mean": np.full(cell.top_k, tag / 2),
        "overlap_table_mean": np.full(cell.top_k, tag / 3),
        "pop_top_eigenvalues": np.full(cell.top_k, 1 + tag),
        "pop_overlap_signal": np.full(cell.top_k, tag / 4),
        "alpha": 0.5 + tag + cell.replicate,
        "kappa": 0.25,
        "sigma": 1.0,
        "V": 2 * cell.d,
        "N": 2 * cell.d,
        "effective_weights": np.full(cell.T, 1.0 / cell.T) + tag,
        "downstream_accuracy": float("nan"),
        "compute_seconds": 0.01,
    }


def write_block(plan: Any, path: Path, cells: list[Any] | None = None) -> list[Any]:
    sweep = plan.sweeps["grid"]
    cells = sweep.cells if cells is None else cells
    arrays = store.encode_fragment(
        [cell.key for cell in cells],
        [store.seed_token(cell.seed_words(plan.seed)) for cell in cells],
        [True] * len(cells),
        [synthetic_record(cell) for cell in cells],
    )
    store.write_fragment(path, arrays)
    return cells


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
    from attnrmt.sweep.cli_types import restore_scalar_types
    from attnrmt.sweep.config import load_schema

    # what Snakemake makes of a profile's `config: {dask: {...}}` (YAML BaseLoader)
    config = {
        "run": "2026",  # a string in the schema: stays a string
        "dask": {
            "mode": "slurm",
            "n_workers": "null",
            "dashboard": "false",
            "slurm": {"cores": "4", "memory": "16GB", "walltime": "02:00:00", "queue": "null"},
        },
        "positional_models": {"m": {"kind": "markov", "r": "0.5"}},
        "sweeps": {"a": {"d": ["20", "40"], "centered": ["true"], "replicates": "2"}},
    }
    same_object = config["dask"]
    restored = restore_scalar_types(config, load_schema())
    assert restored is config and config["dask"] is same_object  # updated in place
    assert config["run"] == "2026"
    assert config["dask"]["n_workers"] is None and config["dask"]["dashboard"] is False
    assert config["dask"]["slurm"] == {
        "cores": 4, "memory": "16GB", "walltime": "02:00:00", "queue": None
    }
    assert config["positional_models"]["m"]["r"] == 0.5
    assert config["sweeps"]["a"] == {"d": [20, 40], "centered": [True], "replicates": 2}
