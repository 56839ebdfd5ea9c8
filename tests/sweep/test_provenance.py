"""Provenance per cell: fragments and the cell table carry it, old fragments without it
still gather, and it never changes a cell's key or a number."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from attnrmt import cli
from attnrmt.contract import PROVENANCE_ABSENT, PROVENANCE_FIELDS
from attnrmt.sweep import blocks, fragments, provenance, store
from attnrmt.sweep.failures import failure_record_path, record_block_failures
from tests.sweep.conftest import synthetic_record, tiny_plan

CLEAN = {
    "package_version": "0.1.0",
    "git_commit": "a" * 40,
    "git_dirty": False,
    "python": "3.11.7",
    "numpy": "2.0.0",
    "scipy": "1.14.0",
    "blas": "openblas 0.3.27",
    "host": "node1",
}
DIRTY = {**CLEAN, "git_dirty": True, "host": "node2"}


def environment_json(environment: dict[str, Any]) -> str:
    return json.dumps(environment, sort_keys=True, separators=(",", ":"))


def with_provenance(
    record: dict[str, Any], environment: dict[str, Any], memory: int, attempt: int
) -> dict[str, Any]:
    return {
        **record,
        provenance.ENVIRONMENT_KEY: environment_json(environment),
        "peak_memory_bytes": memory,
        "attempt": attempt,
    }


def without_provenance(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A fragment as written before provenance existed (same members minus provenance)."""
    return {
        name: value
        for name, value in arrays.items()
        if name not in (provenance.ENVIRONMENTS_MEMBER, *PROVENANCE_FIELDS)
    }


def encode(
    plan: Any, cells: list[Any], environments: list[dict[str, Any]] | None
) -> dict[str, np.ndarray]:
    """Fragment arrays of ``cells``: cell i gets ``environments[i % 2]``, memory and
    attempt derived from i; plain synthetic records when ``environments`` is None."""
    records = [synthetic_record(cell) for cell in cells]
    if environments is not None:
        records = [
            with_provenance(
                record, environments[i % len(environments)], (100 + i) * 2**20, 1 + i % 2
            )
            for i, record in enumerate(records)
        ]
    return fragments.encode_fragment(
        [cell.key for cell in cells],
        [fragments.seed_token(cell.seed_words(plan.seed)) for cell in cells],
        [True] * len(cells),
        records,
    )


def gather(plan: Any, sweep_dir: Path, fragment_arrays: list[dict[str, np.ndarray]]) -> Any:
    """Write the fragments, gather them with the real writer, open the lazy view."""
    paths = [
        fragments.write_fragment(sweep_dir / "fragments" / f"b{i}.npz", arrays)
        for i, arrays in enumerate(fragment_arrays)
    ]
    store.gather_cells(plan.sweeps["grid"], paths, sweep_dir / "cells.zarr", plan.seed)
    return store.open_cells(sweep_dir).load()


def results_only(cells: xr.Dataset) -> xr.Dataset:
    """The view without provenance (variables and the environments attribute)."""
    kept = cells.drop_vars(list(PROVENANCE_FIELDS))
    kept.attrs = {k: v for k, v in cells.attrs.items() if k != "environments"}
    return kept


def test_fragment_carries_provenance_with_each_environment_stored_once() -> None:
    plan = tiny_plan()
    cells = list(plan.sweeps["grid"].cells)
    arrays = encode(plan, cells, [CLEAN, DIRTY])
    assert len(cells) == 16
    assert arrays[provenance.ENVIRONMENTS_MEMBER].shape == (2,)  # not one string per cell
    assert arrays["environment_id"].dtype == np.int64
    fragment = fragments.decode_fragment(arrays)
    for i, record in enumerate(fragment.records):
        assert json.loads(record[provenance.ENVIRONMENT_KEY]) == [CLEAN, DIRTY][i % 2]
        assert record["peak_memory_bytes"] == (100 + i) * 2**20
        assert record["attempt"] == 1 + i % 2
        expected = synthetic_record(cells[i])
        for name, value in expected.items():
            np.testing.assert_array_equal(record[name], value, strict=True)


