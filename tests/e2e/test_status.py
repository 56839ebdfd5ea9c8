"""`attnrmt status` from another process while a real run (Snakemake, Dask) writes, and
after it: progress moves, a finished run is at 100 %, and the run prints its own
progress line with an ETA."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import Workdir, subprocess_environment, tiny_config, with_sweep

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

# 2 weights x 12 snr x 2 replicates = 48 cells of d = 1200, one block each: each cell
# takes ~0.4 s of one core (measured), so the blocks take ~10 s on two cores, while one
# `attnrmt status` process takes ~0.8 s: several looks at a run in progress.
N_CELLS = 48


@pytest.fixture
def slow_run(tmp_path: Path) -> Iterator[Workdir]:
    """A workdir whose sweep has one cell per block; its background runs die with it."""
    config = with_sweep(
        tiny_config(run="watched", execution={"block_size": 1}),
        d=[1200],
        snr=[0.25 * index for index in range(12)],
    )
    workdir = Workdir.create(tmp_path / "work", config)
    try:
        yield workdir
    finally:
        workdir.close()


def read_status(target: Path, *args: str) -> dict[str, Any]:
    """``attnrmt status TARGET --json`` in a separate process (as a user's terminal)."""
    completed = subprocess.run(
        [sys.executable, "-m", "attnrmt.cli", "status", str(target), "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=subprocess_environment(),
        check=True,
    )
    return json.loads(completed.stdout)


def test_status_follows_a_running_sweep_and_reports_100_percent_at_the_end(
    slow_run: Workdir,
) -> None:
    process = slow_run.start()
    slow_run.wait_for_fragments(1, process, timeout=240)
    observed, running = [], []
    while process.poll() is None:
        seen = read_status(slow_run.run_dir)
        total = seen["total"]
        if process.poll() is not None or total["done"] == N_CELLS:
            break  # ended while we looked, or shutting down (its token goes before it)
        observed.append(total["done"])
        running.append(total["running"])
        assert seen["live"] is True
        assert total["cells"] == N_CELLS
        assert total["done"] + total["failed"] + total["pending"] == N_CELLS
        assert total["running"] + total["queued"] == total["pending"]
        assert total["missing"] == 0
        time.sleep(0.2)
    assert process.wait() == 0, (slow_run.path / "snakemake-background.log").read_text()

    assert len(set(observed)) >= 2, f"no progress seen while running: {observed}"
    assert observed == sorted(observed)  # done never goes back
    assert max(running) > 0, f"no running block seen: {running}"
    config_file = slow_run.path / "config.yaml"
    final = read_status(config_file, "--results", str(slow_run.path / "results"))
    assert final["total"]["done"] == N_CELLS
    assert final["total"]["percent_done"] == 100.0
    assert final["total"]["eta_seconds"] == 0.0
    assert final["live"] is False
    log = (slow_run.path / "snakemake-background.log").read_text()
    assert "attnrmt: progress watched: " in log and "ETA" in log
