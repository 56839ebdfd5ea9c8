"""Benchmark: the result store (gather memory, incremental updates) and planning at 10^6.

Metrics (targets from docs/scaling.md; every gather runs in a fresh process whose peak RSS
is ``resource.getrusage(RUSAGE_SELF).ru_maxrss``, the plan of the sweep included):

``gather_peak_rss_mb_<n>_cells``
    Peak RSS of ``gather_cells`` (plan + streaming every fragment into the cell table);
    ``gather_plan_rss_mb_<n>_cells``: the peak before the gather (interpreter + plan).
    Measured at three sizes: ``N_TINY`` and ``N_TINY_LARGE`` cells with ``d = 16`` spectra
    (``1e6_cells_d16``, ``3e6_cells_d16``: what grows with the number of cells), and
    ``N_BIG`` cells with ``d = 1000`` spectra (the payload of spectra is ``8 d`` bytes per
    cell). Target <= 1024 MB whatever the size.
``gather_seconds_<n>_cells``
    Wall time of that gather (``gather_cells`` alone: the plan exists before any job).
``store_update_fraction_1pct``
    Bytes written by the gather after adding 1% new cells (one more snr value of 100)
    over the bytes of the full write. Target <= 0.05.
``store_new_lines_*_<n>``
    The other kind of extension (a new ``d``, model, weights or gamma): 8 new lines
    (two more gamma values, 0.8% of the cells, whole blocks) after the +1% update: the
    share of cells, the bytes written over a full write's, seconds and their ratio.
``store_update_seconds_1pct`` / ``store_update_seconds_ratio_1pct``
    Its wall time, and the ratio to the full gather's (target <= 0.05), of the issue's
    sweep (10^6 cells of d = 1000); ``store_update_seconds_ratio_1pct_max``: the worst of
    the sizes measured (10^6 tiny cells: a gather's fixed cost, the zarr import and the
    new segment's arrays, is ~10% of a full gather that takes only ~6 s).
    ``gather_import_seconds_<n>``: the import of zarr and its codecs, the first thing
    either gather does (part of both timings); ``store_update_seconds_ratio_no_imports_
    1pct_<n>``: the ratio with it taken out of both (reported beside, not instead).
``open_seconds_<n>_cells`` / ``read_one_line_and_spectrum_seconds_<n>_cells``
    :func:`attnrmt.sweep.store.cell_table.reader.open_cells` of the gathered store (target
    <= 5 s at 10^6 cells), then loading one setting's top eigenvalues (every snr and
    replicate) and one cell's spectrum (after a first such read, which pays one-time
    imports). ``plain_xarray_open_seconds_<n>``: :func:`xarray.open_zarr` of ``cells.zarr``
    (the table along ``cell``); ``snapshot_files_<n>``: files hard-linked into it by each
    gather. Bytes written count every file of ``cell_table.zarr`` and ``cells.zarr`` once
    per inode (a hard link writes no data).
``plan_seconds_1e6_cells`` / ``plan_peak_rss_mb_1e6_cells``
    ``snakemake -n`` on a 10^6-cell config (``block_size: auto``), as in bench_plan.
    Targets <= 60 s and <= 2048 MB.

Fragments are synthetic (sorted random spectra) but written by the block jobs' writer
(:func:`attnrmt.sweep.store.fragments.encode_fragment` + ``publish_fragment``), so the store
code under test is the real one. Run with ``python -m benchmarks bench_store``. Writing
the fragments takes longer than gathering them (~10 min per 10^6 cells on the 2-core VM):
``ATTNRMT_BENCH_STORE_KEEP=<dir>`` keeps them under ``<dir>/<label>/`` for later runs
(each run then removes only the cell table before its full gather).

``ATTNRMT_BENCH_STORE_RUNS`` (default 3): pairs of a full gather and the +1% update, run
back to back (each pair rebuilds the table from scratch), so both see the same load; the
seconds are medians over the pairs (``*_all_seconds_<label>`` lists every run), the
memory the maximum. ``ATTNRMT_BENCH_STORE_SIZES``: comma-separated labels to run
(``1e6_cells_d16``, ``3e6_cells_d16``, ``<N_BIG>_cells_d1000``, ``plan``; default all);
the keys of the other sizes are left out of the result (``python -m benchmarks`` replaces
the module's whole entry: merge by hand to keep them).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from benchmarks.bench_plan import big_config, dry_run, machine

REPO = Path(__file__).resolve().parents[1]
#: Sizes measured: 10^6 cells at d = 16, and ``N_BIG`` cells at d = 1000 (10^6: 8 GB of
#: spectra, ~30 min on the 2-core development VM; ``ATTNRMT_BENCH_STORE_BIG`` to change).
N_TINY = 1_000_000
N_TINY_LARGE = 3_000_000
N_BIG = int(os.environ.get("ATTNRMT_BENCH_STORE_BIG", "1000000"))
RSS_TARGET_MB = 1024.0
UPDATE_TARGET = 0.05
PLAN_TARGET_SECONDS = 60.0
PLAN_RSS_TARGET_MB = 2048.0
N_SNR = 100  # one more snr value adds 1% of the cells (a 10-cell block to every line)
NEW_GAMMA = 2  # two more gamma values add 0.8% of the cells as 8 new lines


def store_config(d: int, n_cells: int, n_snr: int = N_SNR, new_gamma: int = 0) -> dict[str, Any]:
    """A one-sweep config of ``n_cells`` cells: lines x ``n_snr`` snr x replicates;
    ``new_gamma`` more gamma values add ``4 new_gamma`` lines (one per weights)."""
    replicates = 10
    n_lines = n_cells // (N_SNR * replicates)  # the same lines for any n_snr
    weights = ["mean", "last", "harmonic", "optimal"]
    n_gamma = max(1, n_lines // len(weights))
    gammas = (
        [round(0.1 + 0.9 * i / max(1, n_gamma - 1), 6) for i in range(n_gamma)]
        if n_gamma > 1
        else [0.5]
    )
    gammas += [round(1.0 + 0.01 * (i + 1), 6) for i in range(new_gamma)]
    return {
        "run": "bench-store",
        "seed": 1,
        "sweeps": {
            "big": {
                "d": [d],
                "delta": [0.5],
                "gamma": gammas,
                "T": [8],
                "positional": ["iid"],
                "weights": weights,
                "snr": [round(0.04 * i, 6) for i in range(n_snr)],  # a prefix of longer
                "replicates": replicates,
                "top_k": 3,
            }
        },
        "execution": {"block_size": 1000},
    }


# Child processes. WRITE: fragments of every block missing one. GATHER: the gather,
# reporting its peak RSS, seconds and the bytes it wrote (files new or changed).
_WRITE = r"""
import json, sys
import numpy as np
from pathlib import Path
from attnrmt.sweep import load_config, plan_run
from attnrmt.sweep.store.fragments import encode_fragment, publish_fragment
from attnrmt.sweep.spec.identity import seed_token
config, sweep_dir = json.loads(sys.argv[1]), Path(sys.argv[2])
plan = plan_run(load_config(config))
sweep = plan.sweeps["big"]
rng = np.random.default_rng(0)
for block in sweep.blocks:
    path = sweep_dir / "fragments" / f"{block.key}.npz"
    if path.exists():
        continue
    records = []
    for cell in block.cells:
        records.append({
            "eigenvalues": np.sort(rng.random(cell.d)),
            **{name: rng.random(cell.top_k) for name in (
                "top_eigenvalues", "overlap_signal", "overlap_class_mean",
                "overlap_table_mean", "pop_top_eigenvalues", "pop_overlap_signal")},
            "alpha": 0.1, "kappa": 0.125, "sigma": 1.0, "V": 4 * cell.d, "N": 2 * cell.d,
            "effective_weights": np.full(cell.T, 1.0 / cell.T),
            "downstream_accuracy": float("nan"), "compute_seconds": 0.002,
        })
    seeds = [seed_token(cell.seed_words(plan.seed)) for cell in block.cells]
    arrays = encode_fragment([c.key for c in block.cells], seeds, [True] * len(seeds), records)
    publish_fragment(path, arrays)
