"""What a worker measures about itself for each cell's provenance: the process's
environment (package version, git commit and dirty flag, Python, numpy, scipy, BLAS, host;
computed once per process and cached), its peak resident memory, and the block attempt.
How it is stored: :mod:`attnrmt.sweep.store.provenance`; ``docs/data-contract.md``,
"Provenance". Cost: one ``git`` call per process (cached), O(1) per cell.
"""

from __future__ import annotations

import functools
import json
import os
import platform
import resource
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.sweep.store.provenance import ENVIRONMENT_KEY

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


def peak_memory_bytes() -> int:
    """Peak resident memory of this process so far, in bytes (``ru_maxrss``).

    Linux reports kilobytes, macOS bytes.
    """
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def worker_provenance() -> dict[str, Any]:
    """Provenance a worker adds to a cell's record right after computing it."""
    return {ENVIRONMENT_KEY: process_environment(), "peak_memory_bytes": peak_memory_bytes()}


def block_attempt(failure_record: str | os.PathLike[str]) -> int:
    """Attempt number of a block job about to run: 1, or one more than its failed attempt.

    ``failure_record`` is the block's ``failures/<block>.json``
    (:func:`attnrmt.sweep.run.failures.failure_record_path`): present only when the last
    attempt failed; it holds that attempt's number (records written before provenance
    existed count as attempt 1).
    """
    try:
        payload = json.loads(Path(failure_record).read_text())
    except (OSError, ValueError):
        return 1
    return int(payload.get("attempt", 1)) + 1


__all__ = [
    "block_attempt",
    "git_state",
    "peak_memory_bytes",
    "process_environment",
    "worker_provenance",
]
