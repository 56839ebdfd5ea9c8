"""The one count of a sweep's cells: done, failed, pending (``attnrmt plan``,
``attnrmt status``, the progress line and the end summary all count with it).

A planned cell is **done** when a verified fragment of its sweep holds it: its own block's
fragment, a fragment of an earlier plan's block or a salvage file (every file's cell ids
read and verified, cached per file; a damaged file is moved aside and its cells are not
done). It is **failed** when a failure record of the sweep names it and it
is not done, and **pending** otherwise. Cost: O(fragment files) ``stat`` calls plus one read
of each fragment's ids (cached per file), and O(planned cells) set look-ups.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attnrmt.sweep.run.failures import count_failures_by_cause
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
    """Every complete fragment of a sweep, one entry per block (a ``cache/`` copy of a
    fragment in ``fragments/`` once, with its ``fragments/`` path).

    O(files) ``stat`` calls.
    """
    planned = set(planned_blocks)
    seen: set[str] = set()
    found: list[FragmentFile] = []
    ordered = sorted(
        fragments.fragment_paths(sweep_dir),
        key=lambda path: (path.parent.name != fragments.FRAGMENTS_DIRNAME, str(path)),
    )
    for path in ordered:
        twin = fragments.twin_of(path) is not None  # a block's fragment or its cache copy
        identity = path.name if twin else str(path)
        if identity in seen:
            continue
        try:
            stat = path.stat()
        except OSError:  # replaced or removed since the listing
            continue
        seen.add(identity)
        found.append(FragmentFile(path, path.stem, stat.st_mtime, twin and path.stem in planned))
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


__all__ = [
    "FragmentFile",
    "SweepCount",
    "count_sweep",
    "done_cell_keys",
    "scan_fragment_files",
]
