"""Cost model of a cell (attnrmt.sweep.spec.cost)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from attnrmt.sweep.spec import cost

FINITE_SIZE_CONFIG = Path(__file__).resolve().parents[3] / "configs" / "finite-size.yaml"


def kwargs_of(d: int, weights: str | dict = "mean") -> dict:
    return {"d": d, "delta": 0.5, "gamma": 0.5, "T": 8, "weights": weights}


def test_cell_work_is_cubic_in_d_at_fixed_ratios() -> None:
    # every term scales as d^3 when N and V are proportional to d (T fixed, small)
    ratio = cost.cell_work(200, 0.5, 0.5, 8, "mean") / cost.cell_work(100, 0.5, 0.5, 8, "mean")
    assert ratio == pytest.approx(8.0, rel=0.05)


def test_causal_attention_costs_more() -> None:
    attention = {"kind": "causal_attention", "tau": 1.0}
    assert cost.estimated_cell_seconds(kwargs_of(400, attention)) > cost.estimated_cell_seconds(
        kwargs_of(400)
    )


def test_top_cells_cost_less_than_full_cells_at_large_d() -> None:
    """The top route's work grows as ~d^2.15, the full route's as d^3: the top/full ratio
    falls with d, and a top cell is the cheaper from d = 4000 (measured top/full CPU time
    0.80 / 0.43 / 0.19 at d = 2000 / 4000 / 8000, benchmarks cell_top_vs_full). The full
    model over-estimates full cells at d >= 2000 (~5x, its constant is calibrated at
    d = 256), so its ratios are not compared with the measured ones here; the top estimate
    is compared with measured top cells below."""
    from attnrmt.sweep.spec.cost import cell_work

    ratios = [
        cell_work(d, 0.5, 0.5, 8, "mean", "top") / cell_work(d, 0.5, 0.5, 8, "mean")
        for d in (2000, 4000, 8000)
    ]
    assert ratios[0] > ratios[1] > ratios[2]
    assert ratios[1] < 1.0


#: Measured top-cell seconds (tests/sweep/data/top_cell_seconds.csv): the finite-size
#: study's cells (configs/finite-size.yaml, wall ``compute_seconds`` under load 5-7 on
#: 2 cores) and the benchmark's single-thread CPU seconds (benchmarks/results.md,
#: bench_cell_top_and_kernels), each with the calibration of the host they ran on.
TOP_CELL_SECONDS = Path(__file__).parents[1] / "data" / "top_cell_seconds.csv"
#: Allowed estimate/measured factor. The fit's residuals are -9% .. +4% (cost.py,
#: TOP_COLUMNS_SCALE); two benchmark runs of the same d = 4000 top cell measured 4.59 and
#: 5.57 CPU s (1.21x), so a factor 1.25 is what the data can support. The constants the
#: fit replaced estimated 8x too much at d = 4000, a d^(7/3) law 3x too little at d = 250.
TOP_ESTIMATE_FACTOR = 1.25


def measured_top_seconds(source: str) -> dict[int, tuple[np.ndarray, float]]:
    """``{d: (measured seconds, estimated seconds)}`` of one source of the fixture; the
    estimate uses the host's calibration stored with the timings."""
    by_d: dict[int, list[float]] = {}
    estimates: dict[int, float] = {}
    with TOP_CELL_SECONDS.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["source"] != source:
                continue
            d = int(row["d"])
            by_d.setdefault(d, []).append(float(row["seconds"]))
            work = cost.cell_work(
                d, float(row["delta"]), float(row["gamma"]), int(row["T"]), row["weights"], "top"
            )
            estimates[d] = cost.CELL_OVERHEAD_SECONDS + work * float(row["host_seconds_per_work"])
    return {d: (np.array(seconds), estimates[d]) for d, seconds in by_d.items()}


def host_seconds_per_work() -> float:
    """The calibration of the host the fixture's timings ran on (one value for all rows)."""
    with TOP_CELL_SECONDS.open(newline="") as handle:
        values = {float(row["host_seconds_per_work"]) for row in csv.DictReader(handle)}
    assert len(values) == 1
    return values.pop()


