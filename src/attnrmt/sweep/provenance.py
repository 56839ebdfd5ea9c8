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
            ["git", "-C", str(package_dir), *args], capture_output=True, text=True,
            timeout=GIT_TIMEOUT_SECONDS, check=False,
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
    untracked = _git(directory, "status", "--porcelain", "--untracked-files=normal", "--",
                     ".")
    return commit, bool(tracked) or bool(untracked)


def blas_description() -> str:
    """BLAS libraries numpy and scipy loaded, as ``"<internal_api> <version>"`` (threadpoolctl).

    Several distinct libraries are joined with ``"; "``; ``""`` when none is found.
    """
    import numpy  # noqa: F401  (load the BLAS that threadpoolctl should see)
    import scipy.linalg  # noqa: F401
    from threadpoolctl import threadpool_info

    found = sorted({
        f"{info.get('internal_api', '?')} {info.get('version') or '?'}"
        for info in threadpool_info() if info.get("user_api") == "blas"
    })
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
