"""End-to-end: real Snakemake, real Dask, real Zarr, tiny cells (d = 20..40).

One base run (session fixture) is copied into a fresh directory by every test that
changes something, so tests are independent and the expensive first run happens once.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from attnrmt.contract import VARIABLE_ATTRS
from attnrmt.sweep import store
from attnrmt.sweep.store import fragments
from tests.e2e.helpers import Workdir, fragment_files, numeric_variables, tiny_config, with_sweep
from tests.sweep.oracles import read_fragment

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

N_BASE_CELLS = 12
CONTRACT_AXES = ("d", "delta", "gamma", "T", "positional", "weights", "snr", "centered")
CONTRACT_VARIABLES = {
    "eigenvalues": (*CONTRACT_AXES, "replicate", "eig"),
    "top_eigenvalues": (*CONTRACT_AXES, "replicate", "k"),
    "overlap_signal": (*CONTRACT_AXES, "replicate", "k"),
    "overlap_class_mean": (*CONTRACT_AXES, "replicate", "k"),
    "overlap_table_mean": (*CONTRACT_AXES, "replicate", "k"),
    "pop_top_eigenvalues": (*CONTRACT_AXES, "replicate", "k"),
    "pop_overlap_signal": (*CONTRACT_AXES, "replicate", "k"),
    "alpha": CONTRACT_AXES,
    "kappa": CONTRACT_AXES,
    "sigma": CONTRACT_AXES,
    "V": CONTRACT_AXES,
    "N": CONTRACT_AXES,
    "compute_seconds": (*CONTRACT_AXES, "replicate"),
    "effective_weights": (*CONTRACT_AXES, "replicate", "position"),
    "downstream_accuracy": (*CONTRACT_AXES, "replicate"),
    "cell_key": (*CONTRACT_AXES, "replicate"),
    "environment_id": (*CONTRACT_AXES, "replicate"),
    "peak_memory_bytes": (*CONTRACT_AXES, "replicate"),
    "attempt": (*CONTRACT_AXES, "replicate"),
}
THEORY_VARIABLES = (
    "bulk_lower_edge",
    "bulk_upper_edge",
    "bulk_atom",
    "pop_outlier",
    "sample_outlier",
    "pop_overlap_signal",
    "sample_overlap_signal",
    "threshold_snr_population",
    "threshold_snr_sample",
)


@pytest.fixture(scope="session")
def base_run(tmp_path_factory: pytest.TempPathFactory):
    """The tiny config run once (12 cells, 4 blocks); the Dask daemon stopped afterwards."""
    workdir = Workdir.create(tmp_path_factory.mktemp("base"), tiny_config(run="e2e"))
    try:
        result = workdir.run()
    finally:
        workdir.close()
    return workdir, result


@pytest.fixture
def copy_of_base(base_run, tmp_path: Path):
    """A private copy of the base run's directory; its Dask daemon stopped at teardown."""
    workdir = base_run[0].copy_to(tmp_path / "work")
    yield workdir
    workdir.close()


def test_first_run_computes_every_cell_once(base_run) -> None:
    workdir, result = base_run
    assert (result.computed, result.reused) == (N_BASE_CELLS, 0)
    assert not (workdir.run_dir / ".dask" / "scheduler.json").exists(), "cluster not shut down"


def test_unchanged_rerun_schedules_nothing(copy_of_base: Workdir) -> None:
    dry = copy_of_base.run("-n")
    assert dry.nothing_to_do, dry.output


