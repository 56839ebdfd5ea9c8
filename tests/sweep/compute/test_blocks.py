"""Block jobs (attnrmt.sweep.compute.blocks): reuse, compute, salvage, plausibility. Computing
tests use an in-process Dask cluster."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from attnrmt.sweep import store
from attnrmt.sweep.compute import blocks, cluster
from attnrmt.sweep.compute.failures import classify_failure
from attnrmt.sweep.spec import cost
from attnrmt.sweep.spec.config import load_config
from attnrmt.sweep.spec.identity import seed_token
from attnrmt.sweep.spec.plan import plan_run
from attnrmt.sweep.store import fragments
from attnrmt.sweep.store.provenance import PROVENANCE_KEYS
from tests.conftest import build_tiny_config
from tests.sweep.oracles import decode_fragment, read_fragment


def plan_config() -> dict[str, Any]:
    """The shared tiny sweep (tests/conftest.py): 4 cells on one line (d=12), blocks of 4."""
    return build_tiny_config()


@pytest.fixture(scope="module")
def plan(tiny_plan: Any) -> Any:
    return tiny_plan


def params_of(plan: Any) -> list[dict[str, Any]]:
    return plan.sweeps["grid"].cells.block_params(plan.seed)


def fragment_in(tmp_path: Path, name: str) -> Path:
    return tmp_path / "results" / "unit" / "grid" / "fragments" / f"{name}.npz"


UNREACHABLE = {"mode": "address", "address": "tcp://127.0.0.1:9"}


def test_block_params_carry_specs_and_seed_words(plan: Any) -> None:
    params = params_of(plan)
    cell = plan.sweeps["grid"].cells[0]
    assert params[0]["key"] == cell.key
    assert params[0]["seed"] == cell.seed_words(3)
    assert params[0]["kwargs"]["positional"] == {"kind": "prefix", "L": 2}
    json.dumps(params)  # plain data: safe as Snakemake params
    first = blocks.BlockCell.from_params(params[0])
    assert first.task_key == blocks.BlockCell.from_params(params[0]).task_key
    assert first.task_key != blocks.BlockCell.from_params(params[1]).task_key


def test_block_computes_cells_like_a_direct_call(
    plan: Any, tmp_path: Path, scheduler_address: str
) -> None:
    params = params_of(plan)
    path = fragment_in(tmp_path, "a")
    summary = blocks.run_block(
        params,
        path,
        tmp_path / "results" / "unit",
        {"mode": "address", "address": scheduler_address},
        tmp_path / "a.log",
    )
    assert (summary.n_computed, summary.n_reused) == (4, 0)
    fragment = read_fragment(path)
    assert fragment.computed.all()
    direct = blocks.compute_cell(params[2]["kwargs"], params[2]["seed"])
    for name, value in direct.items():
        if name not in ("compute_seconds", *PROVENANCE_KEYS):
            np.testing.assert_array_equal(fragment.records[2][name], value)
    assert "4 computed, 0 reused" in (tmp_path / "a.log").read_text()


def test_reusable_block_copies_bits_without_contacting_dask(plan: Any, tmp_path: Path) -> None:
    params = params_of(plan)
    cells = plan.sweeps["grid"].cells
    old = fragment_in(tmp_path, "old")
    records = [blocks.compute_cell(p["kwargs"], p["seed"]) for p in params]
    store.write_fragment(
        old,
        store.encode_fragment(
            [p["key"] for p in params],
            [seed_token(p["seed"]) for p in params],
            [True] * len(params),
            records,
        ),
    )
    new = fragment_in(tmp_path, "new")
    # reversed order and an unreachable scheduler: everything must come from "old"
    summary = blocks.run_block(params[::-1], new, tmp_path / "results" / "unit", UNREACHABLE)
    assert (summary.n_computed, summary.n_reused) == (0, len(cells))
    fragment = read_fragment(new)
    assert not fragment.computed.any()
    for record, expected in zip(fragment.records, records[::-1], strict=True):
        for name in expected:
            np.testing.assert_array_equal(record[name], expected[name], strict=True)


def test_changed_root_seed_is_not_reused(plan: Any, tmp_path: Path, scheduler_address: str) -> None:
    params = params_of(plan)[:1]
    run_dir = tmp_path / "results" / "unit"
    blocks.run_block(
        params, fragment_in(tmp_path, "a"), run_dir, UNREACHABLE | {"address": scheduler_address}
    )
    reseeded = plan.sweeps["grid"].cells.block_params(99)[:1]  # the same cell, root seed 99
    assert reseeded[0]["key"] == params[0]["key"] and reseeded[0]["id"] != params[0]["id"]
    summary = blocks.run_block(
        reseeded,
        fragment_in(tmp_path, "b"),
        run_dir,
        {"mode": "address", "address": scheduler_address},
    )
    assert summary.n_computed == 1


def test_failed_cells_fail_the_block_and_salvage_the_others(
    plan: Any, tmp_path: Path, scheduler_address: str
) -> None:
    params = params_of(plan)[:2]
    broken = dict(params[1], key="f" * 64, kwargs=dict(params[1]["kwargs"], d=1))
    path = fragment_in(tmp_path, "bad")
    run_dir = tmp_path / "results" / "unit"
    settings = {"mode": "address", "address": scheduler_address}
    with pytest.raises(RuntimeError, match="1 of 2 cells") as failed:
        blocks.run_block([params[0], broken], path, run_dir, settings)
    assert "None" not in str(failed.value)
    assert str(run_dir / "grid" / "salvage" / "bad") in str(failed.value)
    assert not path.exists()
    assert len(list((run_dir / "grid" / "salvage" / "bad").glob("*.npz"))) == 1
    keys = [params[0]["key"], broken["key"]]
    assert fragments.finished_keys(keys, run_dir / "grid") == {params[0]["key"]}
    # what failed is recorded: the cell, its parameters and the error
    (failure,) = store.read_failures(run_dir / "grid")
    assert failure["key"] == "f" * 64 and failure["block"] == path.stem
    assert failure["params"]["d"] == 1 and "ValueError" in failure["error"]
    assert "d=1" in failure["error"]
    # the rerun (with the cell fixed) reuses the salvaged cell and clears the record
    summary = blocks.run_block(params, path, run_dir, settings)
    assert (summary.n_computed, summary.n_reused) == (1, 1)
    assert store.read_failures(run_dir / "grid") == []
    assert not (run_dir / "grid" / "salvage" / "bad").exists()  # cleared once complete


def test_job_mode_runs_an_in_process_cluster_sized_to_the_allocation(
    plan: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    params = params_of(plan)[:2]
    summary = blocks.run_block(
        params,
        fragment_in(tmp_path, "job"),
        tmp_path / "results" / "unit",
        {"mode": "job", "dashboard": False},
    )
    assert summary.n_computed == 2
    assert not cluster.scheduler_file_path(tmp_path / "results" / "unit").exists()


def test_cells_survive_snakemake_deleting_the_fragment_before_a_rerun(
    plan: Any, tmp_path: Path, scheduler_address: str
) -> None:
    params = params_of(plan)
    run_dir = tmp_path / "results" / "unit"
    path = fragment_in(tmp_path, "same")
    blocks.run_block(params, path, run_dir, {"mode": "address", "address": scheduler_address})
    cached = run_dir / "grid" / fragments.CACHE_DIRNAME / path.name
    # an independent copy: damage to one file leaves the other
    assert cached.stat().st_ino != path.stat().st_ino
    assert cached.read_bytes() == path.read_bytes()
    path.unlink()  # what Snakemake does before rerunning a job (forced, code changed)
    summary = blocks.run_block(params, path, run_dir, UNREACHABLE)
    assert (summary.n_computed, summary.n_reused) == (0, len(params))
    np.testing.assert_array_equal(
        read_fragment(path).records[0]["eigenvalues"],
        read_fragment(cached).records[0]["eigenvalues"],
    )


def test_bundled_cells_equal_cells_computed_one_by_one(
    plan: Any, tmp_path: Path, scheduler_address: str
) -> None:
    from distributed import Client

    cells = [blocks.BlockCell.from_params(p) for p in params_of(plan)]
    assert len(blocks.bundle_by_cost([cell.seconds for cell in cells])) == 1
    with Client(scheduler_address, set_as_default=False) as client:
        tasks, failures = blocks.compute_missing(cells, client, retries=0, attempt=3)
    assert failures == []
    finished = {}
    for task in tasks:  # each task's columns name its cells and carry the attempt
        fragment = decode_fragment(task.columns)
        assert list(zip(fragment.cell_keys, fragment.cell_seeds, strict=True)) == task.cell_ids
        finished.update(zip(task.cell_ids, fragment.records, strict=True))
    assert sorted(finished) == sorted(cell.cell_id for cell in cells)
    for cell in cells:
        assert finished[cell.cell_id]["attempt"] == 3
        direct = blocks.compute_cell(cell.kwargs, cell.seed)
        for name, value in direct.items():
            if name not in ("compute_seconds", *PROVENANCE_KEYS):
                np.testing.assert_array_equal(finished[cell.cell_id][name], value)


def test_bundle_columns_carry_the_cells_bit_for_bit(plan: Any) -> None:
    """A bundle travels as fragment columns (compute_task); decoded on the block
    side, its cells encode to the same fragment bytes as the cells' own records (numbers
    and dtypes), failures keep their positions."""
    params = params_of(plan)
    bad = {**params[1]["kwargs"], "d": -1}
    jobs = [
        (params[0]["kwargs"], params[0]["seed"]),
        (bad, params[1]["seed"]),
        (params[2]["kwargs"], params[2]["seed"]),
    ]
    columns, failed = blocks.compute_task(blocks.Task(tuple(((k,), s, False) for k, s in jobs)))
    assert [position for position, _ in failed] == [1]
    assert isinstance(failed[0][1], ValueError)
    decoded = decode_fragment(columns).records
    direct = [blocks.compute_cell(kwargs, seed) for kwargs, seed in (jobs[0], jobs[2])]
    keys, seeds = ["a", "b"], ["[1]", "[2]"]
    via_bundle = store.encode_fragment(keys, seeds, [True, True], decoded)
    one_by_one = store.encode_fragment(keys, seeds, [True, True], direct)
    assert set(via_bundle) == set(one_by_one)
    for name, array in one_by_one.items():
        if name in ("compute_seconds", "environments", *PROVENANCE_KEYS):
            continue  # wall time and the worker's memory differ between two runs
        assert via_bundle[name].dtype == array.dtype, name
        assert via_bundle[name].tobytes() == array.tobytes(), name


def _run_all_blocks(
    sweep_plan: Any, root_seed: int, run_dir: Path, dask_config: dict[str, Any]
) -> list[Path]:
    paths = []
    for block in sweep_plan.blocks:
        path = run_dir / sweep_plan.name / "fragments" / f"{block.key}.npz"
        summary = blocks.run_block(block.cells.block_params(root_seed), path, run_dir, dask_config)
        if dask_config is UNREACHABLE:
            assert summary.n_computed == 0
        paths.append(path)
    return paths


def test_resizing_blocks_recomputes_nothing_and_changes_no_number(
    tmp_path: Path, scheduler_address: str
) -> None:
    run_dir = tmp_path / "results" / "unit"
    plan = plan_run(load_config({**plan_config(), "execution": {"block_size": 1}}))
    fixed = plan.sweeps["grid"]
    paths = _run_all_blocks(
        fixed, plan.seed, run_dir, {"mode": "address", "address": scheduler_address}
    )
    store.gather_cells(fixed, paths, tmp_path / "fixed" / "cells.zarr", plan.seed)
    for execution in ({"block_size": "auto"}, {"block_size": 3}):
        config = {**plan_config(), "execution": execution}
        resized = plan_run(load_config(config))
        assert [b.key for b in resized.sweeps["grid"].blocks] != [b.key for b in fixed.blocks]
        # an unreachable scheduler: every cell must come from the earlier fragments
        paths = _run_all_blocks(resized.sweeps["grid"], resized.seed, run_dir, UNREACHABLE)
        out = tmp_path / execution_name(execution) / "cells.zarr"
        store.gather_cells(resized.sweeps["grid"], paths, out, resized.seed)
        same = store.open_cells(out).load()
        reference = store.open_cells(tmp_path / "fixed" / "cells.zarr").load()
        for name in reference.data_vars:
            xr.testing.assert_identical(same[name], reference[name])


def execution_name(execution: dict[str, Any]) -> str:
    return f"bs_{execution['block_size']}"


def test_a_cell_of_another_sweep_is_reused(plan: Any, tmp_path: Path) -> None:
    params = params_of(plan)[:2]
    records = [blocks.compute_cell(p["kwargs"], p["seed"]) for p in params]
    run_dir = tmp_path / "results" / "unit"
    store.write_fragment(
        run_dir / "other_sweep" / "fragments" / "x.npz",
        store.encode_fragment(
            [p["key"] for p in params],
            [seed_token(p["seed"]) for p in params],
            [True, True],
            records,
        ),
    )
    summary = blocks.run_block(
        params, run_dir / "grid" / "fragments" / "y.npz", run_dir, UNREACHABLE
    )
    assert (summary.n_computed, summary.n_reused) == (0, 2)
    fragment = read_fragment(run_dir / "grid" / "fragments" / "y.npz")
    np.testing.assert_array_equal(fragment.records[1]["eigenvalues"], records[1]["eigenvalues"])


def test_waiting_block_ends_when_its_client_closes(plan: Any) -> None:
    """A stop closes block clients from another thread (cluster.stop_run) while the block
    waits on cells no worker will run: the block ends with every cell a failure instead of
    waiting (a SIGINT test on SLURM once waited past its bound). The block runs in a thread
    so a regression fails here instead of hanging the suite."""
    import threading

    from distributed import Client, LocalCluster

    cells = [blocks.BlockCell.from_params(p) for p in params_of(plan)]
    outcome: dict[str, Any] = {}
    with LocalCluster(
        n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=":0"
    ) as no_workers:
        client = Client(no_workers.scheduler_address, set_as_default=False)
        worker = threading.Thread(
            target=lambda: outcome.update(result=blocks.compute_missing(cells, client, 0)),
            daemon=True,
        )
        worker.start()
        time.sleep(0.5)  # the block has submitted and waits
        client.close()
        worker.join(timeout=30)
        assert not worker.is_alive(), "the block kept waiting on a closed client"
    finished, failures = outcome["result"]
    assert finished == [] and len(failures) == len(cells)


def test_a_result_left_unfetched_when_the_client_closes_is_a_lost_task() -> None:
    """A task that finished on a worker just before its block's client closed (a stop, the
    SLURM deadline) has a result the client can no longer fetch: ``result()`` raises
    ``RuntimeError: IOLoop is closed``. It is a lost task (cause ``walltime`` at the
    deadline, ``killed`` otherwise), not an ``other`` failure (seen in a CI run of the
    SLURM walltime test before)."""
    from distributed import Client, LocalCluster

    with LocalCluster(
        n_workers=1, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=":0"
    ) as cluster:
        client = Client(cluster.scheduler_address, set_as_default=False)
        future = client.submit(np.zeros, 1000, key="unfetched")
        deadline = time.monotonic() + 30
        while future.status != "finished":  # finished on the worker, nothing fetched
            assert time.monotonic() < deadline, "the task never finished"
            time.sleep(0.01)
        assert blocks._task_result(future, client).shape == (1000,)  # an open client fetches
        client.close()
        with pytest.raises(RuntimeError, match="IOLoop is closed"):
            future.result()  # what the block saw before
        with pytest.raises(asyncio.CancelledError, match="closed") as lost:
            blocks._task_result(future, client)
    assert classify_failure(lost.value, walltime=True) == "walltime"
    assert classify_failure(lost.value) == "killed"


# --------------------------------------------------------------------------- plausibility


def _cell(**changes: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(kwargs, record) of one real cell (d = 30) with ``changes`` to its kwargs."""
    kwargs = {
        "d": 30,
        "delta": 0.5,
        "gamma": 0.5,
        "T": 4,
        "positional": {"kind": "prefix", "L": 2},
        "weights": {"kind": "mean"},
        "snr": 2.0,
        "centered": True,
        "top_k": 2,
        **changes,
    }
    return kwargs, blocks.compute_cell(kwargs, [1, 2, 3])


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"snr": 1e50, "centered": False},
        {"weights": {"kind": "last"}, "T": 1, "positional": {"kind": "iid"}},
        {"weights": {"kind": "causal_attention", "tau": 1.0}, "snr": 1e6, "centered": False},
        {"positional": {"kind": "label", "rho0": 0.6, "L": 2}, "spectrum": "top"},
    ],
)
def test_real_cells_are_plausible_and_within_the_eigenvalue_bound(changes: Any) -> None:
    """The bound is a proof (docstring of eigenvalue_bound), so every real cell is within
    it; these span the weights kinds, centring, snr up to 1e50 and both spectra."""
    kwargs, record = _cell(**changes)
    assert blocks.implausible_values(record, kwargs) is None
    bound = blocks.eigenvalue_bound(
        kwargs["snr"], kwargs["d"], float(np.abs(record["effective_weights"]).sum())
    )
    assert max(record["eigenvalues"].max(), record["pop_top_eigenvalues"].max()) <= bound


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("eigenvalues", 3.94e181, "outside"),  # what 64 overwritten bytes once gave
        ("top_eigenvalues", np.nan, "not finite"),
        ("pop_top_eigenvalues", -np.inf, "not finite"),
        ("overlap_signal", 1.5, "outside [0, 1]"),
        ("overlap_table_mean", -0.1, "outside [0, 1]"),
        ("alpha", np.nan, "not finite"),
        ("downstream_accuracy", 2.0, "outside [0, 1]"),
        ("compute_seconds", -1.0, "out of range"),
    ],
)
def test_values_no_cell_can_produce_are_rejected(field: str, value: float, words: str) -> None:
    kwargs, record = _cell()
    changed = dict(record)
    if np.ndim(record[field]):
        changed[field] = np.array(record[field], dtype=np.float64)
        changed[field][-1] = value
    else:
        changed[field] = value
    problem = blocks.implausible_values(changed, kwargs)
    assert problem is not None and field in problem and words in problem
    # a cell whose result fails the check fails with cause numerical
    from attnrmt.sweep.compute.failures import classify_failure

    assert classify_failure(blocks.ImplausibleCellValues(problem)) == "numerical"
    # NaN overlaps (a zero direction) and NaN accuracy (no labels) are legitimate
    legitimate = dict(
        record, overlap_class_mean=np.full(2, np.nan), downstream_accuracy=float("nan")
    )
    assert blocks.implausible_values(legitimate, kwargs) is None