def test_reencoding_keeps_provenance_and_old_records_stay_unknown() -> None:
    """A block copies reused records into its fragment: provenance travels with them, and
    records from old fragments (none) mixed with new ones get the absent values."""
    plan = tiny_plan()
    cells = list(plan.sweeps["grid"].cells)[:4]
    old = fragments.decode_fragment(without_provenance(encode(plan, cells[:2], None)))
    new = fragments.decode_fragment(encode(plan, cells[2:], [DIRTY]))
    mixed = fragments.encode_fragment(
        old.cell_keys + new.cell_keys,
        old.cell_seeds + new.cell_seeds,
        [False] * 4,
        old.records + new.records,
    )
    assert mixed["environment_id"][:2].tolist() == [PROVENANCE_ABSENT["environment_id"]] * 2
    assert mixed["peak_memory_bytes"][:2].tolist() == [-1, -1]
    assert mixed["attempt"][:2].tolist() == [0, 0]
    assert (
        mixed["environment_id"][2:].tolist()
        == [provenance.environment_id(environment_json(DIRTY))] * 2
    )
    again = fragments.decode_fragment(mixed).records
    assert set(again[0]) == set(synthetic_record(cells[0]))  # unknown stays absent
    assert again[2][provenance.ENVIRONMENT_KEY] == environment_json(DIRTY)


def test_store_carries_provenance_and_numbers_are_bit_identical(tmp_path: Path) -> None:
    plan = tiny_plan()
    cells = list(plan.sweeps["grid"].cells)
    with_prov = gather(plan, tmp_path / "a" / "grid", [encode(plan, cells, [CLEAN, DIRTY])])
    plain = gather(plan, tmp_path / "b" / "grid", [without_provenance(encode(plan, cells, None))])
    # every number and every cell key identical; only provenance differs
    xr.testing.assert_identical(results_only(with_prov), results_only(plain))
    environments = json.loads(with_prov.attrs["environments"])
    ids = with_prov["environment_id"].values.ravel()
    assert {json.loads(environments[str(env)])["host"] for env in ids} == {"node1", "node2"}
    assert (with_prov["attempt"].values >= 1).all()
    assert (with_prov["peak_memory_bytes"].values >= 100 * 2**20).all()
    assert with_prov["peak_memory_bytes"].attrs["units"] == "byte"
    # the store written from old fragments says "unknown", never a made-up value
    for name in PROVENANCE_FIELDS:
        assert (plain[name].values == PROVENANCE_ABSENT[name]).all(), name
    assert json.loads(plain.attrs["environments"]) == {}


def test_old_fragments_and_new_ones_gather_into_one_table(tmp_path: Path) -> None:
    plan = tiny_plan()
    cells = list(plan.sweeps["grid"].cells)
    half = len(cells) // 2
    old = without_provenance(encode(plan, cells[:half], None))
    mixed = gather(plan, tmp_path / "m" / "grid", [old, encode(plan, cells[half:], [CLEAN])])
    reference = gather(
        plan, tmp_path / "r" / "grid", [without_provenance(encode(plan, cells, None))]
    )
    xr.testing.assert_identical(results_only(mixed), results_only(reference))
    attempts = mixed["attempt"].values
    assert np.count_nonzero(attempts == 0) == half  # old cells: unknown
    assert np.count_nonzero(attempts >= 1) == len(cells) - half
    summary = provenance.run_provenance(tmp_path / "m")
    assert summary["cells"] == len(cells)
    assert summary["commits"] == {"aaaaaaaaaaaa": len(cells) - half, "unknown": half}


def test_cell_keys_do_not_depend_on_provenance(tmp_path: Path) -> None:
    """Reuse matches ``(cell_key, cell_seed)``: a cell with provenance is found under the
    same id as without, and the table's keys are the plan's."""
    plan = tiny_plan()
    cells = list(plan.sweeps["grid"].cells)
    sweep = tmp_path / "grid"
    fragments.write_fragment(sweep / "fragments" / "new.npz", encode(plan, cells, [CLEAN]))
    fragments.write_fragment(
        sweep / "cache" / "old.npz", without_provenance(encode(plan, cells, None))
    )
    ids_new = fragments.read_fragment_cell_ids(sweep / "fragments" / "new.npz")
    ids_old = fragments.read_fragment_cell_ids(sweep / "cache" / "old.npz")
    assert ids_new == ids_old
    assert [key for key, _ in ids_new] == [cell.key for cell in cells]
    assert [
        blocks.BlockCell.from_params(p).cell_id for p in blocks.block_params(cells, plan.seed)
    ] == ids_new