def test_store_matches_data_contract(base_run) -> None:
    workdir, _ = base_run
    group = zarr.open_group(workdir.sweep_dir() / "cells.zarr", mode="r")
    assert group.metadata.zarr_format == 3
    assert group.attrs["attnrmt_cell_table_format"] == store.STORE_FORMAT_VERSION
    codecs = [codec.to_dict()["name"] for codec in group["eigenvalues"].metadata.codecs]
    assert codecs[-2:] == ["blosc", "crc32c"]  # compressed, then checksummed (data contract)
    assert xr.open_zarr(workdir.sweep_dir() / "cells.zarr").sizes["cell"] == N_BASE_CELLS
    cells = workdir.open_cells()
    for name, dims in CONTRACT_VARIABLES.items():
        assert cells[name].dims == dims, name
    for axis in CONTRACT_AXES:
        assert axis in cells.coords
    assert cells.positional.values.tolist() == ["prefix2"]
    assert cells.weights.values.tolist() == ["mean", "causal1"]
    assert cells.centered.dtype == bool
    assert cells.sizes["eig"] == 20 and cells.sizes["k"] == 2 and cells.sizes["replicate"] == 2
    assert cells.attrs["root_seed"] == 11
    assert len(cells.attrs["config_sha256"]) == 64
    assert "causal1" in cells.attrs["model_summary"] and cells.attrs["attnrmt_version"]
    for name in (*CONTRACT_VARIABLES, *CONTRACT_AXES):  # the contract's one table labels all
        for key, value in VARIABLE_ATTRS[name].items():
            assert cells[name].attrs[key] == value, (name, key)
    lazy = store.open_cells(workdir.sweep_dir() / "cells.zarr")
    assert lazy.eigenvalues.chunks[-1] == (20,)  # eig chunked whole
    assert np.isfinite(cells.eigenvalues).all()
    assert (cells.cell_key != "").all()
    assert (cells.V == 40).all() and (cells.N == 40).all()
    # ascending spectrum, descending top-k that matches its tail
    assert (cells.eigenvalues.diff("eig") >= 0).all()
    top = cells.eigenvalues.isel(eig=slice(None, -3, -1)).values
    np.testing.assert_array_equal(top, cells.top_eigenvalues.values)

    theory = workdir.open_theory()
    for name in THEORY_VARIABLES:
        assert theory[name].dims == (*CONTRACT_AXES, "variant"), name
    assert theory.variant.values.tolist() == ["paper", "finite_vocab"]
    assert "replicate" not in theory.dims

    tree = store.open_results(workdir.run_dir)
    assert set(tree.children) == {"grid"}
    assert set(tree["grid"].children) == {"cells", "theory"}


def test_xarray_engine_attnrmt_is_open_results(base_run) -> None:
    """The xarray backend entry point (pyproject.toml) opens what open_results opens: a
    sweep folder, a run folder with group=, theory by group, the whole tree."""
    workdir = base_run[0]
    tree = store.open_results(workdir.run_dir)
    cells = tree["grid/cells"].to_dataset()
    sweep = workdir.run_dir / "grid"
    xr.testing.assert_identical(xr.open_dataset(sweep, engine="attnrmt"), cells)
    xr.testing.assert_identical(
        xr.open_dataset(workdir.run_dir, engine="attnrmt", group="grid"), cells
    )
    theory = xr.open_dataset(workdir.run_dir, engine="attnrmt", group="grid/theory")
    xr.testing.assert_identical(theory, tree["grid/theory"].to_dataset())
    assert xr.open_datatree(workdir.run_dir, engine="attnrmt").identical(tree)
    assert xr.open_dataset(sweep).sizes == cells.sizes  # guessed from the folder
    with pytest.raises(FileNotFoundError, match="no analysis store"):
        xr.open_dataset(sweep, engine="attnrmt", group="analysis")


def test_forced_rerun_reuses_every_cell(copy_of_base: Workdir) -> None:
    old = copy_of_base.open_cells()
    result = copy_of_base.run("--forcerun", "simulate_block")
    assert (result.computed, result.reused) == (0, N_BASE_CELLS)
    xr.testing.assert_identical(copy_of_base.open_cells(), old)


def test_extending_an_axis_computes_only_new_cells(copy_of_base: Workdir) -> None:
    old = copy_of_base.open_cells()
    config = with_sweep(copy_of_base.config, snr=[0.0, 1.0, 2.0, 3.0])
    copy_of_base.write_config(config)
    result = copy_of_base.run()
    assert result.computed == 4  # 2 weights x 1 new snr x 2 replicates
    new = copy_of_base.open_cells()
    xr.testing.assert_identical(new.sel(snr=old.snr).drop_attrs(), old.drop_attrs())


def test_changing_one_named_model_recomputes_only_its_cells(copy_of_base: Workdir) -> None:
    old = copy_of_base.open_cells()
    config = dict(copy_of_base.config)
    config["weight_models"] = {"causal1": {"kind": "causal_limit", "tau": 2.0}}
    copy_of_base.write_config(config)
    result = copy_of_base.run()
    assert result.computed == 6  # the causal1 line: 3 snr x 2 replicates
    new = copy_of_base.open_cells()
    xr.testing.assert_identical(
        new.sel(weights=["mean"]).drop_attrs(), old.sel(weights=["mean"]).drop_attrs()
    )
    assert not np.array_equal(
        new.effective_weights.sel(weights="causal1"), old.effective_weights.sel(weights="causal1")
    )


