"""Failed cells: what the last attempt of a block left in ``<sweep>/failures/`` (read side).

A block whose cells fail after Dask's retries records them
(:func:`record_block_failures`: cell key, seed, simulate parameters,
error) and fails its Snakemake job; the record is removed when the block later succeeds.
This module answers the questions a user asks afterwards:

- which failures still stand (:func:`unresolved_failures`, listed by ``attnrmt plan``);
- which blocks to leave out when the config sets ``skip_failed: true``
  (:func:`failed_blocks`), so that everything that did finish is gathered, analysed and
  reported;
- the table of failed cells in the report (:func:`failed_cells_table`, rule
  ``failed_cells``).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from attnrmt.sweep.fragments import finished_cell_keys, write_json_atomically

FAILURES_DIRNAME = "failures"

FAILED_CELLS_COLUMNS = (
    "sweep",
    "block",
    "cell_key",
    "d",
    "delta",
    "gamma",
    "T",
    "positional",
    "weights",
    "snr",
    "centered",
    "replicate",
    "error",
    "time",
)


# ------------------------------------------------------------------ write side


def failure_record_path(fragment_path: str | os.PathLike[str]) -> Path:
    """``<sweep>/failures/<block>.json`` of the block whose fragment is ``fragment_path``."""
    fragment = Path(fragment_path)
    return fragment.parent.parent / FAILURES_DIRNAME / f"{fragment.stem}.json"


def record_block_failures(
    fragment_path: str | os.PathLike[str], failed_cells: Sequence[Mapping[str, Any]],
    attempt: int = 1,
) -> Path:
    """Write what failed in a block (atomically), replacing an earlier record.

    ``failed_cells``: one mapping per failed cell, ``{"key", "seed", "params", "error"}``
    (JSON-serialisable). The record also names the block, the time and the number of the
    attempt (:func:`attnrmt.sweep.provenance.block_attempt` reads it back).
    """
    path = failure_record_path(fragment_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "block": Path(fragment_path).stem,
        "attempt": int(attempt),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cells": [dict(cell) for cell in failed_cells],
    }
    write_json_atomically(path, payload)
    return path




def clear_block_failures(fragment_path: str | os.PathLike[str]) -> None:
    """Remove a block's failure record (it has now succeeded)."""
    with contextlib.suppress(FileNotFoundError):
        failure_record_path(fragment_path).unlink()


def read_failures(sweep_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every failed cell recorded under ``sweep_dir``, each with its ``block`` and ``time``.

    Sorted by block, then cell key. Unreadable records are skipped.
    """
    directory = Path(sweep_dir) / FAILURES_DIRNAME
    failed: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for cell in record.get("cells", []):
            failed.append({**cell, "block": record.get("block"), "time": record.get("time")})
    return sorted(failed, key=lambda cell: (str(cell["block"]), str(cell.get("key"))))


# ------------------------------------------------------------------ read side
"""Columns of ``failed_cells.csv``: where the cell is, what it is, and how it failed."""


def unresolved_failures(
    sweep_dir: str | os.PathLike[str], done: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """Recorded failures of a sweep whose cell has not been finished since.

    Parameters
    ----------
    sweep_dir : path
        ``results/<run>/<sweep>``.
    done : iterable of str, optional
        Keys of finished cells (default: read from the sweep's fragments).

    Returns
    -------
    list of dict
        ``{"key", "seed", "params", "error", "block", "time"}`` per failed cell.
    """
    sweep = Path(sweep_dir)
    failed = read_failures(sweep)
    if not failed:  # the common case: no need to read every fragment's cell keys
        return []
    finished = set(done) if done is not None else set(finished_cell_keys(sweep))
    return [cell for cell in failed if cell.get("key") not in finished]


def failed_blocks(run_plan: Any, run_dir: str | os.PathLike[str]) -> dict[str, set[str]]:
    """Per sweep, the keys of planned blocks with a standing failure record."""
    blocks: dict[str, set[str]] = {}
    for name, sweep in run_plan.sweeps.items():
        planned = {block.key for block in sweep.blocks}
        failed = {str(cell["block"]) for cell in unresolved_failures(Path(run_dir) / name)}
        blocks[name] = failed & planned
    return blocks


def failed_cells_table(run_plan: Any, run_dir: str | os.PathLike[str]) -> pd.DataFrame:
    """One row per planned cell whose last attempt failed (:data:`FAILED_CELLS_COLUMNS`).

    Cells are described by the plan (model *names*, replicate), so that the table reads
    like the config; failures of cells the config no longer holds are left out.
    """
    rows = []
    for name, sweep in run_plan.sweeps.items():
        cells = {cell.key: cell for cell in sweep.cells}
        for failure in unresolved_failures(Path(run_dir) / name):
            cell = cells.get(failure.get("key"))
            if cell is None:
                continue
            rows.append(
                {
                    "sweep": name,
                    "block": failure["block"],
                    "cell_key": cell.key,
                    **{axis: getattr(cell, axis) for axis in FAILED_CELLS_COLUMNS[3:12]},
                    "error": " ".join(str(failure.get("error", "")).split()),
                    "time": failure.get("time"),
                }
            )
    return pd.DataFrame(rows, columns=list(FAILED_CELLS_COLUMNS))


def write_failed_cells_table(
    run_plan: Any, run_dir: str | os.PathLike[str], output_path: str | os.PathLike[str]
) -> Path:
    """Write :func:`failed_cells_table` as CSV (rule ``failed_cells``); header only when
    nothing failed."""
    target = Path(output_path)
    target.parent.mkdir(parents=True, exist_ok=True)
    failed_cells_table(run_plan, run_dir).to_csv(target, index=False)
    return target


def describe_skipped(skipped: Mapping[str, set[str]]) -> str:
    """One line naming the blocks a ``skip_failed`` run leaves out (empty when none)."""
    parts = [f"{sweep}: {len(keys)}" for sweep, keys in skipped.items() if keys]
    if not parts:
        return ""
    return (
        "attnrmt: skip_failed: leaving out blocks whose last attempt failed "
        f"({', '.join(parts)}); see failed_cells.csv or `attnrmt plan`"
    )


__all__ = [
    "FAILED_CELLS_COLUMNS",
    "describe_skipped",
    "failed_blocks",
    "failed_cells_table",
    "unresolved_failures",
    "write_failed_cells_table",
]
