"""Benchmark: what the store checks cost (docs/data-contract.md, "Integrity"), against
the gather and the read they guard.

On ``VERIFY_CELLS`` synthetic cells at d = ``VERIFY_D`` in fragments of
``VERIFY_BLOCK`` cells, gathered into ``cell_table.zarr`` and its ``cells.zarr``
snapshot (every array with the ``crc32c`` codec):

- ``verify_gather_seconds``: a first gather (the table removed before each repeat),
  including its digest record;
- ``verify_digest_seconds``: writing the snapshot's record from scratch (every file's
  CRC-32C; a later gather reuses the CRCs of the unchanged files);
- ``verify_read_seconds``: ``attnrmt.open_results`` of the run and every variable of the
  cells loaded (its quick check included);
- ``verify_quick_seconds`` / ``verify_full_seconds``: the quick check (sizes, metadata
  checksums; what ``open_results`` does) and the full check (every byte; ``attnrmt
  verify``, and a rerun before it reuses a store).

Ratios: quick / read (target ``QUICK_SHARE_TARGET``: the default check costs at most 10 %
of a read), full / read and full / gather. Medians of ``REPEATS``.
Run with ``python -m benchmarks bench_verify``.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the tests' tiny config (tests/e2e/helpers.py)
    sys.path.insert(0, str(REPO))

from tests.e2e.helpers import tiny_config  # noqa: E402

from benchmarks.bench_integrity import _synthetic_records  # noqa: E402

VERIFY_CELLS = 10_000
VERIFY_D = 500
VERIFY_BLOCK = 200
REPEATS = 3
#: The quick check's share of an open_results read it must stay below.
QUICK_SHARE_TARGET = 0.10


def _median(measure: Callable[[], float], repeats: int = REPEATS) -> float:
    return statistics.median(measure() for _ in range(repeats))


def verify_costs() -> dict[str, Any]:
    """The ``verify_*`` numbers (module docstring)."""
    from attnrmt.sweep import load_config, plan_run
    from attnrmt.sweep.spec.identity import seed_token
    from attnrmt.sweep.store import fragments, open_results
    from attnrmt.sweep.store.cell_table.layout import store_dir
    from attnrmt.sweep.store.cell_table.writer import gather_cells
    from attnrmt.sweep.store.integrity import digest_path, sweep_damage, write_digest

    rng = np.random.default_rng(5)
    config = tiny_config(run="verify", execution={"block_size": VERIFY_BLOCK})
    config["sweeps"]["grid"].update(
        d=[VERIFY_D],
        weights=["mean"],
        replicates=20,
        snr=[round(0.001 * index, 3) for index in range(VERIFY_CELLS // 20)],
    )
    plan = plan_run(load_config(config))
    sweep = plan.sweeps["grid"]
    root = Path(tempfile.mkdtemp(prefix="attnrmt-verify-"))
    try:
        sweep_dir = root / "run" / "grid"
        paths = []
        for block in sweep.blocks:
            cells = list(block.cells)
            arrays = fragments.encode_fragment(
                [cell.key for cell in cells],
                [seed_token(cell.seed_words(plan.seed)) for cell in cells],
                [True] * len(cells),
                _synthetic_records(len(cells), VERIFY_D, rng),
            )
            paths.append(
                fragments.publish_fragment(sweep_dir / "fragments" / f"{block.key}.npz", arrays)
            )
        snapshot = sweep_dir / "cells.zarr"

        def gather() -> float:
            shutil.rmtree(store_dir(sweep_dir), ignore_errors=True)
            shutil.rmtree(snapshot, ignore_errors=True)
            digest_path(snapshot).unlink(missing_ok=True)
            started = time.perf_counter()
            gather_cells(sweep, paths, snapshot, plan.seed)
            return time.perf_counter() - started

        def digest() -> float:
            digest_path(snapshot).unlink()
            started = time.perf_counter()
            write_digest(snapshot)
            return time.perf_counter() - started

        def read() -> float:
            started = time.perf_counter()
            open_results(sweep_dir.parent)["grid/cells"].to_dataset().load()
            return time.perf_counter() - started

        def check(full: bool) -> Callable[[], float]:
            def measure() -> float:
                started = time.perf_counter()
                if sweep_damage(sweep_dir, full=full):
                    raise RuntimeError("a clean store reported damaged")
                return time.perf_counter() - started

            return measure

        gather_seconds = _median(gather)
        digest_seconds = _median(digest)
        read_seconds = _median(read)
        quick_seconds, full_seconds = _median(check(False)), _median(check(True))
        store_bytes = sum(p.stat().st_size for p in snapshot.rglob("*") if p.is_file())
        n_files = sum(1 for p in snapshot.rglob("*") if p.is_file())
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "verify_cells": VERIFY_CELLS,
        "verify_d": VERIFY_D,
        "verify_store_mb": round(store_bytes / 2**20, 1),
        "verify_store_files": n_files,
        "verify_gather_seconds": round(gather_seconds, 3),
        "verify_digest_seconds": round(digest_seconds, 3),
        "verify_read_seconds": round(read_seconds, 3),
        "verify_quick_seconds": round(quick_seconds, 4),
        "verify_full_seconds": round(full_seconds, 4),
        "verify_quick_over_read": round(quick_seconds / read_seconds, 4),
        "verify_full_over_read": round(full_seconds / read_seconds, 4),
        "verify_full_over_gather": round(full_seconds / gather_seconds, 4),
        "verify_digest_over_gather": round(digest_seconds / gather_seconds, 4),
    }


def main() -> dict[str, Any]:
    """The ``verify_*`` numbers, and whether the quick check meets its target."""
    warnings.simplefilter("ignore")
    with contextlib.redirect_stderr(io.StringIO()):
        result = verify_costs()
    result["verify_quick_ok"] = result["verify_quick_over_read"] <= QUICK_SHARE_TARGET
    result["target"] = f"quick check <= {QUICK_SHARE_TARGET:.0%} of an open_results read"
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
