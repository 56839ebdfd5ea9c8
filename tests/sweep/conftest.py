"""Shared helpers of the sweep tests: a tiny sweep plan, synthetic cell records whose
numbers identify the cell, and fragments written by the real fragment writer."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from attnrmt.sweep import fragments
from attnrmt.sweep.plan import plan_run

TINY_CONFIG: dict[str, Any] = {
    "run": "unit",
    "seed": 5,
    "positional_models": {"prefix2": {"kind": "prefix", "L": 2}},
    "weight_models": {"causal1": {"kind": "causal_attention", "tau": 1.0}},
    "sweeps": {
        "grid": {
            "d": [6],
            "delta": [0.5],
            "gamma": [0.5],
            "T": [3],
            "positional": ["prefix2"],
            "weights": ["mean", "causal1"],
            "snr": [0.0, 2.0],
            "centered": [True, False],
            "replicates": 2,
            "top_k": 2,
        }
    },
}


def tiny_config(**sweep: Any) -> dict[str, Any]:
    """:data:`TINY_CONFIG` with the ``grid`` sweep's keys replaced by ``sweep``."""
    config = copy.deepcopy(TINY_CONFIG)
    config["sweeps"]["grid"].update(sweep)
    return config


def tiny_plan(d: list[int] | None = None, T: list[int] | None = None, **sweep: Any) -> Any:
    """Plan of one small sweep: 2 weights x 2 snr x 2 replicates per (d, T)."""
    return plan_run(tiny_config(d=d or [6], T=T or [3], **sweep))


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
    """Write a fragment of ``cells`` (default: all of the sweep) with synthetic records."""
    sweep = plan.sweeps["grid"]
    cells = sweep.cells if cells is None else cells
    arrays = fragments.encode_fragment(
        [cell.key for cell in cells],
        [fragments.seed_token(cell.seed_words(plan.seed)) for cell in cells],
        [True] * len(cells),
        [synthetic_record(cell) for cell in cells],
    )
    fragments.write_fragment(path, arrays)
    return cells


def write_block_fragments(plan: Any, sweep_dir: Path) -> list[Path]:
    """One fragment per block of the plan under ``<sweep_dir>/fragments`` (block keys)."""
    paths = []
    for block in plan.sweeps["grid"].blocks:
        path = sweep_dir / fragments.FRAGMENTS_DIRNAME / f"{block.key}.npz"
        if not path.exists():
            write_block(plan, path, list(block.cells))
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def scheduler_address() -> Any:
    """An in-process Dask cluster (threads), closed after the module."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=1,
        threads_per_worker=2,
        processes=False,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address=":0",
    ) as local:
        yield local.scheduler_address
