"""The end-of-run summary (``attnrmt summary``, ``make run``): where the results are, cells
computed / reused / failed, wall time, the theory's fit and the thresholds
(docs/thresholds.md), all from files the run wrote. O(fragments + table rows)."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from attnrmt.contract import TABLE_AXIS, VARIANTS
from attnrmt.sweep.store.layout import RunLayout, SweepLayout

#: Quantities whose relative error decides which theory variant the data support.
_VERDICT_QUANTITIES: tuple[str, ...] = ("population_outlier", "sample_outlier")
_VERDICT_QUANTITIES += ("population_overlap", "sample_overlap")


@dataclass(frozen=True)
class CellTally:
    """Cells of the planned blocks: computed by this run, reused, not finished, failed."""

    planned: int
    computed: int
    reused: int
    missing: int
    failed: int


def tally_cells(run_plan: Any, run_dir: Path, since: float | None) -> CellTally:
    """Count the planned cells from the one counter: a done cell is computed by this run when
    its fragment, written at or after ``since``, flags it computed, else reused. O(blocks)."""
    from attnrmt.sweep.report.status import count_sweep
    from attnrmt.sweep.store.fragments import FRAGMENTS_DIRNAME

    planned = computed = reused = missing = failed = 0
    for sweep in run_plan.sweeps.values():
        count = count_sweep(sweep, run_dir / sweep.name)
        fresh = sum(
            _computed_cells(file.path)
            for file in count.files
            if since is not None and file.planned and file.mtime >= since
            if file.path.parent.name == FRAGMENTS_DIRNAME
        )
        planned += count.cells
        computed += fresh
        reused += len(count.done) - fresh
        missing += count.cells - len(count.done)
        failed += len(count.failed)
    return CellTally(planned, computed, reused, missing, failed)


def _computed_cells(fragment: Path) -> int:
    """Cells a fragment flags computed (0 when it is absent or damaged)."""
    from attnrmt.sweep.report.status import read_cell_timings

    try:
        return int(read_cell_timings(fragment)[0].sum())
    except (OSError, ValueError):
        return 0


def placeholder_tables(run_dir: Path) -> list[str]:
    """The run's tables written without data (one ``note`` column), by file name."""
    from attnrmt.contract import TABLES

    found = []
    for name in TABLES:
        try:
            with open(run_dir / f"{name}.csv", encoding="utf-8") as handle:
                header = handle.readline().strip()
        except OSError:
            continue
        if header == "note":
            found.append(f"{name}.csv")
    return found


def _stale_sweep_dirs(run_plan: Any, run_dir: Path) -> list[Path]:
    """Sweep folders under ``run_dir`` the config no longer has (no longer in the tables)."""
    if not run_dir.is_dir():
        return []
    return sorted(
        path
        for path in run_dir.iterdir()
        if path.is_dir()
        and path.name not in run_plan.sweeps
        and (SweepLayout(path).fragments_dir.is_dir() or SweepLayout(path).cells.is_dir())
    )


def variant_verdict(summary: pd.DataFrame) -> str:
    """Which variant ``summary.csv`` supports: the smaller median relative error over
    :data:`_VERDICT_QUANTITIES` (:func:`variant_errors`)."""
    errors = variant_errors(summary)
    if not errors:
        return "theory: no outlier or overlap to compare (no snr above a threshold?)"
    best = min(errors, key=errors.__getitem__)
    others = "; ".join(f"{v} {_percent(e)}" for v, e in errors.items() if v != best)
    return (
        f"theory: {best} fits best (median relative error of outliers and overlaps "
        f"{_percent(errors[best])}" + (f"; {others})" if others else ")")
    )


def variant_errors(summary: pd.DataFrame) -> dict[str, float]:
    """Per variant, the median over :data:`_VERDICT_QUANTITIES` rows of the median relative
    error (variants without a finite one left out)."""
    rows = summary[summary["quantity"].isin(_VERDICT_QUANTITIES)]
    rows = rows[np.isfinite(rows["median_rel_error"])]
    errors = {v: float(rows[rows["variant"] == v]["median_rel_error"].median()) for v in VARIANTS}
    return {v: e for v, e in errors.items() if math.isfinite(e)}


#: A threshold family whose every curve has a signal out of reach (bound ``hidden``).
HIDDEN_NOTE = "(no estimate: a noise outlier of Sigma outranks the signal's eigenvalue)"


