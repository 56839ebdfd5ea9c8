"""Benchmark: the pipeline's overhead over a plain process pool, and how cost scales.

``pipeline_vs_loop``
    The default-sized run: every sweep of config.yaml (2578 cells, d = 100 ... 800, every
    positional model, real causal attention, the downstream readout) computed (a) by the
    pipeline: ``snakemake --cores C`` to every sweep's ``cells.zarr`` in a fresh
    directory (Snakemake start-up, planning, DAG, the run's Dask cluster, one job per
    block, fragments, gather into Zarr), and (b) by a plain
    ``concurrent.futures.ProcessPoolExecutor(C)`` calling ``simulate_cell`` on the same
    cells (results returned to the parent, nothing written), with the same cores and one
    BLAS thread per process in both. Runs alternate (pipeline, loop, pipeline, ...) so load
    drift hits both alike; the metric is the median of the paired ratios. Target <= 1.2.
``cell_seconds_*`` and ``exponent_*``
    Single-core cost of one cell as d, N (through gamma = d/N), T grow, and the measured
    log-log slopes (docs/scaling.md). ``pipeline_seconds_per_block`` is the fixed cost of
    a block job, from pipeline runs of 64 tiny cells as 1 block and as 32 blocks.

Run with ``python -m benchmarks`` (all modules) or ``python -m benchmarks.bench_pipeline``.
"""

from __future__ import annotations

import copy
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from attnrmt import workflow

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
#: The sweeps of the default config (config.yaml) timed by ``pipeline_vs_loop``; ``None``
#: means all of them (the default-sized run: 2578 cells, ~80 s of compute on 2 cores).
SWEEPS: tuple[str, ...] | None = None
#: Alternating pipeline/loop pairs (``ATTNRMT_BENCH_PIPELINE_RUNS`` to change).
RUNS = int(os.environ.get("ATTNRMT_BENCH_PIPELINE_RUNS", "5"))
RATIO_TARGET = 1.2
BLAS_VARIABLES = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def cores() -> int:
    """Cores this process may use."""
    return len(os.sched_getaffinity(0))


def machine() -> str:
    """One line describing this machine."""
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, "
        f"{mem_gb:.0f} GiB, Python {platform.python_version()}"
    )


def sweep_config(
    sweeps: tuple[str, ...] | None = SWEEPS, run: str = "bench-pipeline"
) -> dict[str, Any]:
    """The default config (config.yaml), optionally reduced to some sweeps, own run name."""
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    config["run"] = run
    if sweeps is not None:
        config["sweeps"] = {name: config["sweeps"][name] for name in sweeps}
    return config


# --------------------------------------------------------------------------- the two ways


def snakemake_command(
    config: dict[str, Any], workdir: Path, store: str, n_cores: int
) -> tuple[list[str], dict[str, str]]:
    """Write ``config`` into ``workdir``; the ``snakemake`` command (default profile) that
    builds every sweep's ``store`` (``cells.zarr``, ``analysis.zarr``) there, and its
    environment (this interpreter's bin first on PATH)."""
    (workdir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    targets = [f"results/{config['run']}/{sweep}/{store}" for sweep in config["sweeps"]]
    command = [
        str(SNAKEMAKE),
        *targets,
        "--snakefile",
        str(workflow.SNAKEFILE),
        "--directory",
        str(workdir),
        "--workflow-profile",
        str(workflow.PROFILES_DIR / "default"),
        "--cores",
        str(n_cores),
        "--configfile",
        str(workdir / "config.yaml"),
        "--quiet",
        "all",
    ]
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return command, env


def run_pipeline(config: dict[str, Any], n_cores: int) -> float:
    """Wall time of ``snakemake`` producing every sweep's ``cells.zarr`` in a fresh dir."""
    workdir = Path(tempfile.mkdtemp(prefix="attnrmt-bench-pipeline-"))
    try:
        command, env = snakemake_command(config, workdir, "cells.zarr", n_cores)
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env=env)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"pipeline failed:\n{(done.stdout + done.stderr)[-3000:]}")
        return seconds
    finally:  # the run's Dask cluster lived and ended in the Snakemake process
        shutil.rmtree(workdir, ignore_errors=True)


def _one_cell(job: tuple[dict[str, Any], list[int]]) -> dict[str, Any]:
    from attnrmt.model import simulate_cell

    kwargs, seed = job
    return simulate_cell(**kwargs, seed=seed).to_dict()


def cell_jobs(config: dict[str, Any]) -> list[tuple[dict[str, Any], list[int]]]:
    """``(simulate kwargs, seed words)`` of every cell of the config, in plan order."""
    from attnrmt.sweep import load_config, plan_run

    plan = plan_run(load_config(config))
    return [
        (cell.simulate_kwargs(), list(cell.seed_words(plan.seed)))
        for sweep in plan.sweeps.values()
        for cell in sweep.cells
    ]


def run_loop(jobs: list[tuple[dict[str, Any], list[int]]], n_cores: int) -> float:
    """Wall time of a ProcessPoolExecutor (fresh, ``n_cores`` processes) over the cells."""
    saved = {name: os.environ.get(name) for name in BLAS_VARIABLES}
    os.environ.update({name: "1" for name in BLAS_VARIABLES})  # children inherit it
    try:
        import multiprocessing

        start = time.perf_counter()
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=n_cores, mp_context=context) as pool:
            results = list(pool.map(_one_cell, jobs, chunksize=4))
        seconds = time.perf_counter() - start
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    assert len(results) == len(jobs)
    return seconds


