"""A small, fast set of the chaos suite (``python -m benchmarks bench_chaos``): faults at
run time, each followed by the one command, the end state checked against cells computed
directly. Real Snakemake, Dask and files; nothing monkeypatched.

One workdir goes through, in order:

1. SIGTERM while blocks run: the run stops, what finished is stored (the cell table
   shows it) and no message says ``None``; the same command computes exactly the cells
   that had not finished.
2. Damage before a gather (the table removed, so the gather reads every fragment again):
   a fragment truncated (its cache copy intact), a cache copy with 64 bytes inverted
   (its fragment intact: nothing reads it), and both copies of a third block damaged.
   The gather restores the first from its intact copy, moves the damaged files it reads
   to ``damaged/`` and fails naming the lost one; ``attnrmt status``, ``attnrmt plan``
   and the summary agree that its cells are missing; the same command recomputes
   exactly those cells.

The numbers at the end equal ``compute_cell`` of every planned cell, bit for bit.
"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from attnrmt.sweep import load_config, plan_run
from attnrmt.sweep.compute.blocks import compute_cell
from attnrmt.sweep.store import fragments
from attnrmt.sweep.store.cell_table.reader import open_cells
from attnrmt.sweep.store.provenance import PROVENANCE_KEYS
from tests.e2e.helpers import (
    Workdir,
    damage_file,
    finished_cells_now,
    stop_seconds,
    tiny_config,
)
from tests.sweep.oracles import read_fragment

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

N_CELLS = 16  # 2 weights x 4 snr x 2 replicates, in 4 blocks of 4


def chaos_config() -> dict[str, Any]:
    """Cells of ~0.4 s (d = 800) in 4 blocks of 4: a run lasts long enough to be stopped
    between its first and its last block."""
    config = tiny_config(run="chaos", execution={"block_size": 4})
    config["sweeps"]["grid"].update(d=[800], snr=[0.0, 1.0, 2.0, 3.0])
    return config


def background_log(workdir: Workdir) -> str:
    return (workdir.path / "snakemake-background.log").read_text(errors="replace")


def attnrmt_lines(output: str) -> list[str]:
    """Lines attnrmt wrote (Snakemake's own lines say ``message: None`` of every rule)."""
    return [line for line in output.splitlines() if "attnrmt" in line or "kept" in line]


def test_stop_and_damage_resume_to_the_clean_numbers(tmp_path: Path) -> None:
    workdir = Workdir.create(tmp_path / "work", chaos_config())
    plan = plan_run(load_config(workdir.config))
    sweep = plan.sweeps["grid"]
    try:
        # 1. SIGTERM while blocks run
        process = workdir.start(cores=2)
        workdir.wait_for_fragments(1, process, timeout=240)
        stop_seconds(process, signal.SIGTERM)  # timed in the benchmark, not here
        output = background_log(workdir)
        assert "stopping the run: SIGTERM received" in output, output[-4000:]
        assert not [line for line in attnrmt_lines(output) if "None" in line], output[-4000:]
        finished = finished_cells_now(workdir)
        assert 0 < len(finished) < N_CELLS, "the stop came too late to test anything"
        assert "finished cells stored (open_results shows them)" in output
        # open_results reads the sweep's table (cells.zarr, the gather's output, is not
        # written by a stopped run)
        assert open_cells(workdir.sweep_dir()).attrs["cells_present"] == len(finished)
        resumed = workdir.run()
        assert resumed.computed == N_CELLS - len(finished)  # nothing finished recomputed

        # 2. damage before a gather
        blocks = [workdir.sweep_dir() / "fragments" / f"{block.key}.npz" for block in sweep.blocks]
        rng = np.random.default_rng(24)
        damage_file(blocks[0], "truncate", rng)  # cache copy intact
        damage_file(fragments.twin_of(blocks[1]), "flip", rng)  # fragment intact
        damage_file(blocks[2], "flip", rng)  # both copies: its cells are lost
        damage_file(fragments.twin_of(blocks[2]), "truncate", rng)
        for stale in ("cells.zarr", "cell_table.zarr"):
            shutil.rmtree(workdir.sweep_dir() / stale)
        failed = workdir.run(check=False)
        assert failed.returncode != 0
        # the gather reads fragments/ (a cache copy only when its fragment is damaged)
        assert failed.output.count("restored from its intact copy") == 1, failed.output[-6000:]
        assert f"damaged fragment(s) moved aside ({blocks[2].relative_to(workdir.path)})" in (
            failed.output
        )
        assert len(list((workdir.sweep_dir() / "damaged").iterdir())) == 3
        lost = set(sweep.blocks[2].cell_keys)
        assert_counters_agree(workdir, plan, N_CELLS - len(lost))
        again = workdir.run()
        assert again.computed == len(lost)

        # the end state: every cell as a clean computation gives it
        assert workdir.open_cells().attrs["cells_present"] == N_CELLS
        # (one BLAS thread, as the run's workers have: OpenBLAS sums in another order with
        # more threads, ~1e-14 apart)
        for block, path in zip(sweep.blocks, blocks, strict=True):
            stored = read_fragment(path).records
            for params, record in zip(block.cells.block_params(plan.seed), stored, strict=True):
                with threadpool_limits(1):
                    clean = compute_cell(params["kwargs"], params["seed"])
                for name, value in clean.items():
                    if name not in ("compute_seconds", *PROVENANCE_KEYS):
                        np.testing.assert_array_equal(record[name], value, strict=True)
    finally:
        workdir.close()


def assert_counters_agree(workdir: Workdir, plan: Any, done: int) -> None:
    """``attnrmt status``, ``attnrmt plan`` and the end summary count ``done`` cells."""
    from attnrmt.cli import sweep_summary
    from attnrmt.sweep.report import status
    from attnrmt.sweep.report.status import count_sweep
    from attnrmt.sweep.report.summary import tally_cells

    sweep = plan.sweeps["grid"]
    assert status.run_status(plan, workdir.run_dir).total.done == done
    count = count_sweep(sweep, workdir.sweep_dir())
    assert sweep_summary(sweep, count.done, 1e-9)["done_cells"] == done
    tally = tally_cells(plan, workdir.run_dir, None)
    assert tally.planned - tally.missing == done