def test_salvage_says_where_the_finished_cells_are(tmp_path: Path) -> None:
    salvage = blocks.TaskSalvage(tmp_path / "grid", "b1", blocks.BlockLog(None))
    assert salvage.describe(0) == "no cell had finished"
    _, record = _cell()
    columns = store.encode_fragment(["k" * 64], ["[1, 2]"], [True], [{**record, "attempt": 1}])
    salvage.write(blocks.FinishedTask("task-a", [("k" * 64, "[1, 2]")], columns))
    assert salvage.describe(1) == f"1 of its 1 finished cells kept in {tmp_path}/grid/salvage/b1"
    (path,) = (tmp_path / "grid" / "salvage" / "b1").iterdir()
    assert path.name == "task-a.npz" and read_fragment(path).cell_keys == ["k" * 64]
    assert read_fragment(path).records[0]["attempt"] == 1


@pytest.mark.parametrize(
    "costs",
    [[], [0.01] * 50, [1.0] * 5, [0.05, 0.3, 0.01, 0.01, 0.5, 0.02], [0.19, 0.02, 0.19]],
)
def test_bundles_partition_positions_in_order(costs: list[float]) -> None:
    bundles = blocks.bundle_by_cost(costs, target=0.2)
    assert [i for bundle in bundles for i in bundle] == list(range(len(costs)))
    for bundle in bundles[:-1]:  # every closed bundle reached the target ...
        assert sum(costs[i] for i in bundle) >= 0.2
        # ... and would not have without its last cell
        assert sum(costs[i] for i in bundle[:-1]) < 0.2


def test_expensive_cells_are_tasks_of_their_own() -> None:
    assert blocks.bundle_by_cost([1.0, 2.0, 3.0], target=0.2) == [[0], [1], [2]]


def test_tiny_cells_share_tasks() -> None:
    tiny = cost.estimated_cell_seconds(
        {"d": 20, "delta": 0.5, "gamma": 0.5, "T": 8, "weights": "mean"}
    )
    bundles = blocks.bundle_by_cost([tiny] * 64)
    assert len(bundles) < 64 / 4