def test_analysis_dask_and_block_settings_recompute_no_cell(copy_of_base: Workdir) -> None:
    old = copy_of_base.open_cells()
    config = dict(copy_of_base.config)
    config["analysis"] = {"bootstrap": 17, "ci_level": 0.9}
    config["dask"] = {"n_workers": 1, "threads_per_worker": 1, "dashboard": False}
    copy_of_base.write_config(config)
    whole_pipeline = copy_of_base.run("-n", targets=())  # analysis jobs only, no cell
    assert "analyze_sweep" in whole_pipeline.output
    assert "simulate_block" not in whole_pipeline.output
    assert "gather_cells" not in whole_pipeline.output
    config["execution"] = {"block_size": 3}
    copy_of_base.write_config(config)
    result = copy_of_base.run()
    assert result.computed == 0 and result.reused == N_BASE_CELLS
    assert not (copy_of_base.run_dir / ".dask" / "scheduler.json").exists()
    xr.testing.assert_identical(copy_of_base.open_cells().drop_attrs(), old.drop_attrs())


def test_block_size_and_worker_count_do_not_change_numbers(base_run, tmp_path: Path) -> None:
    reference = base_run[0].open_cells()  # block_size 4, 2 workers
    workdirs = []
    for block_size, n_workers in [(1, 1), (16, 2)]:
        config = tiny_config(run="e2e", execution={"block_size": block_size})
        config["dask"] = {"n_workers": n_workers}
        workdirs.append(Workdir.create(tmp_path / f"bs{block_size}_w{n_workers}", config))
    try:
        with ThreadPoolExecutor(len(workdirs)) as pool:  # two independent runs at once
            results = list(pool.map(lambda workdir: workdir.run(), workdirs))
        assert [result.computed for result in results] == [N_BASE_CELLS] * 2
        for workdir in workdirs:
            xr.testing.assert_identical(
                numeric_variables(workdir.open_cells()), numeric_variables(reference)
            )
    finally:
        for workdir in workdirs:
            workdir.close()


def test_killed_run_resumes_without_recomputing_finished_blocks(tmp_path: Path) -> None:
    config = tiny_config(run="killed", execution={"block_size": 2})
    config["sweeps"]["grid"].update(d=[40], snr=[0.0, 0.5, 1.0, 1.5, 2.0, 2.5])
    total = 2 * 6 * 2  # 24 cells in 12 blocks
    workdir = Workdir.create(tmp_path / "killed", config)
    try:
        process = workdir.start(cores=1)
        workdir.wait_for_fragments(1, process, timeout=120)
        workdir.kill(process)
        finished = fragment_files(workdir.path)
        assert 1 <= len(finished) < 12, "kill came too late to test resumption"
        before = {}  # every visible fragment is complete and readable
        for path in finished:
            before[path] = read_fragment(path)
            if "salvage" not in path.parts:  # a block's fragment holds its 2 cells
                assert len(before[path].cell_keys) == 2
        # finished cells: those in any complete file (a salvaged task file holds as few as
        # one cell, and may repeat cells of a block's fragment), plus cache entries of a
        # block killed between its cache write and its fragment link (publish_fragment)
        in_files = {
            (key, seed) for path in finished for key, seed in store.read_fragment_cell_ids(path)
        }
        finished_cells = {
            cell_id
            for path in fragments.fragment_paths(workdir.sweep_dir())
            for cell_id in fragments.read_fragment_cell_ids(path)
        }
        assert in_files and in_files <= finished_cells
        assert set(fragments.locate_cells(sorted(in_files), workdir.sweep_dir())) == in_files
        # a SIGKILLed Snakemake leaves its directory lock behind: the rerun removes it
        # (no live Snakemake works here), no --unlock needed
        resumed = workdir.run()
        assert "removed the Snakemake lock of a killed run" in resumed.output
        # no finished cell is computed again. (A block whose job Snakemake had not yet
        # booked as done when killed is rerun, but it copies its cells from the cache.)
        assert resumed.computed == total - len(finished_cells)
        for path, fragment in before.items():
            if "salvage" in path.parts:  # a finished task of an unfinished block: removed
                continue  # once the rerun writes the block's fragment
            again = read_fragment(path)
            assert again.cell_keys == fragment.cell_keys
            for old, new in zip(fragment.records, again.records, strict=True):
                for name in old:
                    np.testing.assert_array_equal(new[name], old[name], strict=True)
        cells = workdir.open_cells()
        assert cells.attrs["cells_present"] == total
    finally:
        workdir.close()
