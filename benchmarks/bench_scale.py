"""Benchmark: a sweep of many tiny cells end to end, against a plain process-pool loop.

Metrics (targets from docs/scaling.md):

``scale_vs_loop_<n>_tiny_cells``
    Wall time of ``snakemake --cores C`` (default profile, ``block_size: auto``) from an
    empty directory to every sweep's ``analysis.zarr`` (blocks, gather into the cell table,
    theory, the threshold analysis), over the wall time of a ``ProcessPoolExecutor`` of C
    processes computing the same cells (:func:`benchmarks.bench_pipeline.run_loop`).
    Target <= 1.5.
``scale_peak_rss_mb``
    Largest resident memory of any single process of the run (Snakemake, its Dask
    cluster's daemon and workers), sampled every 0.5 s with psutil. Target <= 2048 MB.
``scale_total_rss_mb``
    Largest sum of the resident memory of those processes at one sampling time.
``plan_estimate_over_run``
    ``attnrmt plan``'s estimate of single-core compute (calibrated on this machine) over
    the measured pipeline wall time x C cores, and over the loop's wall time x C cores
    (``plan_estimate_over_loop``: the compute alone); within [0.5, 2] means the estimate
    is within a factor 2.

``scale_peak_rss_mb_by_process``
    Each sampled process's own peak (``"<role> <pid>"``, :func:`process_role`).
``scale_pipeline_ms_per_cell``, ``scale_loop_ms_per_cell``
    Wall milliseconds per cell of each way (fixed costs included).

``main()`` runs 10^6 cells (``N_CELLS``; ~25 min per way on 2 cores, so ~1 h in all)
unless ``ATTNRMT_BENCH_SCALE_CELLS`` asks for another number (stated in the result).
Run with ``python -m benchmarks bench_scale``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.bench_pipeline import (
    cell_jobs,
    cores,
    machine,
    run_loop,
    snakemake_command,
)

REPO = Path(__file__).resolve().parents[1]
N_CELLS = 1_000_000
N_RUN = int(os.environ.get("ATTNRMT_BENCH_SCALE_CELLS", str(N_CELLS)))
RATIO_TARGET = 1.5
RSS_TARGET_MB = 2048.0
REPLICATES = 20
N_SNR = 50


def tiny_config(n_cells: int, run: str = "bench-scale") -> dict[str, Any]:
    """About ``n_cells`` tiny cells (d = 8..16): lines x 50 snr x 20 replicates; lines =
    4 weights x up to 5 d x gamma values (exactly 10^6 cells for ``N_CELLS``)."""
    n_lines = max(1, n_cells // (N_SNR * REPLICATES))
    weights = ["mean", "last", "harmonic", "optimal"]
    per_weights = max(1, n_lines // len(weights))
    ds = [8, 10, 12, 14, 16][: min(5, per_weights)]
    n_gamma = max(1, per_weights // len(ds))
    return {
        "run": run,
        "seed": 1,
        "sweeps": {
            "tiny": {
                "d": ds,
                "delta": [0.5],
                "gamma": [round(0.25 + 0.75 * i / max(1, n_gamma - 1), 6) for i in range(n_gamma)]
                if n_gamma > 1
                else [0.5],
                "T": [4],
                "positional": ["iid"],
                "weights": weights,
                "snr": [round(0.08 * i, 6) for i in range(N_SNR)],
                "replicates": REPLICATES,
                "top_k": 2,
            }
        },
        "analysis": {"bootstrap": 20},
    }


def process_role(cmdline: list[str]) -> str:
    """What a process of the run is, from its command line: ``snakemake`` (the run, its
    block jobs' threads and the Dask scheduler), ``dask worker`` (a spawned worker or
    nanny child) or the program's name."""
    text = " ".join(cmdline)
    if "snakemake" in text and "spawn_main" not in text:
        return "snakemake"
    if "spawn_main" in text or "multiprocessing" in text:
        return "dask worker"
    return Path(cmdline[0]).name if cmdline else "?"


