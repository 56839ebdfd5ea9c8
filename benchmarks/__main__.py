"""Run benchmark modules and merge their results.

Usage: ``python -m benchmarks [bench_cell ...]`` (default: every ``bench_*.py`` here).

Each module's ``main()`` returns a dict; it is stored under the module name in
``benchmarks/results.json`` (other modules' entries are kept, so running one module
updates only its own entry), with the time, host and library versions of the run, and
all entries are rendered to ``benchmarks/results.md``: first one table of every target in
:data:`TARGETS` (the measured value, met or not, the date), then every entry in full.
``python -m benchmarks --render`` re-renders ``results.md`` from ``results.json`` without
running anything.
"""

from __future__ import annotations

import datetime
import fnmatch
import importlib
import json
import os
import platform
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy

HERE = Path(__file__).resolve().parent
RESULTS_JSON = HERE / "results.json"
RESULTS_MD = HERE / "results.md"


@dataclass(frozen=True)
class Target:
    """One benchmark target: where the measured value is stored and the bound it must meet.

    ``path`` walks the entry's ``result`` dict; each part is a key or an ``fnmatch``
    pattern (``"d=*"``, ``"open_seconds_*"``): when it matches several values the worst
    counts (the largest for an upper bound, the smallest for a lower one) and is named.
    ``ok_key`` is the flag the benchmark stores for this target (``None``: it stores none),
    ``constant`` the benchmark module's constant that holds the bound (``module.NAME``),
    ``date_note`` a note in the result whose first date is when the value was measured,
    when that is not the entry's timestamp.
    """

    benchmark: str
    path: tuple[str, ...]
    sense: str  # "<=", "<" or ">="
    bound: float
    what: str
    unit: str = ""
    ok_key: str | None = None
    constant: str | None = None
    date_note: str | None = None