"""

_GATHER = r"""
import json, os, resource, sys, time
from pathlib import Path
from attnrmt.sweep import load_config, plan_run
from attnrmt.sweep.store.cell_table.writer import gather_cells
config, sweep_dir = json.loads(sys.argv[1]), Path(sys.argv[2])

def sizes():  # every file of the table and its snapshot, once per inode (hard links)
    found = {}
    for top in ("cell_table.zarr", "cells.zarr"):
        for root, _, files in os.walk(sweep_dir / top):
            for name in files:
                stat = os.stat(os.path.join(root, name))
                found[(stat.st_dev, stat.st_ino)] = (stat.st_size, stat.st_mtime_ns)
    return found

before = sizes()
plan = plan_run(load_config(config))  # built by Snakemake before any job: not timed
sweep = plan.sweeps["big"]
plan_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
paths = [sweep_dir / "fragments" / f"{block.key}.npz" for block in sweep.blocks]
start = time.perf_counter()
import zarr, zarr.codecs  # what gather_cells imports first (timed: it is part of a gather)
import_seconds = time.perf_counter() - start
gather_cells(sweep, paths, sweep_dir / "cells.zarr", plan.seed)
seconds = time.perf_counter() - start
after = sizes()
written = sum(size for inode, (size, mtime) in after.items() if before.get(inode) != (size, mtime))
snapshot_files = sum(len(files) for _, _, files in os.walk(sweep_dir / "cells.zarr"))
import dask.array, xarray  # imports are not the store's time
from attnrmt.sweep.store.cell_table.reader import open_cells
start = time.perf_counter()
cells = open_cells(sweep_dir / "cells.zarr")
open_seconds = time.perf_counter() - start
def read_one(weights):  # one line (every snr and replicate) and one spectrum
    setting = {axis: 0 for axis in ("d", "delta", "gamma", "T", "positional")}
    setting["weights"] = weights
    start = time.perf_counter()
    cells.top_eigenvalues.isel(setting).load()
    cells.eigenvalues.isel({**setting, "snr": 0, "centered": 0, "replicate": 0}).load()
    return time.perf_counter() - start