def threshold_lines(thresholds: pd.DataFrame) -> list[str]:
    """Per (sweep or ``sweep/law``, transition): how many finite-``d`` curves' CI or bound
    contains each variant's value (curves without an estimate, bound ``hidden``, left out),
    and the largest ``d``'s estimate. O(rows)."""
    if thresholds.empty or "finite_size" not in thresholds:
        return []
    finite = thresholds[thresholds["finite_size"] == "none"]
    law = finite[TABLE_AXIS].fillna("") if TABLE_AXIS in finite else pd.Series("", finite.index)
    name = finite["sweep"].astype(str).where(law == "", finite["sweep"].astype(str) + "/" + law)
    lines = []
    for (sweep, transition), every in finite.groupby([name, "transition"], sort=False):
        frame = every[every["bound"] != "hidden"]  # no estimate: out of the counts
        counts = "  ".join(
            f"{v} {int(frame[f'consistent_{v}'].astype(bool).sum())}/{len(frame)}" for v in VARIANTS
        )
        example = _example(frame) if len(frame) else HIDDEN_NOTE
        lines.append(f"  {sweep:<16} {transition:<10}  {counts}  {example}")
    return lines


def _example_row(frame: pd.DataFrame) -> pd.Series | None:
    """The threshold estimate (not a bound) at the largest ``d`` of one curve family."""
    estimated = frame[(frame["bound"] == "none") & np.isfinite(frame["estimate"])]
    if estimated.empty:
        return None
    return estimated.loc[estimated["d"].astype(float).idxmax()]


def _example(frame: pd.DataFrame) -> str:
    row = _example_row(frame)
    if row is None:
        return "(bounds only: no crossing inside the swept snr)"
    theory = ", ".join(f"{v} {float(row[f'theory_{v}']):.3g}" for v in VARIANTS)
    return (
        f"e.g. d={int(row['d'])}: {float(row['estimate']):.3g} "
        f"[{float(row['ci_low']):.3g}, {float(row['ci_high']):.3g}] ({theory})"
    )


def _percent(value: float) -> str:
    return f"{100 * value:.2g}%" if value < 0.1 else f"{100 * value:.0f}%"


def format_seconds(seconds: float) -> str:
    """``92`` -> ``1 min 32 s``."""
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


