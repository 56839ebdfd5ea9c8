"""Calibration of the cost model on this machine (``attnrmt.sweep.compute.calibration``):
measured once per host and version, kept, and a good predictor of a cell's CPU time."""

from __future__ import annotations

import json
import time
from pathlib import Path

from threadpoolctl import threadpool_limits

from attnrmt.model import simulate_cell
from attnrmt.sweep.compute.calibration import cached_seconds_per_work, calibrate_seconds_per_work
from attnrmt.sweep.spec.cost import CELL_OVERHEAD_SECONDS, cell_work


def test_calibration_is_kept_so_identical_plans_estimate_identically(tmp_path: Path) -> None:
    path = tmp_path / "run" / ".calibration.json"
    first = cached_seconds_per_work(path)
    assert first > 0 and cached_seconds_per_work(path) == first  # read back, not re-measured
    stored = json.loads(path.read_text())
    stored["seconds_per_work"] = 123.0
    path.write_text(json.dumps(stored))
    assert cached_seconds_per_work(path) == 123.0  # this host's entry is trusted as stored
    stored["identity"]["host"] = "another-machine"
    path.write_text(json.dumps(stored))
    assert cached_seconds_per_work(path) != 123.0  # another machine's number is re-measured
    assert json.loads(path.read_text())["identity"]["host"] != "another-machine"


def test_a_damaged_calibration_file_is_measured_again(tmp_path: Path) -> None:
    path = tmp_path / ".calibration.json"
    path.write_text('{"identity": ')  # a torn file
    assert cached_seconds_per_work(path) > 0
    assert json.loads(path.read_text())["seconds_per_work"] > 0


def test_the_calibration_predicts_the_cpu_time_of_a_larger_cell() -> None:
    """The measured seconds per unit of work predict a d = 512 cell (4x the calibration
    cell's d, ~8x its work) within a factor 2.5: docs/scaling.md calls the estimate a
    factor-2 one, and the model over-estimates a d = 512 cell by ~1.8x on the development
    machine (measured / predicted 0.55); CPU time, not wall time, so other processes' load
    does not enter. Median of 3 timings."""
    seconds_per_work = calibrate_seconds_per_work(budget_seconds=0.3, min_repeats=3)
    kwargs = dict(d=512, delta=0.5, gamma=0.5, T=8, snr=1.0, centered=True, top_k=3)
    kwargs |= {"positional": {"kind": "iid"}, "weights": {"kind": "mean"}}
    timings = []
    with threadpool_limits(1):
        simulate_cell(**kwargs, seed=0)
        for seed in range(1, 4):
            start = time.process_time()
            simulate_cell(**kwargs, seed=seed)
            timings.append(time.process_time() - start)
    measured = sorted(timings)[1]
    predicted = CELL_OVERHEAD_SECONDS + seconds_per_work * cell_work(512, 0.5, 0.5, 8, "mean")
    assert 1 / 2.5 < measured / predicted < 2.5, (measured, predicted)