#: Every target the benchmarks measure against (their module docstrings and
#: docs/scaling.md state them). bench_failures and bench_provenance measure costs that have
#: no target.
TARGETS: tuple[Target, ...] = (
    Target(
        "bench_cell",
        ("cell_vs_floor", "d=*", "median_ratio"),
        "<=",
        1.5,
        "full cell / its dense floor (median of paired ratios), default BLAS threads, every d",
    ),
    Target(
        "bench_cell",
        ("cell_vs_floor_single_thread_15_pairs", "d=*", "median_ratio"),
        "<=",
        1.5,
        "the same with one BLAS thread, 15 pairs",
        date_note="note_single_thread_15_pairs",
    ),
    Target(
        "bench_cell_top_and_kernels",
        ("cell_top_vs_full", "d=8000", "speedup"),
        ">=",
        5.0,
        "top-k cell speedup over the full cell at d = 8000, one BLAS thread",
    ),
    Target(
        "bench_cell_top_and_kernels",
        ("cell_top_cpu_seconds_d1e4",),
        "<=",
        30.0,
        "one top-k cell at d = 10^4, one BLAS thread",
        unit="CPU s",
    ),
    Target(
        "bench_cell_top_and_kernels",
        ("cell_top_peak_rss_mb_d1e4",),
        "<=",
        4000.0,
        "its peak memory",
        unit="MB",
    ),
    Target(
        "bench_pipeline",
        ("pipeline_vs_loop",),
        "<=",
        1.2,
        "pipeline / process-pool loop on the default config (median of paired ratios)",
        ok_key="pipeline_vs_loop_ok",
        constant="bench_pipeline.RATIO_TARGET",
    ),
    Target(
        "bench_plan",
        ("plan_seconds_1e5_cells",),
        "<=",
        60.0,
        "`snakemake -n` of a 10^5-cell config",
        unit="s",
        ok_key="plan_seconds_1e5_cells_ok",
        constant="bench_plan.PLAN_TARGET_SECONDS",
    ),
    Target(
        "bench_plan",
        ("plan_peak_rss_mb_1e5_cells",),
        "<",
        2048.0,
        "its peak memory",
        unit="MB",
        ok_key="plan_peak_rss_mb_1e5_cells_ok",
        constant="bench_plan.RSS_TARGET_MB",
    ),
    Target(
        "bench_scale",
        ("scale_vs_loop_1e6_tiny_cells",),
        "<=",
        1.5,
        "pipeline / loop, 10^6 tiny cells to the analysis",
        ok_key="scale_vs_loop_ok",
        constant="bench_scale.RATIO_TARGET",
    ),
    Target(
        "bench_scale",
        ("scale_peak_rss_mb",),
        "<=",
        2048.0,
        "its largest process",
        unit="MB",
        ok_key="scale_peak_rss_ok",
        constant="bench_scale.RSS_TARGET_MB",
    ),
    Target(
        "bench_status",
        ("status_seconds_1e5_cells",),
        "<=",
        5.0,
        "`run_status` of a 10^5-cell run",
        unit="s",
        ok_key="status_seconds_1e5_cells_ok",
        constant="bench_status.STATUS_TARGET_SECONDS",
    ),
    Target(
        "bench_status",
        ("status_cli_seconds_1e5_cells",),
        "<=",
        5.0,
        "the whole `attnrmt status` command there",
        unit="s",
        ok_key="status_cli_seconds_1e5_cells_ok",
        constant="bench_status.STATUS_TARGET_SECONDS",
    ),
    Target(
        "bench_store",
        ("gather_peak_rss_mb_max",),
        "<=",
        1024.0,
        "gather peak memory, worst size (10^6 cells of d = 1000, 10^6 and 3*10^6 of d = 16)",
        unit="MB",
        ok_key="gather_peak_rss_ok",
        constant="bench_store.RSS_TARGET_MB",
    ),
    Target(
        "bench_store",
        ("store_update_fraction_1pct",),
        "<=",
        0.05,
        "+1% cells: bytes written / full write, worst size",
        ok_key="store_update_fraction_ok",
        constant="bench_store.UPDATE_TARGET",
    ),
    Target(
        "bench_store",
        ("store_update_seconds_ratio_1pct",),
        "<=",
        0.05,
        "+1% cells: seconds / full gather, 10^6 cells of d = 1000",
        ok_key="store_update_seconds_ok",
        constant="bench_store.UPDATE_TARGET",
    ),
    Target(
        "bench_store",
        ("store_update_seconds_ratio_1pct_max",),
        "<=",
        0.05,
        "the same, worst size",
        ok_key="store_update_seconds_max_ok",
        constant="bench_store.UPDATE_TARGET",
    ),
    Target(
        "bench_store",
        ("open_seconds_*",),
        "<=",
        5.0,
        "`open_cells` of a gathered store, worst size",
        unit="s",
    ),
    Target(
        "bench_store",
        ("plan_seconds_1e6_cells",),
        "<=",
        60.0,
        "`snakemake -n` of a 10^6-cell config",
        unit="s",
        ok_key="plan_seconds_1e6_cells_ok",
        constant="bench_store.PLAN_TARGET_SECONDS",
    ),
    Target(
        "bench_store",
        ("plan_peak_rss_mb_1e6_cells",),
        "<=",
        2048.0,
        "its peak memory",
        unit="MB",
        ok_key="plan_peak_rss_mb_1e6_cells_ok",
        constant="bench_store.PLAN_RSS_TARGET_MB",
    ),
    Target(
        "bench_theory",
        ("theory_predictions_per_second",),
        ">=",
        1e5,
        "spike predictions per second (10^5 points)",
    ),
    Target(
        "bench_chaos",
        ("chaos_slowest_stop_seconds",),
        "<=",
        5.0,
        "slowest stop of a run on SIGTERM/SIGINT (every process gone), over the chaos trials",
        unit="s",
        ok_key="chaos_stops_ok",
        constant="bench_chaos.STOP_TARGET_SECONDS",
    ),
    Target(
        "bench_chaos",
        ("chaos_extra_cells",),
        "<=",
        0.0,
        "cells a rerun computed beyond those unfinished on disk after the fault, all trials",
    ),
    Target(
        "bench_chaos",
        ("chaos_faults_survived",),
        ">=",
        30.0,
        "faults survived (rerun exits 0, every variable identical, no temporary) of 30 tried",
        constant="bench_chaos.FAULTS",
    ),
    Target(
        "bench_integrity",
        ("integrity_verify_over_gather",),
        "<=",
        0.10,
        "fragment verification (CRCs, members, shapes) / a first gather of 20,000 cells, d = 1000",
        ok_key="integrity_verify_ok",
        constant="bench_integrity.VERIFY_SHARE_TARGET",
    ),
    Target(
        "bench_coverage",
        ("delta*", "misses", "d=*"),
        "<=",
        3.0,
        "misses of finite_vocab by a 95% threshold CI (per d and d -> inf) in 20 real studies",
        constant="bench_coverage.MAX_MISSES_OF_20",
    ),
    Target(
        "bench_slope",
        ("worst_slope_error", "shipped"),
        "<=",
        0.02,
        "abs(mean free sample slope / (alpha/kappa) - 1), worst d, default iid design, real cells",
        ok_key="slope_ok",
        constant="bench_slope.SLOPE_TOLERANCE",
    ),
    Target(
        "bench_adaptive",
        ("adaptive_cpu_vs_uniform",),
        "<=",
        0.33,
        "CPU seconds of the cells of rounds planned by the target / those of the shipped "
        "uniform grid, same half-width (issue 36: cells or CPU seconds; the cells ratio is "
        "adaptive_cells_vs_uniform in the entry)",
        constant="bench_adaptive.TARGET_RATIO_UNIFORM",
    ),
    Target(
        "bench_adaptive",
        ("adaptive_cells_vs_python_adaptive",),
        "<",
        1.0,
        "cells of rounds planned by the target / python-adaptive's AverageLearner1D",
    ),
    Target(
        "bench_chaos",
        ("chaos_after_silent",),
        "<=",
        0.0,
        "faults after a complete run whose rerun exited 0 with wrong results (issue 34)",
    ),
    Target(
        "bench_verify",
        ("verify_quick_over_read",),
        "<=",
        0.10,
        "store quick check (sizes, metadata checksums) / an open_results read of 10,000 cells",
        ok_key="verify_quick_ok",
        constant="bench_verify.QUICK_SHARE_TARGET",
    ),
    Target(
        "bench_free",
        ("density_point_seconds",),
        "<=",
        0.05,
        "seconds of one density point of a general bulk (MP ⊠ MP ⊠ 1000 atoms)",
        ok_key="density_point_ok",
        constant="bench_free.POINT_SECONDS_TARGET",
    ),
    Target(
        "bench_freealg",
        ("monte_carlo_sides_freealg",),
        "<=",
        0,
        "bulk density points where freealg differs by > 10% and a sampled spectrum sides "
        "with it (4 laws)",
        ok_key="monte_carlo_sides_freealg_ok",
        constant="bench_freealg.FREEALG_RIGHT_TARGET",
    ),
    Target(
        "bench_anisotropic",
        ("bulk_seconds", "d=2000"),
        "<=",
        3.0,
        "seconds of one anisotropic bulk (power spectrum, d = 2000, three scans)",
        ok_key="bulk_ok",
        constant="bench_anisotropic.BULK_SECONDS_TARGET",
    ),
    Target(
        "bench_theory_grid",
        ("closed_form_part_over_previous",),
        "<=",
        1.05,
        "default run's theory grid, sweeps without a finite-T setting: seconds with the "
        "finite-T route / without it (the closed forms alone), median of paired ratios",
        ok_key="closed_form_part_over_previous_ok",
        constant="bench_theory_grid.CLOSED_FORM_RATIO_TARGET",
    ),
    Target(
        "bench_theory_grid",
        ("token_rules_seconds", "*"),
        "<=",
        2.0,
        "finite-T Gauss rules (token_rules) of one setting, cold cache, every setting of "
        "config.yaml and configs/finite-T.yaml",
        unit="s",
        ok_key="token_rules_ok",
        constant="bench_theory_grid.RULES_SECONDS_TARGET",
    ),
    Target(
        "bench_theory_grid",
        ("realised_rules_seconds", "*"),
        "<=",
        8.0,
        "finite-T tail regime's draws at the realised sizes (realised_rules) of one setting, "
        "cold cache, every tail setting of config.yaml and configs/finite-T.yaml",
        unit="s",
        ok_key="realised_rules_ok",
        constant="bench_theory_grid.REALISED_SECONDS_TARGET",
    ),
)