def pipeline_vs_loop(runs: int = RUNS) -> dict[str, Any]:
    """Paired pipeline / loop timings on the representative sweep."""
    config = sweep_config()
    jobs = cell_jobs(config)
    n_cores = cores()
    pipeline, loop = [], []
    for _ in range(runs):
        pipeline.append(run_pipeline(config, n_cores))
        loop.append(run_loop(jobs, n_cores))
    ratios = [p / q for p, q in zip(pipeline, loop, strict=True)]
    ratio = statistics.median(ratios)
    return {
        "pipeline_vs_loop": round(ratio, 3),
        "pipeline_vs_loop_target": RATIO_TARGET,
        "pipeline_vs_loop_ok": ratio <= RATIO_TARGET,
        "pipeline_vs_loop_sweeps": f"config.yaml sweeps {', '.join(config['sweeps'])}: "
        f"{len(jobs)} cells",
        "pipeline_vs_loop_cores": n_cores,
        "pipeline_seconds_median": round(statistics.median(pipeline), 2),
        "loop_seconds_median": round(statistics.median(loop), 2),
        "pipeline_seconds_all": [round(s, 2) for s in pipeline],
        "loop_seconds_all": [round(s, 2) for s in loop],
    }


# --------------------------------------------------------------------------- scaling

BASE_CELL: dict[str, Any] = {
    "d": 400,
    "delta": 0.5,
    "gamma": 0.5,
    "T": 8,
    "positional": {"kind": "prefix", "L": 4},
    "weights": "mean",
    "snr": 1.0,
}


def cell_time(repeats: int = 3, **changes: Any) -> float:
    """Fastest of ``repeats`` wall times of ``simulate_cell`` in this process.

    The minimum, not the median: on a shared machine other processes only ever add time,
    so the fastest run is the best estimate of the cell's own cost.
    """
    from attnrmt.model import simulate_cell

    kwargs = {**BASE_CELL, **changes}
    simulate_cell(**kwargs, seed=99)  # warm-up
    times = []
    for seed in range(repeats):
        start = time.perf_counter()
        simulate_cell(**kwargs, seed=seed)
        times.append(time.perf_counter() - start)
    return min(times)


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) on log(x)."""
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def _scaling_in_child() -> dict[str, Any]:
    """Cell-cost scaling, measured in a child process with one BLAS thread."""
    code = "import json, benchmarks.bench_pipeline as b; print(json.dumps(b.cell_scaling()))"
    env = dict(os.environ)
    env.update({name: "1" for name in BLAS_VARIABLES})
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def cell_scaling() -> dict[str, Any]:
    """Cell cost vs d (N, V proportional), vs N alone (gamma), vs T; log-log slopes."""
    out: dict[str, Any] = {}
    ds = [200, 400, 800, 1600]
    t_d = [cell_time(d=d, repeats=3 if d < 1600 else 2) for d in ds]
    out["cell_seconds_vs_d"] = dict(zip(map(str, ds), map(_r, t_d), strict=True))
    out["exponent_d"] = round(slope(ds[1:], t_d[1:]), 2)
    gammas = [0.25, 0.125, 0.0625, 0.03125]  # N = d / gamma = 1600 ... 12800 at d = 400
    ns = [round(400 / g) for g in gammas]
    t_n = [cell_time(gamma=g) for g in gammas]
    out["cell_seconds_vs_N_at_d400"] = dict(zip(map(str, ns), map(_r, t_n), strict=True))
    out["exponent_N"] = round(slope(ns[1:], t_n[1:]), 2)
    ts = [16, 64, 256, 1024]
    t_t = [cell_time(T=t) for t in ts]
    out["cell_seconds_vs_T_at_d400"] = dict(zip(map(str, ts), map(_r, t_t), strict=True))
    out["exponent_T"] = round(slope(ts[1:], t_t[1:]), 2)
    return out


def _r(value: float) -> float:
    return round(value, 4)


def block_overhead(n_cores: int) -> dict[str, Any]:
    """Fixed cost per block job: 64 tiny cells (d = 20) as 1 block and as 32 blocks."""
    base = {
        "run": "bench-overhead",
        "seed": 1,
        "sweeps": {
            "tiny": {
                "d": [20],
                "T": [4],
                "weights": ["mean"],
                "snr": {"start": 0.0, "stop": 1.0, "num": 16},
                "replicates": 4,
                "top_k": 2,
            }
        },
        "execution": {"block_size": 64},
    }
    n_cells = 16 * 4  # one line: 1 block of 64 cells, or 32 blocks of 2
    few = copy.deepcopy(base)
    many = copy.deepcopy(base)
    many["execution"]["block_size"] = 2
    seconds_few = statistics.median(run_pipeline(few, n_cores) for _ in range(2))
    seconds_many = statistics.median(run_pipeline(many, n_cores) for _ in range(2))
    blocks_few, blocks_many = n_cells // 64, n_cells // 2
    per_block = (seconds_many - seconds_few) / (blocks_many - blocks_few)
    return {
        "pipeline_seconds_tiny_cells": {
            f"{blocks_few}_blocks": round(seconds_few, 2),
            f"{blocks_many}_blocks": round(seconds_many, 2),
        },
        "pipeline_seconds_per_block": round(per_block, 3),
        # the fixed start-up (Snakemake, DAG, Dask cluster) left when blocks cost nothing
        "pipeline_fixed_seconds": round(seconds_few - blocks_few * per_block, 2),
    }


def main(runs: int = RUNS) -> dict[str, Any]:
    """Run every measurement of this module; return the metrics."""
    n_cores = cores()
    result: dict[str, Any] = {"machine": machine()}
    result.update(pipeline_vs_loop(runs))
    result.update(_scaling_in_child())
    result.update(block_overhead(n_cores))
    result["pipeline_vs_loop_ok"] = bool(result["pipeline_vs_loop_ok"])
    if not math.isfinite(result["pipeline_vs_loop"]):
        raise RuntimeError("non-finite ratio")
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