def test_worker_provenance_is_the_process_environment_computed_once() -> None:
    first = blocks.compute_cell(*_first_cell_job())
    second = blocks.compute_cell(*_first_cell_job())
    assert first[provenance.ENVIRONMENT_KEY] is second[provenance.ENVIRONMENT_KEY]  # cached
    environment = json.loads(first[provenance.ENVIRONMENT_KEY])
    assert set(environment) == {
        "package_version",
        "git_commit",
        "git_dirty",
        "python",
        "numpy",
        "scipy",
        "blas",
        "host",
    }
    assert environment["numpy"] == np.__version__
    assert second["peak_memory_bytes"] >= first["peak_memory_bytes"] > 0
    assert "attempt" not in first  # set by the block job, which knows the attempt


def _first_cell_job() -> tuple[dict[str, Any], list[int]]:
    plan = tiny_plan()
    params = blocks.block_params(plan.sweeps["grid"].cells[:1], plan.seed)[0]
    return params["kwargs"], params["seed"]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def test_git_state_reports_commit_and_dirty_flag(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    package = repo / "src" / "pkg"
    package.mkdir(parents=True)
    (package / "mod.py").write_text("x = 1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    head = _git(repo, "rev-parse", "HEAD")
    assert provenance.git_state(package) == (head, False)
    (package / "new.py").write_text("y = 2\n")  # untracked source under the package
    assert provenance.git_state(package) == (head, True)
    (package / "new.py").unlink()
    (package / "mod.py").write_text("x = 2\n")  # modified tracked file
    assert provenance.git_state(package) == (head, True)
    outside = tmp_path / "not-a-checkout"
    outside.mkdir()
    assert provenance.git_state(outside) == ("", False)


def test_block_attempt_counts_failed_attempts(tmp_path: Path) -> None:
    fragment = tmp_path / "grid" / "fragments" / "b.npz"
    record = failure_record_path(fragment)
    assert provenance.block_attempt(record) == 1
    record_block_failures(fragment, [], attempt=1)
    assert provenance.block_attempt(record) == 2
    record_block_failures(fragment, [], attempt=2)
    assert provenance.block_attempt(record) == 3
    record.write_text(json.dumps({"block": "b", "cells": []}))  # written before provenance
    assert provenance.block_attempt(record) == 2


def test_summary_counts_cells_by_commit_and_ranges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = tiny_plan()
    cells = list(plan.sweeps["grid"].cells)
    gather(plan, tmp_path / "run" / "grid", [encode(plan, cells, [CLEAN, DIRTY])])
    summary = provenance.run_provenance(tmp_path / "run")
    assert summary["cells"] == 16 and summary["sweeps"] == {"grid": 16}
    assert summary["commits"] == {"aaaaaaaaaaaa": 8, "aaaaaaaaaaaa-dirty": 8}
    assert summary["hosts"] == {"node1": 8, "node2": 8}
    assert summary["versions"]["numpy"] == {"2.0.0": 16}
    assert summary["attempts"] == {"1": 8, "2": 8}
    assert summary["peak_memory_bytes"] == {"min": 100 * 2**20, "max": 115 * 2**20}
    assert summary["wall_seconds"]["total"] == pytest.approx(16 * 0.01)
    lines = provenance.provenance_lines(summary)
    assert "8 cells from commit aaaaaaaaaaaa, 8 from aaaaaaaaaaaa-dirty" in lines
    assert cli.main(["provenance", str(tmp_path / "run"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cells"] == 16
    assert cli.main(["provenance", str(tmp_path / "missing")]) == cli.EXIT_USAGE


def test_a_rerun_block_records_the_attempt_of_each_cell(
    tmp_path: Path, scheduler_address: str
) -> None:
    """Attempt 1 fails one cell; attempt 2 computes it and reuses the salvaged sibling,
    whose provenance (attempt 1) travels with it."""
    plan = tiny_plan()
    params = blocks.block_params(plan.sweeps["grid"].cells[:2], plan.seed)
    broken = dict(params[1], kwargs=dict(params[1]["kwargs"], d=1))  # d=1 raises
    path = tmp_path / "results" / "unit" / "grid" / "fragments" / "b.npz"
    settings = {"mode": "address", "address": scheduler_address}
    with pytest.raises(RuntimeError, match="1 of 2 cells"):
        blocks.run_block([params[0], broken], path, path.parents[2], settings)
    summary = blocks.run_block(params, path, path.parents[2], settings)
    assert (summary.n_computed, summary.n_reused) == (1, 1)
    records = store.read_fragment(path).records
    assert [record["attempt"] for record in records] == [1, 2]
    # a threads cluster runs the cells in this process: its cached environment
    assert {record[provenance.ENVIRONMENT_KEY] for record in records} == {
        provenance.process_environment()
    }
    assert 0 < records[0]["peak_memory_bytes"] <= records[1]["peak_memory_bytes"]
