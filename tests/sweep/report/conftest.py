"""Shared helpers of the report tests (status, progress): uniform sweeps and fragments
with a known compute time and mtime, written by the real fragment writer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.sweep.spec import identity
from attnrmt.sweep.store import fragments
from tests.sweep.conftest import store_config, synthetic_record

#: An arbitrary wall-clock origin for replayed schedules.
EPOCH = 1.8e9


def uniform_config(n_snr: int = 20, block_size: int = 2) -> dict[str, Any]:
    """d = 400, one weights model, ``n_snr`` snr x 2 centred x 2 replicates: cells of
    identical cost (planned only: nothing here computes them)."""
    config = store_config(d=[400], weights=["mean"], snr=[float(i) for i in range(n_snr)])
    config["execution"] = {"block_size": block_size}
    return config


def write_timed_block(
    plan: Any, sweep_dir: Path, block: Any, seconds: np.ndarray, finished_at: float
) -> Path:
    """Publish a block's fragment (with its cache link) whose cells took ``seconds`` and
    whose mtime is ``finished_at``."""
    records = []
    for cell, cell_seconds in zip(block.cells, seconds, strict=True):
        records.append({**synthetic_record(cell), "compute_seconds": float(cell_seconds)})
    arrays = fragments.encode_fragment(
        [cell.key for cell in block.cells],
        [identity.seed_token(cell.seed_words(plan.seed)) for cell in block.cells],
        [True] * len(block.cells),
        records,
    )
    path = fragments.publish_fragment(
        sweep_dir / fragments.FRAGMENTS_DIRNAME / f"{block.key}.npz", arrays
    )
    os.utime(path, (finished_at, finished_at))
    return path
