"""Benchmark: the cost of per-cell provenance (fragments, and ``attnrmt provenance``).

Metrics (medians of ``REPEATS`` runs in this process; ratios against a plain alternative
measured in the same run):

``fragment_encode_ratio``
    :func:`attnrmt.sweep.store.fragments.encode_fragment` of a ``BLOCK``-cell block with
    provenance (two environments, peak memory, attempt) over the same block whose records
    carry none (the provenance columns then hold the "unknown" values).
``fragment_bytes_per_cell_provenance``
    Extra bytes per cell of the ``.npz`` over the format without provenance members (three
    int64 columns plus the environment JSON stored once per distinct environment).
``summary_seconds_<n>_cells`` / ``summary_ratio_to_column_read_<n>_cells``
    :func:`attnrmt.sweep.report.provenance.run_provenance` of a gathered ``N_CELLS``-cell sweep,
    and its ratio to the floor: reading the same four columns of every segment with Zarr
    (no grid index, no counting).

Fragments are synthetic (as in bench_store) but written and gathered by the real code.
Run with ``python -m benchmarks bench_provenance``.
"""

from __future__ import annotations

import io
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.contract import PROVENANCE_FIELDS
from attnrmt.sweep import load_config, plan_run
from attnrmt.sweep.compute.provenance import process_environment
from attnrmt.sweep.report.provenance import run_provenance
from attnrmt.sweep.spec.identity import seed_token
from attnrmt.sweep.store.cell_table.writer import gather_cells
from attnrmt.sweep.store.fragments import encode_fragment, write_fragment
from attnrmt.sweep.store.provenance import ENVIRONMENT_KEY, ENVIRONMENTS_MEMBER
from benchmarks.bench_store import store_config

N_CELLS = 100_000
BLOCK = 1000
REPEATS = 5


def records_of(
    cells: list[Any], rng: np.random.Generator, environments: list[str]
) -> list[dict[str, Any]]:
    """Synthetic records (bench_store's) with provenance, alternating two environments."""
    return [
        {
            "eigenvalues": np.sort(rng.random(cell.d)),
            **{
                name: rng.random(cell.top_k)
                for name in (
                    "top_eigenvalues",
                    "overlap_signal",
                    "overlap_class_mean",
                    "overlap_table_mean",
                    "pop_top_eigenvalues",
                    "pop_overlap_signal",
                )
            },
            "alpha": 0.1,
            "kappa": 0.125,
            "sigma": 1.0,
            "V": 4 * cell.d,
            "N": 2 * cell.d,
            "effective_weights": np.full(cell.T, 1.0 / cell.T),
            "downstream_accuracy": float("nan"),
            "compute_seconds": 0.002,
            ENVIRONMENT_KEY: environments[i % 2],
            "peak_memory_bytes": 2**27 + i,
            "attempt": 1,
        }
        for i, cell in enumerate(cells)
    ]


def _median_seconds(function: Any) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _npz_bytes(arrays: dict[str, np.ndarray]) -> int:
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **arrays)
    return buffer.tell()


def fragment_metrics(block: Any, seed: int, environments: list[str]) -> dict[str, Any]:
    """Encode time and bytes of one block with and without provenance."""
    cells = list(block.cells)
    records = records_of(cells, np.random.default_rng(0), environments)
    plain = [
        {k: v for k, v in r.items() if k not in (ENVIRONMENT_KEY, *PROVENANCE_FIELDS)}
        for r in records
    ]
    keys = [cell.key for cell in cells]
    seeds = [seed_token(cell.seed_words(seed)) for cell in cells]
    flags = [True] * len(cells)
    with_seconds = _median_seconds(lambda: encode_fragment(keys, seeds, flags, records))
    plain_seconds = _median_seconds(lambda: encode_fragment(keys, seeds, flags, plain))
    old_format = {
        name: value
        for name, value in encode_fragment(keys, seeds, flags, plain).items()
        if name not in (ENVIRONMENTS_MEMBER, *PROVENANCE_FIELDS)
    }
    extra = _npz_bytes(encode_fragment(keys, seeds, flags, records)) - _npz_bytes(old_format)
    return {
        "fragment_cells": len(cells),
        "fragment_encode_seconds_plain": round(plain_seconds, 4),
        "fragment_encode_seconds_provenance": round(with_seconds, 4),
        "fragment_encode_ratio": round(with_seconds / plain_seconds, 3),
        "fragment_bytes_per_cell_provenance": round(extra / len(cells), 1),
    }


def read_columns(sweep_dir: Path) -> int:
    """Floor of the summary: the table's four columns read whole with Zarr."""
    import zarr

    group = zarr.open_group(str(sweep_dir / "cells.zarr"), mode="r", use_consolidated=True)
    return sum(
        int(np.asarray(group[name][:]).size) for name in (*PROVENANCE_FIELDS, "compute_seconds")
    )


def main() -> dict[str, Any]:
    plan = plan_run(load_config(store_config(16, N_CELLS)))
    sweep = plan.sweeps["big"]
    this = process_environment()
    other = json.dumps(
        {**json.loads(this), "host": "other-host"}, sort_keys=True, separators=(",", ":")
    )
    environments = [this, other]
    rng = np.random.default_rng(1)
    result = fragment_metrics(sweep.blocks[0], plan.seed, environments)
    with tempfile.TemporaryDirectory(prefix="attnrmt-bench-provenance-") as tmp:
        run_dir = Path(tmp) / "results" / "bench-provenance"
        sweep_dir = run_dir / "big"
        paths = []
        for block in sweep.blocks:
            cells = list(block.cells)
            arrays = encode_fragment(
                [cell.key for cell in cells],
                [seed_token(cell.seed_words(plan.seed)) for cell in cells],
                [True] * len(cells),
                records_of(cells, rng, environments),
            )
            paths.append(write_fragment(sweep_dir / "fragments" / f"{block.key}.npz", arrays))
        gather_cells(sweep, paths, sweep_dir / "cells.zarr", plan.seed)
        summary = run_provenance(run_dir)
        assert summary["cells"] == len(sweep.cells), summary
        summary_seconds = _median_seconds(lambda: run_provenance(run_dir))
        floor_seconds = _median_seconds(lambda: read_columns(sweep_dir))
    label = f"{len(sweep.cells)}_cells"
    result.update(
        {
            f"summary_seconds_{label}": round(summary_seconds, 3),
            f"column_read_seconds_{label}": round(floor_seconds, 3),
            f"summary_ratio_to_column_read_{label}": round(summary_seconds / floor_seconds, 2),
        }
    )
    return result