@dataclass(frozen=True)
class Measured:
    """A target's measured value (``None`` when not measured; the worst of several), where
    it came from, the date of the measurement, whether it meets the bound, and of how many
    values it is the worst (``n_met`` of them meet the bound)."""

    value: float | None
    where: str
    date: str
    met: bool | None
    n_values: int = 0
    n_met: int = 0


def _values(node: Any, path: tuple[str, ...], where: str = "") -> list[tuple[str, float]]:
    """Every numeric value at ``path`` under ``node`` (patterns expanded), with the keys of
    the levels that matched several."""
    if not path:
        is_number = isinstance(node, int | float) and not isinstance(node, bool)
        return [(where, float(node))] if is_number else []
    if not isinstance(node, dict):
        return []
    head, rest = path[0], path[1:]
    keys = [key for key in node if fnmatch.fnmatchcase(key, head)]
    found = []
    for key in keys:
        label = where if key == head else f"{where}{', ' if where else ''}{key}"
        found += _values(node[key], rest, label)
    return found


def meets(value: float, sense: str, bound: float) -> bool:
    """Whether ``value`` meets ``sense bound`` (``<=``, ``<`` or ``>=``)."""
    if sense == "<=":
        return value <= bound
    if sense == "<":
        return value < bound
    if sense == ">=":
        return value >= bound
    raise ValueError(f"sense={sense!r}: must be '<=', '<' or '>='")


