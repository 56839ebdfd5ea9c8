"""Provenance a block job records (attnrmt.sweep.compute.provenance): the worker's environment,
the git state, the attempt of each block and cell."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from attnrmt.sweep.compute import blocks
from attnrmt.sweep.compute import provenance as run_provenance
from attnrmt.sweep.store import provenance
from attnrmt.sweep.store.failures import failure_record_path, record_block_failures
from tests.sweep.conftest import store_plan
from tests.sweep.oracles import read_fragment


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
    plan = store_plan()
    params = plan.sweeps["grid"].cells.block_params(plan.seed)[0]
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
    assert run_provenance.git_state(package) == (head, False)
    (package / "new.py").write_text("y = 2\n")  # untracked source under the package
    assert run_provenance.git_state(package) == (head, True)
    (package / "new.py").unlink()
    (package / "mod.py").write_text("x = 2\n")  # modified tracked file
    assert run_provenance.git_state(package) == (head, True)
    outside = tmp_path / "not-a-checkout"
    outside.mkdir()
    assert run_provenance.git_state(outside) == ("", False)


def test_block_attempt_counts_failed_attempts(tmp_path: Path) -> None:
    fragment = tmp_path / "grid" / "fragments" / "b.npz"
    record = failure_record_path(fragment)
    assert run_provenance.block_attempt(record) == 1
    record_block_failures(fragment, [], attempt=1)
    assert run_provenance.block_attempt(record) == 2
    record_block_failures(fragment, [], attempt=2)
    assert run_provenance.block_attempt(record) == 3
    record.write_text(json.dumps({"block": "b", "cells": []}))  # written before provenance
    assert run_provenance.block_attempt(record) == 2


def test_a_rerun_block_records_the_attempt_of_each_cell(
    tmp_path: Path, scheduler_address: str
) -> None:
    """Attempt 1 fails one cell; attempt 2 computes it and reuses the salvaged sibling,
    whose provenance (attempt 1) travels with it."""
    plan = store_plan()
    params = plan.sweeps["grid"].cells.block_params(plan.seed)[:2]
    broken = dict(params[1], kwargs=dict(params[1]["kwargs"], d=1))  # d=1 raises
    path = tmp_path / "results" / "unit" / "grid" / "fragments" / "b.npz"
    settings = {"mode": "address", "address": scheduler_address}
    with pytest.raises(RuntimeError, match="1 of 2 cells"):
        blocks.run_block([params[0], broken], path, path.parents[2], settings)
    summary = blocks.run_block(params, path, path.parents[2], settings)
    assert (summary.n_computed, summary.n_reused) == (1, 1)
    records = read_fragment(path).records
    assert [record["attempt"] for record in records] == [1, 2]
    # a threads cluster runs the cells in this process: its cached environment
    assert {record[provenance.ENVIRONMENT_KEY] for record in records} == {
        run_provenance.process_environment()
    }
    assert 0 < records[0]["peak_memory_bytes"] <= records[1]["peak_memory_bytes"]
