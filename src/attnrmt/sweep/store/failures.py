"""Failure records ``<sweep>/failures/<block>.json``: what the last attempt of a block left
when some of its cells failed (``docs/data-contract.md``, "Failure causes"), removed when
the block succeeds; the run-start marker limits :func:`run_failures_since` to this run.
O(records) file reads."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attnrmt.sweep.store.atomic import write_json_atomically
from attnrmt.sweep.store.fragments import finished_keys
from attnrmt.sweep.store.layout import FAILURES_DIRNAME, RunLayout, SweepLayout


def failure_record_path(fragment_path: str | os.PathLike[str]) -> Path:
    """``<sweep>/failures/<block>.json`` of the block whose fragment is ``fragment_path``."""
    return SweepLayout.of_fragment(fragment_path).failure_record(Path(fragment_path).stem)


def record_block_failures(
    fragment_path: str | os.PathLike[str],
    failed_cells: Sequence[Mapping[str, Any]],
    attempt: int = 1,
    mem_mb: int | None = None,
) -> Path:
    """Write what failed in a block, atomically, over an earlier record: per cell ``{"key",
    "seed", "params", "error", "cause"}``, plus the block, time, ``attempt`` and ``mem_mb``
    granted (None: unknown). O(cells)."""
    path = failure_record_path(fragment_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "block": Path(fragment_path).stem,
        "attempt": int(attempt),
        "mem_mb": None if mem_mb is None else int(mem_mb),
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
    """Every failed cell recorded under ``sweep_dir`` with its ``block``, ``time`` and
    ``cause`` (``other`` in records older than causes), by block and key. O(records)."""
    directory = SweepLayout(sweep_dir).failures_dir
    failed: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        for cell in record.get("cells", []):
            failed.append(
                {"cause": "other", **cell, "block": record.get("block"), "time": record.get("time")}
            )
    return sorted(failed, key=lambda cell: (str(cell["block"]), str(cell.get("key"))))


def unresolved_failures(
    sweep_dir: str | os.PathLike[str], done: Iterable[str] | None = None
) -> list[dict[str, Any]]:
    """Recorded failures of ``sweep_dir`` whose cell is not finished since: ``done`` keys, or
    by default the one index of finished cells. One dict per failed cell (``key``, ``seed``,
    ``params``, ``error``, ``cause``, ``block``, ``time``). O(records + fragments)."""
    sweep = Path(sweep_dir)
    failed = read_failures(sweep)
    if not failed:  # the common case: no need to read every fragment's cell keys
        return []
    keys = [str(c["key"]) for c in failed if isinstance(c.get("key"), str) and len(c["key"]) == 64]
    finished = set(done) if done is not None else finished_keys(keys, sweep)
    return [cell for cell in failed if cell.get("key") not in finished]


#: File name of the marker the main Snakemake process touches when a run starts: older
#: failure records do not count against ``execution.max_failures``.
RUN_STARTED_MARKER = RunLayout(".").started_marker.name


def mark_run_started(run_dir: str | os.PathLike[str]) -> Path:
    """Touch ``<run_dir>/.run-started`` (its mtime is the run's start). O(1)."""
    marker = RunLayout(run_dir).started_marker
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    return marker


def run_failures_since(
    run_dir: str | os.PathLike[str],
    since: float | None,
    left_out: str | os.PathLike[str] | None = None,
) -> list[dict[str, Any]]:
    """Failed cells in every ``<run_dir>/<sweep>/failures/<block>.json`` written at or
    after ``since`` (Unix seconds; ``None``: all), but the record ``left_out``. Reads
    only the failures folders: O(failure records), never a fragment."""
    failed: list[dict[str, Any]] = []
    skipped = None if left_out is None else Path(left_out).resolve()
    for path in Path(run_dir).glob(f"*/{FAILURES_DIRNAME}/*.json"):
        try:
            if skipped is not None and path.resolve() == skipped:
                continue
            if since is not None and path.stat().st_mtime < since:
                continue
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # removed since listed (its block succeeded), or being replaced
        failed.extend({"cause": "other", **cell} for cell in record.get("cells", []))
    return failed