def test_top_estimate_matches_the_least_slowed_study_cell_of_each_d() -> None:
    """A cell's wall time is its one-thread CPU time plus what the load adds, so each d's
    fastest of ~180 cells is its unloaded cost (1.07 s at d = 2000 as the benchmark's CPU
    seconds); the estimate must be within TOP_ESTIMATE_FACTOR of it for every d."""
    study = measured_top_seconds("finite_size_study")
    assert sorted(study) == [250, 500, 1000, 2000, 4000]
    for d, (seconds, estimate) in study.items():
        assert len(seconds) >= 170, d
        ratio = estimate / seconds.min()
        assert 1 / TOP_ESTIMATE_FACTOR < ratio < TOP_ESTIMATE_FACTOR, (d, ratio)
        # one core's work never exceeds what the loaded run took for a typical cell
        assert estimate < np.median(seconds), d


def test_top_estimate_matches_the_benchmark_cpu_seconds() -> None:
    """Single-thread CPU seconds of top cells at d = 2000 ... 10^4 (the fit used 8000 and
    10^4; 2000 and 4000 are a check)."""
    benchmark = measured_top_seconds("cell_top_benchmark")
    assert sorted(benchmark) == [2000, 4000, 8000, 10000]
    for d, (seconds, estimate) in benchmark.items():
        ratio = estimate / float(np.median(seconds))
        assert 1 / TOP_ESTIMATE_FACTOR < ratio < TOP_ESTIMATE_FACTOR, (d, ratio)


def test_top_constants_are_the_fit_of_the_measured_cells() -> None:
    """The module's top constants are fit_top_constants of the fixture's fit points (each
    study d's fastest cell, the benchmark at d >= 8000), up to their rounding (144 for
    143.9, 0.15 for 0.1498, 1.7e8 for 1.74e8)."""
    study = measured_top_seconds("finite_size_study")
    benchmark = measured_top_seconds("cell_top_benchmark")
    points = [(d, seconds.min()) for d, (seconds, _) in sorted(study.items())]
    points += [
        (d, float(np.median(seconds))) for d, (seconds, _) in sorted(benchmark.items()) if d >= 8000
    ]
    d = np.array([point[0] for point in points])
    ones = np.ones(len(points))
    scale, exponent, fixed_work = cost.fit_top_constants(
        d,
        0.5 * ones,
        0.5 * ones,
        8 * ones,
        np.array([point[1] for point in points]),
        host_seconds_per_work(),
    )
    assert exponent == pytest.approx(cost.TOP_COLUMNS_EXPONENT, abs=0.005)
    assert scale == pytest.approx(cost.TOP_COLUMNS_SCALE, rel=0.03)
    assert fixed_work == pytest.approx(cost.TOP_FIXED_WORK, rel=0.05)


def test_top_work_of_arrays_is_cell_work_of_each() -> None:
    d = np.array([250, 4000])
    assert np.allclose(
        cost.top_work(d, 2 * d, 2 * d, 8),
        [cost.cell_work(int(x), 0.5, 0.5, 8, "mean", "top") for x in d],
    )


def test_top_constants_size_blocks_but_never_change_a_cell(monkeypatch) -> None:
    """The top constants size ``block_size: auto`` blocks of a top sweep; with the old,
    8x larger estimate the blocks differ, the cells (keys, hence reuse from fragments,
    tests/sweep/compute/test_blocks.py) and the sweep's identity do not."""
    import yaml

    from attnrmt.sweep import load_config, plan_run

    with FINITE_SIZE_CONFIG.open(encoding="utf-8") as handle:
        raw = yaml.safe_load(handle)
    raw["execution"] = {"block_size": "auto", "block_seconds": 60}
    fitted = plan_run(load_config(raw))
    monkeypatch.setattr(cost, "TOP_COLUMNS_SCALE", 260.0)  # the replaced d^(1/3) constant
    monkeypatch.setattr(cost, "TOP_COLUMNS_EXPONENT", 1.0 / 3.0)
    monkeypatch.setattr(cost, "TOP_FIXED_WORK", 0.0)
    old = plan_run(load_config(raw))
    for name, sweep in fitted.sweeps.items():
        other = old.sweeps[name]
        assert [b.key for b in sweep.blocks] != [b.key for b in other.blocks]
        assert [c.key for c in sweep.cells] == [c.key for c in other.cells]
        assert sweep.config_sha256 == other.config_sha256
