"""attnrmt.sweep.report.summary: the verdict, threshold lines and landing-page numbers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from attnrmt.sweep.report.summary import (
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

    from attnrmt.sweep import load_config, plan_run
    from attnrmt.sweep.report.summary import run_summary

    small = Path(__file__).resolve().parents[2] / "configs" / "small.yaml"
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


def test_summary_names_placeholder_tables_and_explains_reused_cells(tmp_path) -> None:
    """Tables written without data (one `note` column) are named; with --since, reused
    cells are explained (here: the fragment predates the run's start, so its cells count
    as reused, as cells copied from another sweep do)."""
    from pathlib import Path

    from attnrmt.analysis.pipeline import placeholder_note
    from attnrmt.sweep import load_config, plan_run
    from attnrmt.sweep.report.summary import placeholder_tables, run_summary
    from tests.sweep.report.conftest import write_timed_block

    tiny = Path(__file__).resolve().parents[2] / "configs" / "tiny.yaml"
    run_plan = plan_run(load_config(tiny))
    run_dir = tmp_path / run_plan.run
    run_dir.mkdir()
    pd.DataFrame({"note": [placeholder_note("causal")]}).to_csv(run_dir / "causal.csv", index=False)
    pd.DataFrame({"sweep": ["tiny"], "x": [1.0]}).to_csv(run_dir / "bulk.csv", index=False)
    assert placeholder_tables(run_dir) == ["causal.csv"]
    sweep = run_plan.sweeps["tiny"]
    write_timed_block(run_plan, run_dir / "tiny", sweep.blocks[0], np.full(2, 0.1), 1.0e9)
    lines = run_summary(run_plan, tmp_path, since=2.0e9)
    assert lines[1] == (
        "cells: 8 in 1 sweeps; 0 computed by this run, 2 reused, 0 failed, 6 not run yet"
    )
    assert lines[-2].startswith("reused: cells identical to ones already computed")
    assert lines[-1] == (
        "no data in this run for (placeholder tables, left out of the report): causal.csv"
    )
    assert not any(line.startswith("reused:") for line in run_summary(run_plan, tmp_path))


def test_report_overview_names_the_d_of_each_threshold_and_the_families_of_bounds(
    tmp_path,
) -> None:
    """The estimate shown may sit below the largest d (there the curves are bounds): the
    heading says so; a family whose thresholds are all bounds gets no estimate but is
    named in one entry, so that the overview never drops a family silently."""
    table = thresholds_table()
    below = table[table["finite_size"] == "none"].assign(transition="population")
    below.loc[below["d"] == 800, ["estimate", "bound"]] = [np.nan, "below"]
    only = below.assign(sweep="t", estimate=np.nan, bound="below")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    pd.concat([table, below, only]).to_csv(run_dir / "thresholds.csv", index=False)
    overview = report_overview(run_dir)
    assert overview == {
        "s: sample threshold (snr) at d=800, CI [1.12, 1.34]; theory paper 1.78, "
        "finite_vocab 1.28": 1.24,
        "s: population threshold (snr) at d=400, CI [1, 1.3]; theory paper 1.78, "
        "finite_vocab 1.28; at d=800 bounds only (no crossing inside the swept snr)": 1.1,
        "thresholds that are bounds only, no estimate to show (no crossing inside the swept "
        "snr; thresholds.csv has the bounds): t population; families": 1,
    }