read_one(0)  # the first read pays one-time codec imports and thread start-up
read_seconds = read_one(1)
start = time.perf_counter()
plain = xarray.open_zarr(sweep_dir / "cells.zarr")  # the table, by plain xarray
plain_open_seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "import_seconds": import_seconds,
                  "written_bytes": written,
                  "open_seconds": open_seconds, "read_line_seconds": read_seconds,
                  "plain_open_seconds": plain_open_seconds, "snapshot_files": snapshot_files,
                  "stored_bytes": sum(size for size, _ in after.values()),
                  "cells": len(sweep.cells), "plan_rss_mb": plan_rss_mb,
                  "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _child(script: str, *args: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH", "")]
        ),
    }
    out = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, env=env
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def gather_once(config: dict[str, Any], sweep_dir: Path) -> dict[str, Any]:
    """Write missing fragments, then gather in a fresh process; its measurements."""
    _child(_WRITE, json.dumps(config), str(sweep_dir))
    return _child(_GATHER, json.dumps(config), str(sweep_dir))


def store_metrics(d: int, n_cells: int, label: str, runs: int | None = None) -> dict[str, Any]:
    """Full gather, then a 1% extension (one more snr value), of one synthetic sweep;
    ``runs`` such pairs back to back (default ``ATTNRMT_BENCH_STORE_RUNS``, 3): median
    seconds (the ratio is of the medians), maximum memory."""
    runs = int(os.environ.get("ATTNRMT_BENCH_STORE_RUNS", "3")) if runs is None else runs
    keep = os.environ.get("ATTNRMT_BENCH_STORE_KEEP")
    fulls, updates, new_lines = [], [], []
    with tempfile.TemporaryDirectory(prefix="attnrmt-bench-store-") as tmp:
        root = Path(keep) / label if keep else Path(tmp)
        sweep_dir = root / "results" / "bench-store" / "big"
        for _ in range(runs):
            for stale in ("cell_table.zarr", "cells.zarr"):  # every full gather from scratch
                shutil.rmtree(sweep_dir / stale, ignore_errors=True)
            fulls.append(gather_once(store_config(d, n_cells), sweep_dir))
            updates.append(gather_once(store_config(d, n_cells, N_SNR + 1), sweep_dir))
            new_lines.append(gather_once(store_config(d, n_cells, N_SNR + 1, NEW_GAMMA), sweep_dir))
    full, extended = fulls[-1], updates[-1]
    lines_seconds = statistics.median(run["seconds"] for run in new_lines)
    full_seconds = statistics.median(run["seconds"] for run in fulls)
    update_seconds = statistics.median(run["seconds"] for run in updates)
    fraction = extended["written_bytes"] / full["written_bytes"]
    return {
        f"gather_peak_rss_mb_{label}": round(max(run["maxrss_mb"] for run in fulls), 1),
        f"gather_plan_rss_mb_{label}": round(full["plan_rss_mb"], 1),
        f"gather_seconds_{label}": round(full_seconds, 2),
        f"gather_all_seconds_{label}": [round(run["seconds"], 2) for run in fulls],
        f"store_bytes_per_cell_{label}": round(full["stored_bytes"] / full["cells"], 1),
        f"spectrum_payload_mb_{label}": round(8 * d * full["cells"] / 2**20, 1),
        f"store_update_fraction_1pct_{label}": round(fraction, 4),
        f"store_update_seconds_1pct_{label}": round(update_seconds, 2),
        f"store_update_all_seconds_{label}": [round(run["seconds"], 2) for run in updates],
        f"store_update_seconds_ratio_1pct_{label}": round(update_seconds / full_seconds, 4),
        f"store_update_peak_rss_mb_{label}": round(max(run["maxrss_mb"] for run in updates), 1),
        # the other kind of extension: new lines (a new model, d, gamma...), whole blocks
        f"store_new_lines_cells_fraction_{label}": round(
            (new_lines[-1]["cells"] - extended["cells"]) / extended["cells"], 4
        ),
        f"store_new_lines_fraction_{label}": round(
            new_lines[-1]["written_bytes"] / full["written_bytes"], 4
        ),
        f"store_new_lines_seconds_{label}": round(lines_seconds, 2),
        f"store_new_lines_seconds_ratio_{label}": round(lines_seconds / full_seconds, 4),
        # the import of zarr and its codecs, inside both timings above (a fixed cost of
        # any gather), and the ratio without it in either
        f"gather_import_seconds_{label}": round(
            statistics.median(run["import_seconds"] for run in [*fulls, *updates]), 3
        ),
        f"store_update_seconds_ratio_no_imports_1pct_{label}": round(
            statistics.median(run["seconds"] - run["import_seconds"] for run in updates)
            / statistics.median(run["seconds"] - run["import_seconds"] for run in fulls),
            4,
        ),
        f"open_seconds_{label}": round(statistics.median(run["open_seconds"] for run in fulls), 3),
        f"read_one_line_and_spectrum_seconds_{label}": round(
            statistics.median(run["read_line_seconds"] for run in fulls), 3
        ),
        f"plain_xarray_open_seconds_{label}": round(
            statistics.median(run["plain_open_seconds"] for run in fulls), 3
        ),
        f"snapshot_files_{label}": full["snapshot_files"],
    }


