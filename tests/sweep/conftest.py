"""Shared helpers of the sweep tests (spec/, store/, run/, report/): a tiny sweep plan,
synthetic cell records whose numbers identify the cell, fragments written by the real
fragment writer (with or without per-cell provenance), a cell no machine can allocate and
an in-process Dask cluster. O(cells) for the few dozen cells of the tiny plans."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import xarray as xr

from attnrmt.contract import PROVENANCE_FIELDS
from attnrmt.sweep import store
from attnrmt.sweep.spec import identity
from attnrmt.sweep.spec.plan import plan_run
from attnrmt.sweep.store import failures as failure_records
from attnrmt.sweep.store import fragments, provenance
from tests.conftest import build_tiny_config

#: d of a cell whose embedding table (hundreds of TiB) no machine can allocate (the
#: out_of_memory cause of run/test_failures.py and report/test_failed_cells.py).
UNALLOCATABLE_D = 5_000_000

#: The sweep-machinery member of the tiny-config family (tests/conftest.py): d = 6, two
#: weight models (one table-dependent) and both centrings, default block size.
STORE_VARIANT: dict[str, Any] = {
    "seed": 5,
    "execution": {},
    "weight_models": {"causal1": {"kind": "causal_attention", "tau": 1.0}},
    "sweep": {
        "d": [6],
        "weights": ["mean", "causal1"],
        "snr": [0.0, 2.0],
        "centered": [True, False],
    },
}


def store_config(**sweep: Any) -> dict[str, Any]:
    """The store variant of the tiny config with the ``grid`` sweep's keys replaced by
    ``sweep``."""
    top = {key: value for key, value in STORE_VARIANT.items() if key != "sweep"}
    return build_tiny_config(sweep={**STORE_VARIANT["sweep"], **sweep}, **top)


def store_plan(d: list[int] | None = None, T: list[int] | None = None, **sweep: Any) -> Any:
    """Plan of one small sweep: 2 weights x 2 snr x 2 centrings x 2 replicates per (d, T)."""
    return plan_run(store_config(d=d or [6], T=T or [3], **sweep))


def write_failed_block(run_dir: Path, sweep: str, block: str, causes: list[str]) -> Path:
    """A failure record of ``len(causes)`` cells of block ``block`` of sweep ``sweep``
    (``causes``: one failure cause per cell); returns its path."""
    fragment = run_dir / sweep / "fragments" / f"{block}.npz"
    return failure_records.record_block_failures(
        fragment,
        [
            {"key": f"{block}{i}", "seed": "s", "error": "E()", "cause": cause}
            for i, cause in enumerate(causes)
        ],
    )


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
        [identity.seed_token(cell.seed_words(plan.seed)) for cell in cells],
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


# --------------------------------------------------------------------------- provenance
#: Two worker environments of the provenance tests (store/, report/test_provenance.py).
CLEAN_ENVIRONMENT = {
    "package_version": "0.1.0",
    "git_commit": "a" * 40,
    "git_dirty": False,
    "python": "3.11.7",
    "numpy": "2.0.0",
    "scipy": "1.14.0",
    "blas": "openblas 0.3.27",
    "host": "node1",
}


DIRTY_ENVIRONMENT = {**CLEAN_ENVIRONMENT, "git_dirty": True, "host": "node2"}


def environment_json(environment: dict[str, Any]) -> str:
    """The canonical JSON of a worker environment, as a block job stores it."""
    return json.dumps(environment, sort_keys=True, separators=(",", ":"))


def with_provenance(
    record: dict[str, Any], environment: dict[str, Any], memory: int, attempt: int
) -> dict[str, Any]:
    """``record`` with the provenance a block job adds (environment, memory, attempt)."""
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


def encode_with_provenance(
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
        [identity.seed_token(cell.seed_words(plan.seed)) for cell in cells],
        [True] * len(cells),
        records,
    )


def gather_and_open(
    plan: Any, sweep_dir: Path, fragment_arrays: list[dict[str, np.ndarray]]
) -> Any:
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
