"""Provenance of each cell: what code, environment and resources produced it.

Metadata only: nothing here enters a cell's identity (its key and seed) or changes a
number. ``docs/data-contract.md``, "Provenance" documents the stored names.

Per cell, a record (``CellResult.to_dict()`` plus these keys) carries

- ``environment``: canonical JSON of the worker process's environment
  (:func:`process_environment`: package version, git commit and dirty flag, Python,
  numpy, scipy, BLAS, host), computed once per process and cached;
- ``peak_memory_bytes``: the worker process's peak resident memory by the end of the
  cell (``resource.getrusage(RUSAGE_SELF).ru_maxrss``; a process-wide high-water mark);
- ``attempt``: the block-job attempt that computed the cell (1 = first; a block whose
  previous attempt failed counts one more, from its failure record);
- wall time: the existing ``compute_seconds``.

Fragments store the environment once per distinct value: ``environments`` (one JSON
string per distinct environment) and ``environment_id`` per cell (:func:`environment_id`,
64 bits of the JSON's sha256; ``0`` = unknown). Cells computed before provenance existed
get :data:`~attnrmt.contract.PROVENANCE_ABSENT`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import resource
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.contract import PROVENANCE_ABSENT, PROVENANCE_FIELDS

#: Record key of the environment JSON (stored deduplicated: :data:`ENVIRONMENTS_MEMBER`).
ENVIRONMENT_KEY = "environment"
#: Fragment member and segment/dataset attribute holding the distinct environments.
ENVIRONMENTS_MEMBER = "environments"
#: Record keys that are provenance, not results (never part of a cell's identity).
PROVENANCE_KEYS: frozenset[str] = frozenset({ENVIRONMENT_KEY, *PROVENANCE_FIELDS})
#: Seconds a git call may take before the commit is reported unknown.
GIT_TIMEOUT_SECONDS = 10


def _git(package_dir: Path, *args: str) -> str | None:
    """Output of ``git -C package_dir ARGS`` (stripped), or None when git fails."""
    try:
        done = subprocess.run(
            ["git", "-C", str(package_dir), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def git_state(package_dir: str | os.PathLike[str]) -> tuple[str, bool]:
    """``(commit, dirty)`` of the checkout holding ``package_dir``; ``("", False)`` outside one.

    Dirty: a tracked file of the checkout is modified, or an untracked (not ignored) file
    lies under ``package_dir``. Three ``git`` calls; call it once per process
    (:func:`process_environment` caches it).
    """
    directory = Path(package_dir)
    commit = _git(directory, "rev-parse", "HEAD")
    if not commit:
        return "", False
    tracked = _git(directory, "status", "--porcelain", "--untracked-files=no")
    untracked = _git(directory, "status", "--porcelain", "--untracked-files=normal", "--", ".")
    return commit, bool(tracked) or bool(untracked)


def blas_description() -> str:
    """BLAS libraries numpy and scipy loaded, as ``"<internal_api> <version>"`` (threadpoolctl).

    Several distinct libraries are joined with ``"; "``; ``""`` when none is found.
    """
    import numpy  # noqa: F401  (load the BLAS that threadpoolctl should see)
    import scipy.linalg  # noqa: F401
    from threadpoolctl import threadpool_info

    found = sorted(
        {
            f"{info.get('internal_api', '?')} {info.get('version') or '?'}"
            for info in threadpool_info()
            if info.get("user_api") == "blas"
        }
    )
    return "; ".join(found)


@functools.lru_cache(maxsize=1)
def process_environment() -> str:
    """Canonical JSON (sorted keys) of this process's environment; computed once, cached.

    Keys: ``package_version``, ``git_commit`` (``""`` when not run from a checkout),
    ``git_dirty``, ``python``, ``numpy``, ``scipy``, ``blas``, ``host``. O(1) after the
    first call (three ``git`` calls and a threadpoolctl scan the first time).
    """
    import scipy

    import attnrmt

    commit, dirty = git_state(Path(attnrmt.__file__).resolve().parent)
    environment = {
        "package_version": attnrmt.__version__,
        "git_commit": commit,
        "git_dirty": dirty,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "scipy": scipy.__version__,
        "blas": blas_description(),
        "host": socket.gethostname(),
    }
    return json.dumps(environment, sort_keys=True, separators=(",", ":"))


def environment_id(environment_json: str) -> int:
    """64-bit id of an environment JSON: the first 8 bytes of its sha256 (signed, != 0).

    ``""`` (unknown) maps to ``0``, :data:`~attnrmt.contract.PROVENANCE_ABSENT`'s value.
    """
    if not environment_json:
        return int(PROVENANCE_ABSENT["environment_id"])
    digest = hashlib.sha256(environment_json.encode()).digest()
    return int.from_bytes(digest[:8], "little", signed=True) or 1


def peak_memory_bytes() -> int:
    """Peak resident memory of this process so far, in bytes (``ru_maxrss``).

    Linux reports kilobytes, macOS bytes.
    """
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def worker_provenance() -> dict[str, Any]:
    """Provenance a worker adds to a cell's record right after computing it."""
    return {ENVIRONMENT_KEY: process_environment(), "peak_memory_bytes": peak_memory_bytes()}