def plan_config_1e6() -> dict[str, Any]:
    """bench_plan's config grown to 10^6 cells (80 lines x 500 snr x 25 replicates)."""
    config = big_config("bench-store-plan")
    config["sweeps"]["big"].update(
        {
            "delta": [0.5, 1.0],
            "gamma": [0.5, 1.0],
            "snr": {"start": 0.0, "stop": 4.0, "num": 500},
            "replicates": 25,
        }
    )
    return config


def plan_metrics(runs: int = 3) -> dict[str, Any]:
    """``snakemake -n`` on 10^6 cells: median seconds, max peak RSS, number of jobs."""
    from attnrmt.sweep import load_config, plan_run

    config = plan_config_1e6()
    plan = plan_run(load_config(config))
    n_cells = sum(len(sweep.cells) for sweep in plan.sweeps.values())
    n_blocks = sum(len(sweep.blocks) for sweep in plan.sweeps.values())
    with tempfile.TemporaryDirectory(prefix="attnrmt-bench-store-plan-") as tmp:
        config_path = Path(tmp) / "config.yaml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        results = [dry_run(config_path, Path(tmp)) for _ in range(runs)]
    seconds = statistics.median(r["seconds"] for r in results)
    rss_mb = max(r["maxrss_kb"] for r in results) / 1024
    return {
        "plan_cells": n_cells,
        "plan_block_jobs_auto": n_blocks,
        "plan_seconds_1e6_cells": round(seconds, 2),
        "plan_seconds_1e6_cells_ok": seconds <= PLAN_TARGET_SECONDS,
        "plan_peak_rss_mb_1e6_cells": round(rss_mb, 1),
        "plan_peak_rss_mb_1e6_cells_ok": rss_mb <= PLAN_RSS_TARGET_MB,
        "plan_all_seconds": [round(r["seconds"], 2) for r in results],
    }