def measure(target: Target, stored: dict[str, Any]) -> Measured:
    """The stored value of ``target`` (the worst of its matches) and whether it is met.
    O(values under the target's path)."""
    entry = stored.get(target.benchmark)
    if not isinstance(entry, dict):
        return Measured(None, "", "", None)
    result = entry.get("result", {})
    date = str(entry.get("environment", {}).get("timestamp", ""))[:10]
    if target.date_note is not None:
        noted = re.search(r"\d{4}-\d{2}-\d{2}", str(result.get(target.date_note, "")))
        date = noted.group(0) if noted else date
    found = _values(result, target.path)
    if not found:
        return Measured(None, "", date, None)
    pick = min if target.sense == ">=" else max
    where, value = pick(found, key=lambda item: item[1])
    n_met = sum(meets(other, target.sense, target.bound) for _, other in found)
    return Measured(
        value,
        where if len(found) > 1 else "",
        date,
        meets(value, target.sense, target.bound),
        len(found),
        n_met,
    )


_SENSE_SIGN = {"<=": "≤", "<": "<", ">=": "≥"}


def _number(value: float) -> str:
    """A number as the tables show it: thousands separated, at most 4 significant digits
    below 1000."""
    if abs(value) >= 1e6:
        return f"{value:.3g}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def targets_table(stored: dict[str, Any], targets: tuple[Target, ...] = TARGETS) -> list[str]:
    """The Markdown table of every target: benchmark, what, target, measured, met, date."""
    lines = ["| benchmark | what | target | measured | met | date |", "|---|---|---|---|---|---|"]
    for target in targets:
        measured = measure(target, stored)
        unit = f" {target.unit}" if target.unit else ""
        bound = f"{_SENSE_SIGN[target.sense]} {_number(target.bound)}{unit}"
        if measured.value is None:
            value, met = "not measured", "-"
        else:
            value = _number(measured.value) + unit
            value += f" ({measured.where})" if measured.where else ""
            met = "yes" if measured.met else "**no**"
            if measured.n_values > 1:
                met += f" ({measured.n_met} of {measured.n_values} met)"
        lines.append(
            f"| {target.benchmark} | {target.what} | {bound} | {value} | {met} "
            f"| {measured.date or '-'} |"
        )
    return lines


def discover() -> list[str]:
    """Names of the ``bench_*.py`` modules in this package, sorted."""
    return sorted(path.stem for path in HERE.glob("bench_*.py"))


