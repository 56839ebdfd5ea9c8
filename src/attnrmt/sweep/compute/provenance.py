"""What a worker measures for each cell's provenance (docs/data-contract.md, "Provenance";
stored by :mod:`attnrmt.sweep.store.provenance`): the process's environment (cached),
its peak memory and the block attempt. One ``git`` call per process, O(1) per cell."""

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
    """``(commit, dirty)`` of the checkout holding ``package_dir`` (``("", False)`` outside
    one); dirty: a tracked file modified or an untracked one under ``package_dir``."""
    directory = Path(package_dir)
    commit = _git(directory, "rev-parse", "HEAD")
    if not commit:
        return "", False
    tracked = _git(directory, "status", "--porcelain", "--untracked-files=no")
    untracked = _git(directory, "status", "--porcelain", "--untracked-files=normal", "--", ".")
    return commit, bool(tracked) or bool(untracked)


def blas_description() -> str:
    """BLAS libraries numpy and scipy loaded (threadpoolctl), ``"; "``-joined; ``""`` for none."""
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
    """Canonical JSON of this process's environment (version, git commit and dirty flag,
    Python, numpy, scipy, BLAS, host), computed once."""
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
    """Peak resident memory of this process in bytes (``ru_maxrss``: KiB on Linux)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def worker_provenance() -> dict[str, Any]:
    """Provenance a worker adds to a cell's record right after computing it."""
    return {ENVIRONMENT_KEY: process_environment(), "peak_memory_bytes": peak_memory_bytes()}


def block_attempt(failure_record: str | os.PathLike[str]) -> int:
    """Attempt number of a block job about to run: 1, or one more than the failed attempt its
    ``failures/<block>.json`` records."""
    try:
        payload = json.loads(Path(failure_record).read_text())
    except (OSError, ValueError):
        return 1
    return int(payload.get("attempt", 1)) + 1
