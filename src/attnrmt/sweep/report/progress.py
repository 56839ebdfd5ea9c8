"""The one count of a sweep's cells (``attnrmt plan``, ``attnrmt status``, the progress line,
the end summary): **done** when a verified fragment of the sweep holds the cell (the one
index of finished cells, :func:`attnrmt.sweep.store.fragments.finished_keys`), **failed**
when a standing failure record names it, **pending** otherwise. O(fragment files) ``stat``
calls, each file's ids read once per process, O(planned cells)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnrmt.sweep.compute.failures import count_failures_by_cause
from attnrmt.sweep.store import fragments
from attnrmt.sweep.store.failures import unresolved_failures


@dataclass(frozen=True)
class FragmentFile:
    """One fragment file on disk: where, which block name, when it finished."""

    path: Path
    block: str
    mtime: float
    planned: bool
    """True when ``block`` is a block key of the current plan (its cells are known)."""


def scan_fragment_files(sweep_dir: Path, planned_blocks: Iterable[str]) -> list[FragmentFile]:
    """Every complete fragment of a sweep, a block's ``cache/`` copy only without its
    ``fragments/`` file (:func:`attnrmt.sweep.store.fragments.fragment_files`). O(files)."""
    planned = set(planned_blocks)
    found = []
    for name, signature in fragments.fragment_files(sweep_dir):
        path = Path(name)
        twin = fragments.twin_of(path) is not None  # a block's fragment or its cache copy
        found.append(
            FragmentFile(path, path.stem, signature[3] / 1e9, twin and path.stem in planned)
        )
    return found


def done_cell_keys(sweep_plan: Any, sweep_dir: Path) -> set[str]:
    """Keys of the sweep's planned cells its fragments hold (the one index of finished
    cells, :func:`attnrmt.sweep.store.fragments.finished_keys`)."""
    return fragments.finished_keys(sweep_plan.cell_keys(), sweep_dir)


@dataclass(frozen=True)
class SweepCount:
    """What one sweep's files say: its fragment files, done and failed cell keys."""

    sweep_plan: Any
    files: list[FragmentFile]
    done: set[str]
    failed: set[str]
    failed_by_cause: dict[str, int]
    failed_records: list[dict[str, Any]]
    """The standing failure records of the failed cells (store/failures.py)."""

    @property
    def cells(self) -> int:
        """Planned cells of the sweep."""
        return int(self.sweep_plan.n_cells)

    @property
    def pending(self) -> int:
        """Planned cells neither done nor failed."""
        return self.cells - len(self.done) - len(self.failed)


def count_sweep(sweep_plan: Any, sweep_dir: str | os.PathLike[str]) -> SweepCount:
    """Done, failed and pending cells of one planned sweep from its files (module docstring)."""
    sweep_dir = Path(sweep_dir)
    files = scan_fragment_files(sweep_dir, (block.key for block in sweep_plan.blocks))
    done = done_cell_keys(sweep_plan, sweep_dir)
    planned_keys = set(sweep_plan.cell_keys())
    standing = [
        cell
        for cell in unresolved_failures(sweep_dir, done)
        if cell.get("key") in planned_keys and cell.get("key") not in done
    ]
    failed = {str(cell.get("key")) for cell in standing}
    return SweepCount(sweep_plan, files, done, failed, count_failures_by_cause(standing), standing)


__all__ = ["FragmentFile", "SweepCount", "count_sweep", "done_cell_keys", "scan_fragment_files"]
