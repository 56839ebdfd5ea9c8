"""``attnrmt provenance``: a run's provenance summed over every stored cell (commits,
versions, hosts, attempts, peak memory), read from the sweeps' cell tables. Read-only.
Cost: O(stored cells) over the provenance columns only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.contract import PROVENANCE_ABSENT, PROVENANCE_FIELDS


def commit_label(environment: Mapping[str, Any] | None) -> str:
    """``<commit[:12]>``, ``<commit[:12]>-dirty``, ``no checkout`` or ``unknown`` (None)."""
    if environment is None:
        return "unknown"
    commit = str(environment.get("git_commit", ""))
    if not commit:
        return "no checkout"
    return commit[:12] + ("-dirty" if environment.get("git_dirty") else "")


#: Environment keys the summary counts cells by (besides the commit).
SUMMARY_VERSIONS: tuple[str, ...] = ("package_version", "python", "numpy", "scipy", "blas")


class _Tally:
    """Streaming counts and ranges of one run's provenance columns (O(distinct values))."""

    def __init__(self) -> None:
        self.cells = 0
        self.by_environment: dict[int, int] = {}
        self.by_attempt: dict[int, int] = {}
        self.wall = [np.inf, -np.inf, 0.0, 0]  # min, max, sum, count
        self.memory = [np.inf, -np.inf]

    def add(self, *columns: np.ndarray) -> None:
        """Count one chunk of cells (columns in :data:`PROVENANCE_FIELDS` order, then wall)."""
        environment_ids, memory, attempts, wall_seconds = columns
        self.cells += int(environment_ids.size)
        for counts, column in ((self.by_environment, environment_ids), (self.by_attempt, attempts)):
            values, n = np.unique(column, return_counts=True)
            for value, count in zip(values.tolist(), n.tolist(), strict=True):
                counts[value] = counts.get(value, 0) + count
        wall = wall_seconds[np.isfinite(wall_seconds)]
        if wall.size:
            low, high, total, cells = self.wall
            chunk = float(wall.min()), float(wall.max()), float(wall.sum()), int(wall.size)
            self.wall = [
                min(low, chunk[0]),
                max(high, chunk[1]),
                total + chunk[2],
                cells + chunk[3],
            ]
        known = memory[memory >= 0]
        if known.size:
            low, high = self.memory
            self.memory = [min(low, int(known.min())), max(high, int(known.max()))]


def _tally_sweep(sweep_dir: Path, tally: _Tally, environments: dict[int, str]) -> int:
    """Add the current rows of a sweep's cell table to ``tally``, a chunk at a time; their count."""
    from attnrmt.sweep.store.cell_table.reader import iter_current_rows, table_environments

    environments.update(table_environments(sweep_dir))
    before = tally.cells
    names = (*PROVENANCE_FIELDS, "compute_seconds")
    for columns in iter_current_rows(sweep_dir, names):
        tally.add(*(columns[name] for name in names))
    return tally.cells - before


def run_provenance(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Provenance of every stored cell of ``results/<run>`` (docs/data-contract.md,
    "Provenance"), summarised. O(cells) time, O(one chunk) memory."""
    root = Path(run_dir)
    tally = _Tally()
    environments: dict[int, str] = {}
    sweeps = (
        {
            path.name: _tally_sweep(path, tally, environments)
            for path in sorted(root.iterdir())
            if path.is_dir()
        }
        if root.is_dir()
        else {}
    )
    decoded = {env: json.loads(text) for env, text in environments.items()}

    def count_by(label: Any) -> dict[str, int]:
        counts: dict[str, int] = {}
        for env, n in tally.by_environment.items():
            key = str(label(decoded.get(env)))
            counts[key] = counts.get(key, 0) + n
        return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))

    wall_min, wall_max, wall_sum, wall_n = tally.wall
    return {
        "run_dir": str(root),
        "cells": tally.cells,
        "sweeps": {name: n for name, n in sweeps.items() if n},
        "commits": count_by(commit_label),
        "versions": {
            key: count_by(lambda env, key=key: "unknown" if env is None else env[key])
            for key in SUMMARY_VERSIONS
        },
        "hosts": count_by(lambda env: "unknown" if env is None else env["host"]),
        "attempts": {
            ("unknown" if attempt == PROVENANCE_ABSENT["attempt"] else str(attempt)): n
            for attempt, n in sorted(tally.by_attempt.items())
        },
        "wall_seconds": None
        if wall_n == 0
        else {"min": wall_min, "max": wall_max, "mean": wall_sum / wall_n, "total": wall_sum},
        "peak_memory_bytes": None
        if not np.isfinite(tally.memory[0])
        else {"min": int(tally.memory[0]), "max": int(tally.memory[1])},
    }


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{value} ({n:,})" for value, n in counts.items())


def provenance_lines(summary: Mapping[str, Any]) -> list[str]:
    """Text of :func:`run_provenance`: e.g. "3,104 cells from commit abc123, 12 from ..."."""
    sweeps = ", ".join(f"{name}: {n:,}" for name, n in summary["sweeps"].items())
    lines = [
        f"{summary['run_dir']}: {summary['cells']:,} cells" + (f" ({sweeps})" if sweeps else "")
    ]
    if not summary["cells"]:
        return [*lines, "no stored cells (has the run gathered any block?)"]
    commits = [f"{n:,} from {label}" for label, n in summary["commits"].items()]
    lines.append(
        commits[0].replace(" from ", " cells from commit ", 1)
        + "".join(f", {text}" for text in commits[1:])
    )
    lines += [f"{key}: {_counts(counts)}" for key, counts in summary["versions"].items()]
    lines.append(f"hosts: {_counts(summary['hosts'])}")
    wall = summary["wall_seconds"]
    if wall is not None:
        lines.append(
            f"wall time per cell: {wall['min']:.3g} s to {wall['max']:.3g} s "
            f"(mean {wall['mean']:.3g} s, total {wall['total']:.4g} s)"
        )
    memory = summary["peak_memory_bytes"]
    if memory is not None:
        lines.append(
            f"peak memory of the worker process: {memory['min'] / 2**20:.0f} MiB "
            f"to {memory['max'] / 2**20:.0f} MiB"
        )
    lines.append(f"attempts: {_counts(summary['attempts'])}")
    if "unknown" in summary["commits"]:
        lines.append(
            f"unknown: {summary['commits']['unknown']:,} cells stored before "
            "provenance was recorded"
        )
    return lines