def with_attempt(record: Mapping[str, Any], attempt: int) -> dict[str, Any]:
    """``record`` with its ``attempt`` set (a new dict; the arrays are shared)."""
    return {**record, "attempt": int(attempt)}


def block_attempt(failure_record: str | os.PathLike[str]) -> int:
    """Attempt number of a block job about to run: 1, or one more than its failed attempt.

    ``failure_record`` is the block's ``failures/<block>.json``
    (:func:`attnrmt.sweep.failures.failure_record_path`): present only when the last
    attempt failed; it holds that attempt's number (records written before provenance
    existed count as attempt 1).
    """
    try:
        payload = json.loads(Path(failure_record).read_text())
    except (OSError, ValueError):
        return 1
    return int(payload.get("attempt", 1)) + 1


# --------------------------------------------------------------------------- fragments


def encode_provenance(records: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """Fragment members of the records' provenance (see the module docstring).

    ``environments`` ``(m,)`` str (distinct JSON, first-seen order) and, per cell,
    :data:`~attnrmt.contract.PROVENANCE_FIELDS` ``(n,)`` int64; missing keys (cells
    from old fragments) get :data:`~attnrmt.contract.PROVENANCE_ABSENT`. O(n).
    """
    texts = [str(record.get(ENVIRONMENT_KEY, "")) for record in records]
    distinct = [text for text in dict.fromkeys(texts) if text]
    ids = {text: environment_id(text) for text in dict.fromkeys(texts)}
    members = {
        ENVIRONMENTS_MEMBER: np.asarray(distinct, dtype=np.str_).reshape(len(distinct)),
        "environment_id": np.array([ids[text] for text in texts], dtype=np.int64),
    }
    for name in PROVENANCE_FIELDS:
        if name != "environment_id":
            members[name] = np.array(
                [int(record.get(name, PROVENANCE_ABSENT[name])) for record in records],
                dtype=np.int64,
            )
    return members


def environments_of(arrays: Mapping[str, np.ndarray]) -> dict[int, str]:
    """``environment_id -> environment JSON`` of a fragment's members (``{}`` if none)."""
    if ENVIRONMENTS_MEMBER not in arrays:
        return {}
    return {environment_id(str(text)): str(text) for text in arrays[ENVIRONMENTS_MEMBER]}


def decode_provenance(arrays: Mapping[str, np.ndarray], n_cells: int) -> list[dict[str, Any]]:
    """Inverse of :func:`encode_provenance`: the known provenance keys of each cell.

    Unknown values (:data:`~attnrmt.contract.PROVENANCE_ABSENT`, or a fragment written
    before provenance) are left out, so a record without provenance round-trips without
    it. O(n).
    """
    known: list[dict[str, Any]] = [{} for _ in range(n_cells)]
    environments = environments_of(arrays)
    for name in PROVENANCE_FIELDS:
        if name not in arrays:
            continue
        for index, value in enumerate(np.asarray(arrays[name]).tolist()):
            if value == PROVENANCE_ABSENT[name]:
                continue
            if name == "environment_id":
                known[index][ENVIRONMENT_KEY] = environments.get(value, "")
            else:
                known[index][name] = int(value)
    return known


def absent_column(name: str, n_cells: int) -> np.ndarray:
    """``(n_cells,)`` int64 fill of a provenance field for cells without provenance."""
    return np.full(n_cells, PROVENANCE_ABSENT[name], dtype=np.int64)


# --------------------------------------------------------------------------- summary


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

    def add(
        self,
        environment_ids: np.ndarray,
        memory: np.ndarray,
        attempts: np.ndarray,
        wall_seconds: np.ndarray,
    ) -> None:
        """Count one chunk of cells (columns in :data:`PROVENANCE_FIELDS` order, then wall)."""
        self.cells += int(environment_ids.size)
        for counts, column in ((self.by_environment, environment_ids), (self.by_attempt, attempts)):
            values, n = np.unique(column, return_counts=True)
            for value, count in zip(values.tolist(), n.tolist(), strict=True):
                counts[value] = counts.get(value, 0) + count
        wall = wall_seconds[np.isfinite(wall_seconds)]
        if wall.size:
            self.wall = [
                min(self.wall[0], float(wall.min())),
                max(self.wall[1], float(wall.max())),
                self.wall[2] + float(wall.sum()),
                self.wall[3] + int(wall.size),
            ]
        known = memory[memory >= 0]
        if known.size:
            self.memory = [
                min(self.memory[0], int(known.min())),
                max(self.memory[1], int(known.max())),
            ]


def _segment_column(
    group: Any, members: set[str], name: str, rows: slice, take: np.ndarray
) -> np.ndarray:
    """Rows ``take`` of ``group[name][rows]``; the absent fill where the segment lacks it."""
    if name in members:
        return np.asarray(group[name][rows])[take]
    if name in PROVENANCE_FIELDS:
        return absent_column(name, take.size)
    return np.full(take.size, np.nan)


def _tally_sweep(sweep_dir: Path, tally: _Tally, environments: dict[int, str]) -> int:
    """Add the cells of a sweep's current table version to ``tally``; their count.

    Reads the grid index (8 bytes per grid point) and the provenance columns of the rows
    it uses, one chunk of :data:`~attnrmt.sweep.table_layout.ROW_CHUNK` rows at a time.
    """
    import zarr

    from attnrmt.sweep.table_layout import (
        MANIFEST_NAME,
        ROW_ARRAY,
        ROW_CHUNK,
        SEGMENTS_DIRNAME,
        read_manifest,
        table_dir,
    )

    directory = table_dir(sweep_dir)
    manifest = read_manifest(directory / MANIFEST_NAME)
    if manifest is None:
        return 0
    rows = np.asarray(zarr.open_group(str(directory / manifest["grid"]), mode="r")[ROW_ARRAY][:])
    used = np.zeros(int(manifest["rows"]), dtype=bool)
    used[rows[rows >= 0]] = True
    before = tally.cells
    start = 0
    for segment in manifest["segments"]:
        segment_dir = directory / SEGMENTS_DIRNAME / segment["name"]
        group = zarr.open_group(str(segment_dir), mode="r")
        environments.update(
            {
                int(env): str(text)
                for env, text in dict(group.attrs).get(ENVIRONMENTS_MEMBER, {}).items()
            }
        )
        n_rows = int(segment["rows"])
        members = {path.name for path in segment_dir.iterdir() if (path / "zarr.json").is_file()}
        for lo in range(0, n_rows, ROW_CHUNK):
            hi = min(lo + ROW_CHUNK, n_rows)
            take = np.flatnonzero(used[start + lo : start + hi])
            if take.size:
                tally.add(
                    *(
                        _segment_column(group, members, name, slice(lo, hi), take)
                        for name in (*PROVENANCE_FIELDS, "compute_seconds")
                    )
                )
        start += n_rows
    return tally.cells - before


def run_provenance(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Provenance of every stored cell of a run (``results/<run>``), summarised.

    Counts cells by commit (:func:`commit_label`), by each of :data:`SUMMARY_VERSIONS`,
    by host and by attempt; ranges of wall time (``compute_seconds``) and peak memory.
    Cells stored before provenance was recorded count as ``unknown``. Reads each sweep's
    current cell-table version (``docs/data-contract.md``, "Provenance"). Memory:
    O(grid points + one chunk); time O(cells).
    """
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