def environment() -> dict[str, Any]:
    """Where and with what a benchmark ran."""
    try:
        load = os.getloadavg()[0]
    except OSError:  # pragma: no cover
        load = float("nan")
    return {
        "timestamp": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "load_average_1min": round(load, 2),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
    }


def run(names: list[str]) -> dict[str, Any]:
    """Import and run each module's ``main()``; return ``{name: {"result", "environment"}}``."""
    entries = {}
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        print(f"== {name}", flush=True)
        before = environment()
        result = module.main()
        entries[name] = {"environment": before, "result": result}
    return entries


def merge(entries: dict[str, Any], path: Path = RESULTS_JSON) -> dict[str, Any]:
    """Update the stored results with ``entries`` (other modules' results are kept)."""
    stored = json.loads(path.read_text()) if path.exists() else {}
    stored.update(entries)
    path.write_text(json.dumps(stored, indent=2, sort_keys=True) + "\n")
    return stored


def _is_table(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and bool(value)
        and all(isinstance(row, dict) for row in value.values())
        and all(
            not isinstance(cell, dict | list) for row in value.values() for cell in row.values()
        )
    )


def _render(name: str, value: Any, level: int) -> list[str]:
    heading = "#" * min(level, 6)
    if _is_table(value):
        columns = list(dict.fromkeys(column for row in value.values() for column in row))
        lines = [f"{heading} {name}", "", "| | " + " | ".join(columns) + " |"]
        lines.append("|---" * (len(columns) + 1) + "|")
        for row_name, row in value.items():
            cells = [str(row.get(column, "")) for column in columns]
            lines.append(f"| {row_name} | " + " | ".join(cells) + " |")
        return [*lines, ""]
    if isinstance(value, dict):
        scalars = {key: item for key, item in value.items() if not isinstance(item, dict)}
        nested = {key: item for key, item in value.items() if isinstance(item, dict)}
        lines = [f"{heading} {name}", ""]
        lines += [f"- {key}: `{json.dumps(item)}`" for key, item in scalars.items()]
        if scalars:
            lines.append("")
        for key, item in nested.items():
            lines += _render(key, item, level + 1)
        return lines
    return [f"{heading} {name}", "", f"`{json.dumps(value)}`", ""]


def render(stored: dict[str, Any], path: Path = RESULTS_MD) -> None:
    """Write the targets table, then every stored entry as Markdown (tables for dicts of
    flat dicts), from the entries as ``results.json`` holds them (keys sorted)."""
    stored = json.loads(json.dumps(stored, sort_keys=True))
    lines = [
        "# Benchmark results",
        "",
        "Generated by `python -m benchmarks` from `benchmarks/results.json` "
        "(`python -m benchmarks --render` re-renders it without running anything).",
        "",
        "## Targets",
        "",
        "Every target a benchmark measures against, the value measured (the worst where "
        "a target covers several sizes or `d`), whether it is met, and the date of the "
        "measurement; the detail of each benchmark follows. Times are wall seconds "
        "unless marked CPU; memory is peak resident MB.",
        "",
        *targets_table(stored),
        "",
    ]
    for name in sorted(stored):
        lines += _render(name, stored[name], 2)
    path.write_text("\n".join(lines).rstrip() + "\n")


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the named (default: all) benchmarks, merge, render."""
    names = list(sys.argv[1:] if argv is None else argv) or discover()
    if names == ["--render"]:
        render(json.loads(RESULTS_JSON.read_text()))
        print(f"rendered {RESULTS_MD} from {RESULTS_JSON}")
        return 0
    # benchmarks time computing cells: the shared cell cache (attnrmt.sweep.store.cell_cache)
    # is off for them and the runs they start, unless the environment sets it
    os.environ.setdefault("ATTNRMT_CELL_CACHE", "off")
    unknown = sorted(set(names) - set(discover()))
    if unknown:
        print(f"unknown benchmark(s) {unknown}; available: {discover()}", file=sys.stderr)
        return 2
    render(merge(run(names)))
    print(f"results: {RESULTS_JSON}, {RESULTS_MD}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
