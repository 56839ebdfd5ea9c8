"""attnrmt.summary: the verdict, threshold lines and landing-page numbers from the tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from attnrmt.summary import (
    format_seconds,
    report_overview,
    threshold_lines,
    variant_errors,
    variant_verdict,
)


def summary_table() -> pd.DataFrame:
    rows = []
    for sweep, scale in (("a", 1.0), ("b", 3.0)):
        for quantity in ("sample_outlier", "sample_overlap", "threshold_sample"):
            rows.append((sweep, quantity, "paper", 0.2 * scale))
            rows.append((sweep, quantity, "finite_vocab", 0.01 * scale))
    rows.append(("b", "population_outlier", "paper", np.nan))
    return pd.DataFrame(rows, columns=["sweep", "quantity", "variant", "median_rel_error"])


def thresholds_table() -> pd.DataFrame:
    base = {
        "sweep": "s",
        "transition": "sample",
        "finite_size": "none",
        "bound": "none",
        "theory_paper": 1.78,
        "theory_finite_vocab": 1.28,
    }
    rows = [
        {
            **base,
            "d": 400,
            "estimate": 1.1,
            "ci_low": 1.0,
            "ci_high": 1.3,
            "consistent_paper": False,
            "consistent_finite_vocab": True,
        },
        {
            **base,
            "d": 800,
            "estimate": 1.24,
            "ci_low": 1.12,
            "ci_high": 1.34,
            "consistent_paper": False,
            "consistent_finite_vocab": True,
        },
        {
            **base,
            "d": 800,
            "estimate": np.nan,
            "ci_low": 0.0,
            "ci_high": 3.0,
            "bound": "above",
            "consistent_paper": True,
            "consistent_finite_vocab": True,
        },
        {
            **base,
            "d": math.inf,
            "estimate": 1.3,
            "ci_low": 1.2,
            "ci_high": 1.4,
            "finite_size": "d->inf",
            "consistent_paper": False,
            "consistent_finite_vocab": True,
        },
    ]
    return pd.DataFrame(rows)


def test_variant_errors_use_outliers_and_overlaps_only() -> None:
    errors = variant_errors(summary_table())
    # medians over {0.2, 0.2, 0.6, 0.6} and {0.01, 0.01, 0.03, 0.03}; thresholds and NaN out
    assert errors == pytest.approx({"paper": 0.4, "finite_vocab": 0.02})
    assert variant_verdict(summary_table()) == (
        "theory: finite_vocab fits best (median relative error of outliers and overlaps 2%; "
        "paper 40%)"
    )
    empty = summary_table().assign(median_rel_error=np.nan)
    assert variant_verdict(empty).startswith("theory: no outlier or overlap to compare")


def test_threshold_lines_count_finite_d_curves_and_show_the_largest_d() -> None:
    (line,) = threshold_lines(thresholds_table())
    assert line.split() == [
        "s",
        "sample",
        "paper",
        "1/3",
        "finite_vocab",
        "3/3",
        "e.g.",
        "d=800:",
        "1.24",
        "[1.12,",
        "1.34]",
        "(paper",
        "1.78,",
        "finite_vocab",
        "1.28)",
    ]
    assert threshold_lines(pd.DataFrame()) == []


def test_report_overview_is_flat_numbers_under_readable_headings(tmp_path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    summary_table().to_csv(run_dir / "summary.csv", index=False)
    thresholds_table().to_csv(run_dir / "thresholds.csv", index=False)
    overview = report_overview(run_dir)
    assert overview == {
        "paper: median relative error of outliers and overlaps": 0.4,
        "finite_vocab (fits best): median relative error of outliers and overlaps": 0.02,
        "s: sample threshold (snr) at d=800, CI [1.12, 1.34]; theory paper 1.78, "
        "finite_vocab 1.28": 1.24,
    }
    assert report_overview(tmp_path / "missing") == {}


def test_format_seconds() -> None:
    assert [format_seconds(s) for s in (0.4, 59.6, 92, 3600)] == [
        "0 s",
        "1 min 0 s",
        "1 min 32 s",
        "60 min 0 s",
    ]


def test_summary_names_sweep_folders_the_config_no_longer_has(tmp_path) -> None:
    from pathlib import Path

    from attnrmt.summary import run_summary
    from attnrmt.sweep import load_config, plan_run

    small = Path(__file__).with_name("configs") / "small.yaml"
    run_plan = plan_run(load_config(small))
    run_dir = tmp_path / run_plan.run
    (run_dir / "transition" / "fragments").mkdir(parents=True)  # a sweep of the config
    (run_dir / "old_sweep" / "fragments").mkdir(parents=True)  # removed from it since
    (run_dir / "logs").mkdir()  # not a sweep folder
    lines = run_summary(run_plan, tmp_path)
    assert lines[2] == (
        "not in this config (left by an earlier version of it; not in the tables or report; "
        f"delete to tidy): {run_dir / 'old_sweep'}/"
    )
    planned = sum(len(sweep.cells) for sweep in run_plan.sweeps.values())
    assert lines[1].endswith(f"0 finished, 0 failed, {planned} not run yet")
