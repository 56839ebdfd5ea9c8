"""The fragment scan of a run's progress (attnrmt.sweep.report.status): a block's cache
copy counts once and stays done."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attnrmt.sweep.report import status
from attnrmt.sweep.spec.plan import plan_run
from tests.sweep.report.conftest import EPOCH, uniform_config, write_timed_block


def test_cache_copy_counts_once_and_a_cached_block_stays_done(tmp_path: Path) -> None:
    plan = plan_run(uniform_config(n_snr=3, block_size=2))
    sweep = plan.sweeps["grid"]
    sweep_dir = tmp_path / "unit" / "grid"
    path = write_timed_block(plan, sweep_dir, sweep.blocks[0], np.full(2, 0.5), EPOCH)
    files = status.scan_fragment_files(sweep_dir, [block.key for block in sweep.blocks])
    assert [file.path for file in files] == [path]  # the cache/ copy is the same block
    path.unlink()  # Snakemake removes an output before rerunning its job
    files = status.scan_fragment_files(sweep_dir, [block.key for block in sweep.blocks])
    assert status.done_cell_keys(sweep, sweep_dir) == set(sweep.blocks[0].cell_keys)