def summarise(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` with the cross-size summaries (maxima over the sizes measured, targets
    met, the issue's headline keys), recomputed from the per-size keys."""
    rss = [
        value
        for key, value in result.items()
        if key.startswith(("gather_peak_rss_mb_", "store_update_peak_rss_mb_"))
        and key not in ("gather_peak_rss_mb_max", "gather_peak_rss_mb_1e6_cells")
    ]
    fractions = [
        value for key, value in result.items() if key.startswith("store_update_fraction_1pct_")
    ]
    updates = [
        value for key, value in result.items() if key.startswith("store_update_seconds_ratio_1pct_")
    ]
    summary: dict[str, Any] = (
        {}
        if not rss
        else {
            "gather_peak_rss_mb_max": max(rss),
            "gather_peak_rss_ok": max(rss) <= RSS_TARGET_MB,
            "store_update_fraction_1pct": max(fractions),
            "store_update_fraction_ok": max(fractions) <= UPDATE_TARGET,
            # the worst size measured, whatever it is (tiny cells: the update's fixed cost,
            # docs/scaling.md, "An update reads only what it must")
            "store_update_seconds_ratio_1pct_max": max(updates),
            "store_update_seconds_max_ok": max(updates) <= UPDATE_TARGET,
        }
    )
    if "gather_peak_rss_mb_1e6_cells_d1000" in result:  # the headline sweep
        headline = {
            "gather_peak_rss_mb_1e6_cells": "gather_peak_rss_mb",
            "gather_seconds_1e6_cells": "gather_seconds",
            "store_update_seconds_1pct": "store_update_seconds_1pct",
            "store_update_seconds_ratio_1pct": "store_update_seconds_ratio_1pct",
        }
        for key, measured in headline.items():
            summary[key] = result[f"{measured}_1e6_cells_d1000"]
        summary["store_update_seconds_ok"] = (
            summary["store_update_seconds_ratio_1pct"] <= UPDATE_TARGET
        )
    return {**result, **summary}


def main() -> dict[str, Any]:
    """Run the benchmark; return its metrics (one run of each gather: minutes each)."""
    result: dict[str, Any] = {"machine": machine()}
    big_label = f"{N_BIG:.0e}".replace("+0", "") + "_cells_d1000"
    sizes = {
        "1e6_cells_d16": (16, N_TINY),
        "3e6_cells_d16": (16, N_TINY_LARGE),
        big_label: (1000, N_BIG),
    }
    chosen = os.environ.get("ATTNRMT_BENCH_STORE_SIZES", ",".join([*sizes, "plan"]))
    selected = [label.strip() for label in chosen.split(",") if label.strip()]
    unknown = sorted(set(selected) - {*sizes, "plan"})
    if unknown:
        raise ValueError(f"ATTNRMT_BENCH_STORE_SIZES: unknown {unknown}; known: {[*sizes, 'plan']}")
    for label, (d, n_cells) in sizes.items():
        if label in selected:
            result.update(store_metrics(d, n_cells, label))
    result["note"] = (
        f"10^6 and 3*10^6 cells measured at d=16; d=1000 measured at {N_BIG} "
        f"cells ({8 * 1000 * N_BIG / 2**30:.2f} GiB of spectra); "
        f"sizes run: {selected}"
    )
    if "plan" in selected:
        result.update(plan_metrics())
    result["load_average_1min_end"] = round(os.getloadavg()[0], 2)
    return summarise(result)


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