class RssSampler:
    """Samples the RSS of every process whose working directory is under ``root``:
    the largest single process (``peak_single``), the largest sum (``peak_total``) and
    each process's own peak (``peak_by_process``: ``"<role> <pid>" -> MB``)."""

    def __init__(self, root: Path, interval: float = 0.5) -> None:
        self.root = str(root)
        self.interval = interval
        self.peak_single = 0.0
        self.peak_total = 0.0
        self.peak_by_process: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            total = 0.0
            for process in psutil.process_iter(["cwd", "memory_info", "cmdline"]):
                cwd = process.info.get("cwd") or ""
                memory = process.info.get("memory_info")
                cmdline = process.info.get("cmdline") or []
                if memory is not None and cmdline and cwd.startswith(self.root):
                    rss = memory.rss / 2**20
                    total += rss
                    self.peak_single = max(self.peak_single, rss)
                    name = f"{process_role(cmdline)} {process.pid}"
                    self.peak_by_process[name] = max(self.peak_by_process.get(name, 0.0), rss)
            self.peak_total = max(self.peak_total, total)
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()


def run_pipeline_to_analysis(config: dict[str, Any], n_cores: int) -> dict[str, Any]:
    """Seconds and peak RSS of a fresh run to every sweep's ``analysis.zarr``."""
    from attnrmt.sweep.compute.cluster import shutdown_run_cluster

    workdir = Path(tempfile.mkdtemp(prefix="attnrmt-bench-scale-"))
    try:
        command, env = snakemake_command(config, workdir, "analysis.zarr", n_cores)
        with RssSampler(workdir) as sampler:
            start = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=workdir)
            seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise RuntimeError(f"pipeline failed:\n{(done.stdout + done.stderr)[-3000:]}")
        return {
            "seconds": seconds,
            "peak_single_mb": sampler.peak_single,
            "peak_total_mb": sampler.peak_total,
            "peak_by_process_mb": {
                name: round(mb, 1)
                for name, mb in sorted(sampler.peak_by_process.items(), key=lambda item: -item[1])
            },
        }
    finally:
        shutdown_run_cluster(workdir / "results" / config["run"])
        shutil.rmtree(workdir, ignore_errors=True)


def estimated_compute_seconds(config: dict[str, Any]) -> float:
    """``attnrmt plan``'s single-core estimate of the config (calibrated here)."""
    from attnrmt.cli import sweep_summary
    from attnrmt.sweep import load_config, plan_run
    from attnrmt.sweep.compute.calibration import calibrate_seconds_per_work

    seconds_per_work = calibrate_seconds_per_work()
    plan = plan_run(load_config(config))
    return sum(
        sweep_summary(sweep, set(), seconds_per_work)["estimated_seconds"]
        for sweep in plan.sweeps.values()
    )


def main(n_cells: int = N_RUN) -> dict[str, Any]:
    """One pipeline run and one loop over the same cells (minutes each)."""
    config = tiny_config(n_cells)
    jobs = cell_jobs(config)
    n_cores = cores()
    pipeline = run_pipeline_to_analysis(config, n_cores)
    loop_seconds = run_loop([(kwargs, seed) for kwargs, seed in jobs], n_cores)
    ratio = pipeline["seconds"] / loop_seconds
    estimate = estimated_compute_seconds(config)
    label = "1e6" if len(jobs) == N_CELLS else str(len(jobs))
    return {
        "machine": machine(),
        "cores": n_cores,
        "cells": len(jobs),
        "note": (
            "one pipeline run, then one loop run, over the same cells"
            + (
                ""
                if len(jobs) == N_CELLS
                else f"; run at {len(jobs)} cells, not {N_CELLS} (ATTNRMT_BENCH_SCALE_CELLS)"
            )
        ),
        f"scale_vs_loop_{label}_tiny_cells": round(ratio, 3),
        "scale_vs_loop_ok": ratio <= RATIO_TARGET,
        "scale_pipeline_seconds": round(pipeline["seconds"], 2),
        "scale_loop_seconds": round(loop_seconds, 2),
        "scale_pipeline_ms_per_cell": round(1e3 * pipeline["seconds"] / len(jobs), 4),
        "scale_loop_ms_per_cell": round(1e3 * loop_seconds / len(jobs), 4),
        "scale_peak_rss_mb": round(pipeline["peak_single_mb"], 1),
        "scale_peak_rss_ok": pipeline["peak_single_mb"] <= RSS_TARGET_MB,
        "scale_total_rss_mb": round(pipeline["peak_total_mb"], 1),
        "scale_peak_rss_mb_by_process": pipeline["peak_by_process_mb"],
        "plan_estimate_seconds": round(estimate, 2),
        "plan_estimate_over_run": round(estimate / (pipeline["seconds"] * n_cores), 3),
        "plan_estimate_over_loop": round(estimate / (loop_seconds * n_cores), 3),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(main(), indent=1))
