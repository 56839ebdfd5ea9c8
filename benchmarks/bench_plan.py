"""Benchmark: planning a 10^5-cell run (DAG build of ``snakemake -n``).

Metrics (targets from docs/scaling.md):

``plan_seconds_1e5_cells``
    Wall time of ``snakemake -n`` (dry run: config validation, planning, DAG of every
    block job) on a generated config of exactly 100,000 cells. Target <= 60 s.
``plan_peak_rss_mb_1e5_cells``
    Peak resident memory of that ``snakemake`` process (``resource.getrusage
    (RUSAGE_CHILDREN).ru_maxrss`` measured by a fresh wrapper process whose only child is
    snakemake, so no other child pollutes the maximum). Target < 2048 MB.
``plan_run_seconds_1e5_cells``
    :func:`attnrmt.sweep.spec.plan_run` alone on the same config, in-process (the library's
    share of the dry run).

Run with ``python -m benchmarks`` (all modules) or ``python -m benchmarks.bench_plan``.
"""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from attnrmt import workflow

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
N_CELLS = 100_000
RUNS = 3
PLAN_TARGET_SECONDS = 60.0
RSS_TARGET_MB = 2048.0

# Child process: run snakemake, then report its peak RSS (RUSAGE_CHILDREN of this wrapper,
# whose only child is snakemake) and wall time as JSON on the last line of stdout.
_WRAPPER = r"""
import json, resource, subprocess, sys, time
start = time.perf_counter()
proc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
seconds = time.perf_counter() - start
rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"seconds": seconds, "maxrss_kb": rss_kb, "returncode": proc.returncode,
                  "stderr_tail": proc.stderr[-3000:]}))
"""


def big_config(run: str = "bench-plan") -> dict[str, Any]:
    """A config of exactly ``N_CELLS`` cells: 20 lines x 1000 snr values x 5 replicates.

    Tiny ``d`` (the dry run never simulates); the default block size (``auto``: one
    block per line of these cheap cells), so the DAG has 20 block jobs of 5,000 cells.
    """
    config = {
        "run": run,
        "seed": 1,
        "positional_models": {"prefix4": {"kind": "prefix", "L": 4}},
        "weight_models": {"causal1": {"kind": "causal_limit", "tau": 1.0}},
        "sweeps": {
            "big": {
                "d": [40, 60],
                "delta": [0.5],
                "gamma": [0.5],
                "T": [8],
                "positional": ["iid", "prefix4"],
                "weights": ["mean", "last", "harmonic", "optimal", "causal1"],
                "snr": {"start": 0.0, "stop": 4.0, "num": 1000},
                "replicates": 5,
                "top_k": 3,
            }
        },
    }
    return config


def count_cells(config: dict[str, Any]) -> int:
    """Number of cells of ``config`` according to :func:`attnrmt.sweep.spec.plan_run`."""
    from attnrmt.sweep import load_config, plan_run

    plan = plan_run(load_config(config))
    return sum(len(sweep.cells) for sweep in plan.sweeps.values())


def time_plan_run(config: dict[str, Any]) -> float:
    """Seconds of ``load_config`` + ``plan_run`` in this process."""
    from attnrmt.sweep import load_config, plan_run

    start = time.perf_counter()
    plan_run(load_config(config))
    return time.perf_counter() - start


def dry_run(config_path: Path, workdir: Path) -> dict[str, Any]:
    """One ``snakemake -n`` of ``config_path`` in ``workdir``: seconds, peak RSS (kB)."""
    command = [
        str(SNAKEMAKE),
        "-n",
        "--quiet",
        "all",
        "--cores",
        "2",
        "--snakefile",
        str(workflow.SNAKEFILE),
        "--directory",
        str(workdir),
        "--configfile",
        str(config_path),
    ]
    out = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *command],
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if result["returncode"] != 0:
        raise RuntimeError(f"snakemake -n failed:\n{result['stderr_tail']}")
    return result


def machine() -> str:
    """One line describing this machine."""
    import os

    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, "
        f"{mem_gb:.0f} GiB, Python {platform.python_version()}"
    )


def main(runs: int = RUNS) -> dict[str, Any]:
    """Run the benchmark; return metrics (medians over ``runs`` dry runs)."""
    config = big_config()
    n_cells = count_cells(config)
    if n_cells != N_CELLS:
        raise AssertionError(f"generated config has {n_cells} cells, not {N_CELLS}")
    plan_seconds = statistics.median(time_plan_run(config) for _ in range(runs))
    with tempfile.TemporaryDirectory(prefix="attnrmt-bench-plan-") as tmp:
        workdir = Path(tmp)
        config_path = workdir / "config.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        results = [dry_run(config_path, workdir) for _ in range(runs)]
    seconds = statistics.median(r["seconds"] for r in results)
    rss_mb = max(r["maxrss_kb"] for r in results) / 1024
    return {
        "plan_seconds_1e5_cells": round(seconds, 2),
        "plan_seconds_1e5_cells_target": PLAN_TARGET_SECONDS,
        "plan_seconds_1e5_cells_ok": seconds <= PLAN_TARGET_SECONDS,
        "plan_peak_rss_mb_1e5_cells": round(rss_mb, 1),
        "plan_peak_rss_mb_1e5_cells_target": RSS_TARGET_MB,
        "plan_peak_rss_mb_1e5_cells_ok": rss_mb < RSS_TARGET_MB,
        "plan_run_seconds_1e5_cells": round(plan_seconds, 3),
        "plan_runs": runs,
        "plan_all_seconds": [round(r["seconds"], 2) for r in results],
        "plan_machine": machine(),
    }


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
