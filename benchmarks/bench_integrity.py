"""Benchmark: what the integrity checks of fragments cost, against the gather they guard.

On ``INTEGRITY_CELLS`` synthetic cells at d = ``INTEGRITY_D`` in fragments of
``INTEGRITY_BLOCK`` cells (docs/data-contract.md, "Fragments"):

- a first gather (``update_cell_table`` writing the whole cell table from the fragments,
  which reads every fragment through the verifying reader; the table is removed before
  each repeat so every repeat writes all cells, checked);
- the verification alone (CRC32 of every member, central directory, members and shapes)
  over the same bytes in memory, minus a parse of the same members without the checks:
  ``integrity_verify_over_gather`` is its share of the gather (target
  ``VERIFY_SHARE_TARGET``: "a small fraction of the gather");
- ``zlib.crc32`` throughput; the cell-id reader per fragment (what ``attnrmt status`` and
  ``attnrmt plan`` read) against ``numpy.load``; one salvage write per task of 100 tiny
  cells (against the task's ~1 s of work); ``remove_stale_temporaries`` over a run folder
  of 10^5 fragments (fragments, cache copies, logs: 3 x 10^5 files).

Medians of ``REPEATS``. Cost: ~30 s, ~0.5 GB of temporary disk.
Run with ``python -m benchmarks bench_integrity``.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import statistics
import sys
import tempfile
import time
import warnings
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the tests' tiny config (tests/e2e/helpers.py)
    sys.path.insert(0, str(REPO))

from tests.e2e.helpers import tiny_config  # noqa: E402

INTEGRITY_CELLS = 20_000
INTEGRITY_D = 1000
INTEGRITY_BLOCK = 200
REPEATS = 3
#: The verification's share of a first gather it must stay below.
VERIFY_SHARE_TARGET = 0.10


def _median(measure: Callable[[], float], repeats: int = REPEATS) -> float:
    return statistics.median(measure() for _ in range(repeats))


def _synthetic_records(n_cells: int, d: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    records = []
    for _ in range(n_cells):
        records.append(
            {
                "eigenvalues": np.sort(rng.random(d)),
                "top_eigenvalues": rng.random(2),
                "overlap_signal": rng.random(2),
                "overlap_class_mean": rng.random(2),
                "overlap_table_mean": rng.random(2),
                "pop_top_eigenvalues": rng.random(2),
                "pop_overlap_signal": rng.random(2),
                "alpha": 0.5,
                "kappa": 0.25,
                "sigma": 1.0,
                "V": 2 * d,
                "N": 2 * d,
                "effective_weights": np.full(4, 0.25),
                "downstream_accuracy": float("nan"),
                "compute_seconds": 0.1,
            }
        )
    return records


def integrity_costs() -> dict[str, Any]:
    """The ``integrity_*`` numbers (module docstring)."""
    from attnrmt.sweep import load_config, plan_run
    from attnrmt.sweep.compute.blocks import BlockLog, FinishedTask, TaskSalvage
    from attnrmt.sweep.spec.identity import seed_token
    from attnrmt.sweep.store import fragments
    from attnrmt.sweep.store.atomic import remove_stale_temporaries
    from attnrmt.sweep.store.cell_table.layout import store_dir
    from attnrmt.sweep.store.cell_table.writer import update_cell_table

    rng = np.random.default_rng(5)
    n_snr = INTEGRITY_CELLS // 20
    config = tiny_config(run="integrity", execution={"block_size": INTEGRITY_BLOCK})
    config["sweeps"]["grid"].update(
        d=[INTEGRITY_D],
        weights=["mean"],
        replicates=20,
        snr=[round(0.001 * index, 3) for index in range(n_snr)],
    )
    plan = plan_run(load_config(config))
    sweep = plan.sweeps["grid"]
    root = Path(tempfile.mkdtemp(prefix="attnrmt-integrity-"))
    try:
        sweep_dir = root / "grid"
        paths = []
        for block in sweep.blocks:
            cells = list(block.cells)
            arrays = fragments.encode_fragment(
                [cell.key for cell in cells],
                [seed_token(cell.seed_words(plan.seed)) for cell in cells],
                [True] * len(cells),
                _synthetic_records(len(cells), INTEGRITY_D, rng),
            )
            paths.append(
                fragments.publish_fragment(sweep_dir / "fragments" / f"{block.key}.npz", arrays)
            )
        data = [path.read_bytes() for path in paths]
        total_bytes = sum(len(item) for item in data)

        def gather() -> float:  # a first gather each time: the whole table is written
            shutil.rmtree(store_dir(sweep_dir), ignore_errors=True)
            started = time.perf_counter()
            written = update_cell_table(sweep, paths, sweep_dir, plan.seed)
            elapsed = time.perf_counter() - started
            if written["cells_present"] != INTEGRITY_CELLS:  # a no-op gather times nothing
                raise RuntimeError(f"gather stored {written['cells_present']} cells")
            return elapsed

        def verify() -> float:
            started = time.perf_counter()
            for path, item in zip(paths, data, strict=True):
                fragments._verified_arrays(path, item)
            return time.perf_counter() - started

        def parse_only() -> float:  # the reader without its checks (what it did before)
            started = time.perf_counter()
            for item in data:
                base = np.frombuffer(item, dtype=np.uint8)
                for _, begin, size, _, _ in fragments._member_spans(item):
                    fragments._npy_array(item, base, begin, size)
            return time.perf_counter() - started

        def crc() -> float:
            started = time.perf_counter()
            for item in data:
                zlib.crc32(item)
            return time.perf_counter() - started

        def ids() -> float:
            started = time.perf_counter()
            for path in paths:
                fragments.read_fragment_cell_ids(path)
            return time.perf_counter() - started

        def ids_numpy() -> float:  # what the id readers used before: numpy.load
            started = time.perf_counter()
            for path in paths:
                with np.load(path, allow_pickle=False) as npz:
                    npz["cell_key"].tolist(), npz["cell_seed"].tolist()
            return time.perf_counter() - started

        gather_seconds, verify_seconds = _median(gather), _median(verify)
        parse_seconds, crc_seconds = _median(parse_only), _median(crc)
        ids_seconds, ids_numpy_seconds = _median(ids), _median(ids_numpy)

        # one salvage write of a task of 100 tiny cells (d = 16: ~1 s of work a task)
        tiny = _synthetic_records(100, 16, rng)
        ids = [(f"{index:064x}", "[1, 2]") for index in range(len(tiny))]
        columns = fragments.encode_fragment(
            [key for key, _ in ids], [seed for _, seed in ids], [True] * len(ids), tiny
        )
        salvage = TaskSalvage(root / "salvage-bench", "block", BlockLog(None))

        def salvage_write() -> float:
            started = time.perf_counter()
            salvage.write(FinishedTask(f"task-{time.perf_counter_ns()}", ids, columns))
            return time.perf_counter() - started

        salvage_seconds = _median(salvage_write, 7)

        # remove_stale_temporaries over a run folder of 10^5 fragments
        big = root / "results" / "big" / "grid"
        for sub, suffix in (("fragments", ".npz"), ("cache", ".npz"), ("logs", ".log")):
            (big / sub).mkdir(parents=True)
            for index in range(100_000):
                (big / sub / f"{index:016x}{suffix}").touch()

        def sweep_temporaries() -> float:
            started = time.perf_counter()
            remove_stale_temporaries(root / "results" / "big")
            return time.perf_counter() - started

        stale_seconds = _median(sweep_temporaries)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "integrity_cells": INTEGRITY_CELLS,
        "integrity_d": INTEGRITY_D,
        "integrity_fragments": len(paths),
        "integrity_fragment_mb": round(total_bytes / 2**20, 1),
        "integrity_gather_seconds": round(gather_seconds, 3),
        "integrity_verify_seconds": round(verify_seconds - parse_seconds, 3),
        "integrity_verify_over_gather": round((verify_seconds - parse_seconds) / gather_seconds, 4),
        "integrity_crc32_gb_per_second": round(total_bytes / crc_seconds / 1e9, 2),
        "integrity_id_read_ms_per_fragment": round(1e3 * ids_seconds / len(paths), 3),
        "integrity_id_read_numpy_ms_per_fragment": round(1e3 * ids_numpy_seconds / len(paths), 3),
        "integrity_salvage_write_ms_per_task": round(1e3 * salvage_seconds, 2),
        "integrity_stale_temporaries_seconds_1e5_fragments": round(stale_seconds, 2),
    }


def main() -> dict[str, Any]:
    """The ``integrity_*`` numbers, and whether the verification's share meets its target."""
    warnings.simplefilter("ignore")
    with contextlib.redirect_stderr(io.StringIO()):
        result = integrity_costs()
    result["integrity_verify_ok"] = result["integrity_verify_over_gather"] <= VERIFY_SHARE_TARGET
    result["target"] = f"verification <= {VERIFY_SHARE_TARGET:.0%} of a first gather"
    return result


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