def _read_table(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def run_summary(
    run_plan: Any,
    results: str | os.PathLike[str] = "results",
    since: float | None = None,
    config_file: str | None = None,
) -> list[str]:
    """Lines of the end-of-run summary of a run's plan (:func:`attnrmt.sweep.spec.plan_run`)."""
    run_dir = Path(results) / run_plan.run
    report = RunLayout(run_dir).report
    source = f" ({config_file})" if config_file else ""
    lines = [
        f"run {run_plan.run!r}{source}: results in {run_dir}/, report "
        + (str(report) if report.exists() else "not built (make report)")
    ]
    tally = tally_cells(run_plan, run_dir, since)
    if since is None:
        counts = f"{tally.computed + tally.reused} finished, {tally.failed} failed"
    else:
        counts = (
            f"{tally.computed} computed by this run, {tally.reused} reused, {tally.failed} failed"
        )
    if tally.missing - tally.failed > 0:
        counts += f", {tally.missing - tally.failed} not run yet"
    lines.append(f"cells: {tally.planned} in {len(run_plan.sweeps)} sweeps; {counts}")
    stale = _stale_sweep_dirs(run_plan, run_dir)
    if stale:
        lines.append(
            "not in this config (left by an earlier version of it; not in the tables or "
            f"report; delete to tidy): {', '.join(f'{path}/' for path in stale)}"
        )
    if since is not None:
        lines.append(f"wall time: {format_seconds(time.time() - since)}")
    summary = _read_table(run_dir / "summary.csv")
    if not summary.empty and "quantity" in summary:  # a K-class-only run has a placeholder
        lines.append(variant_verdict(summary))
    thresholds = threshold_lines(_read_table(run_dir / "thresholds.csv"))
    if thresholds:
        lines.append("thresholds (curves whose CI or bound contains the variant's threshold):")
        lines.extend(thresholds)
    lines.extend(_classes_threshold_lines(_read_table(run_dir / "classes_thresholds.csv")))
    universality = universality_lines(_read_table(run_dir / "universality_verdict.csv"))
    if universality:
        lines.append("table laws against the Gaussian theory (universality_verdict.csv):")
        lines.extend(universality)
    if since is not None and tally.reused:
        lines.append(
            "reused: cells identical to ones already computed (same parameters and seed: by "
            "an earlier run, or by another sweep of this run), copied bit for bit"
        )
    placeholders = placeholder_tables(run_dir)
    if placeholders:
        lines.append(
            "no data in this run for (placeholder tables, left out of the report): "
            + ", ".join(placeholders)
        )
    if tally.failed:
        lines.append(f"failed cells: attnrmt plan {config_file or 'CONFIG'} lists them")
    return lines


def _classes_threshold_lines(thresholds: pd.DataFrame) -> list[str]:
    """K classes: per (sweep, spike, transition), how many curves' CI or bound contains each
    variant's threshold, with one example (``classes_thresholds.csv``). O(rows)."""
    if thresholds.empty or "spike" not in thresholds:
        return []
    lines = ["K-class thresholds (curves whose CI or bound contains the variant's threshold):"]
    for (sweep, spike, transition), rows in thresholds.groupby(
        ["sweep", "spike", "transition"], sort=False
    ):
        counts = "  ".join(
            f"{variant} {int(rows[f'contains_{variant}'].sum())}/{len(rows)}"
            for variant in VARIANTS
        )
        first = rows.iloc[0]
        example = (
            f"{first['estimate']:.3g} [{first['ci_low']:.3g}, {first['ci_high']:.3g}]"
            if first["bound"] == "none"
            else f"{first['bound']} [{first['ci_low']:.3g}, {first['ci_high']:.3g}]"
        )
        lines.append(
            f"  {sweep:<16} spike {spike} {transition:<10}  {counts}  e.g. {example} "
            f"(paper {first['paper']:.3g}, finite_vocab {first['finite_vocab']:.3g})"
        )
    return lines


def universality_lines(verdicts: pd.DataFrame) -> list[str]:
    """One line per table law of ``universality_verdict.csv``, then one per family sentence."""
    if verdicts.empty or "verdict" not in verdicts:
        return []
    width = max(len(str(law)) for law in verdicts["law"])
    lines = [
        f"  {row.law!s:<{width}}  {row.verdict}"
        + (f" ({row.at_largest_d})" if "at_largest_d" in verdicts else "")
        for row in verdicts.itertuples()
    ]
    families = verdicts["family"].dropna() if "family" in verdicts else pd.Series([], dtype=str)
    lines += [f"  {family}" for family in dict.fromkeys(families) if str(family).strip()]
    return lines


#: Environment variable through which the workflow's rules/report.smk tells the report's landing
#: page (profiles/default/report-metadata.yaml, a yte template) which run it describes.
RUN_DIR_VARIABLE = "ATTNRMT_RUN_DIR"


def report_overview(run_dir: str | os.PathLike[str] | None = None) -> dict[str, int | float]:
    """The report's landing-page entries (numbers under headings): the verdict per variant, the
    threshold at the largest ``d`` per sweep and transition, the bounds-only families.
    ``run_dir`` defaults to :data:`RUN_DIR_VARIABLE`. O(rows)."""
    run_dir = Path(run_dir or os.environ.get(RUN_DIR_VARIABLE, "results"))
    overview: dict[str, int | float] = {}
    summary = _read_table(run_dir / "summary.csv")
    if not summary.empty and "quantity" in summary:
        errors = variant_errors(summary)
        best = min(errors, key=errors.__getitem__) if errors else None
        for variant, error in errors.items():
            verdict = " (fits best)" if variant == best else ""
            overview[f"{variant}{verdict}: median relative error of outliers and overlaps"] = round(
                error, 4
            )
    thresholds = _read_table(run_dir / "thresholds.csv")
    if not thresholds.empty and "finite_size" in thresholds:
        overview.update(_threshold_overview(thresholds[thresholds["finite_size"] == "none"]))
    return overview


def _threshold_overview(finite: pd.DataFrame) -> dict[str, int | float]:
    """Per (sweep, transition) the estimate at the largest ``d`` having one (the heading names
    larger ``d`` with bounds only), then the families with bounds only. O(rows)."""
    entries: dict[str, int | float] = {}
    bounds_only = []
    for (sweep, transition), frame in finite.groupby(["sweep", "transition"], sort=False):
        example = _example_row(frame)
        if example is None:
            bounds_only.append(f"{sweep} {transition}")
            continue
        theory = ", ".join(f"{v} {float(example[f'theory_{v}']):.3g}" for v in VARIANTS)
        heading = (
            f"{sweep}: {transition} threshold (snr) at d={int(example['d'])}, CI "
            f"[{float(example['ci_low']):.3g}, {float(example['ci_high']):.3g}]; "
            f"theory {theory}"
        )
        larger = sorted({int(d) for d in frame["d"].astype(float) if d > float(example["d"])})
        if larger:
            heading += (
                f"; at d={', '.join(map(str, larger))} bounds only (no crossing inside the "
                "swept snr)"
            )
        entries[heading] = round(float(example["estimate"]), 3)
    if bounds_only:
        entries[
            "thresholds that are bounds only, no estimate to show (no crossing inside the "
            f"swept snr; thresholds.csv has the bounds): {', '.join(bounds_only)}; families"
        ] = len(bounds_only)
    return entries
