"""Stale Snakemake locks: a SIGKILLed Snakemake leaves ``.snakemake/locks/`` behind, and
the rerun then fails with ``LockException`` until ``--unlock``. Remove them when it is
safe, that is, when no live Snakemake of this workflow works in the directory.

Liveness is proven by the kernel, not by pids: every Snakemake process of this workflow
holds a POSIX lock (``fcntl.lockf``, which NFS honours across hosts) on its own token file
in ``.snakemake/attnrmt-live/`` from the moment it reads the Snakefile until it exits,
however it exits (SIGKILL included: the kernel drops the lock). Snakemake takes its
directory lock later, so a live holder of Snakemake's lock always holds a token. If
lock files exist and no token is held, their owner is dead and they are removed (what
``snakemake --unlock`` does); if any token is held, nothing is touched and Snakemake's own
``LockException`` stands. A Snakemake of *another* workflow in the same directory holds
no token: do not share a working directory between workflows.

Cost: O(tokens) file opens per Snakemake start; tokens of dead processes are deleted at
every start, so there are about as many as live Snakemake processes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import socket
from pathlib import Path
from typing import IO

SNAKEMAKE_DIRNAME = ".snakemake"
LOCKS_DIRNAME = "locks"
LIVE_DIRNAME = "attnrmt-live"

_held_token: IO[str] | None = None


def _token_is_held(path: Path) -> bool:
    """Whether another live process holds the POSIX lock on a token file."""
    try:
        handle = open(path, "a")
    except OSError:
        return False
    try:
        fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            return True
        raise
    finally:
        handle.close()  # releases the probe's lock
    return False


def remove_stale_locks(workdir: str | os.PathLike[str] = ".") -> bool:
    """Remove Snakemake's directory locks if no live Snakemake of this workflow holds a
    token (:mod:`attnrmt.sweep.runlock`); return whether locks were removed."""
    snakemake_dir = Path(workdir) / SNAKEMAKE_DIRNAME
    locks = snakemake_dir / LOCKS_DIRNAME
    if not locks.is_dir() or not any(locks.glob("*.lock")):
        return False
    own = None if _held_token is None else own_token_name()
    for token in sorted((snakemake_dir / LIVE_DIRNAME).glob("*.token")):
        if token.name != own and _token_is_held(token):
            return False
    shutil.rmtree(locks, ignore_errors=True)
    return True


def own_token_name() -> str:
    """File name of this process's token (``<host>-<pid>.token``), held or not. A process
    must never open its own held token: closing any descriptor of a file drops the
    process's POSIX locks on it."""
    return f"{socket.gethostname()}-{os.getpid()}.token"


def holds_own_token() -> bool:
    """Whether this process holds its token (:func:`hold_liveness_token` was called)."""
    return _held_token is not None


def hold_liveness_token(workdir: str | os.PathLike[str] = ".") -> Path:
    """Lock this process's token file for the rest of its life; return its path."""
    global _held_token
    live = Path(workdir) / SNAKEMAKE_DIRNAME / LIVE_DIRNAME
    if _held_token is not None:
        return live / own_token_name()
    live.mkdir(parents=True, exist_ok=True)
    name = f"{socket.gethostname()}-{os.getpid()}"
    handle = open(live / f".{name}.tmp", "w")
    fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    # visible under its final name only once locked: a prober never sees it unlocked
    token = live / f"{name}.token"
    os.replace(live / f".{name}.tmp", token)
    _held_token = handle
    return token


def prune_dead_tokens(workdir: str | os.PathLike[str] = ".") -> int:
    """Delete the tokens no live process holds (O(tokens)); return how many."""
    own = None if _held_token is None else own_token_name()
    removed = 0
    for token in sorted((Path(workdir) / SNAKEMAKE_DIRNAME / LIVE_DIRNAME).glob("*.token")):
        if token.name != own and not _token_is_held(token):
            with contextlib.suppress(FileNotFoundError):
                token.unlink()
                removed += 1
    return removed


def claim_directory(workdir: str | os.PathLike[str] = ".") -> bool:
    """For the Snakefile: remove stale locks (saying so), then hold this process's token.

    Returns whether stale locks were removed.
    """
    removed = remove_stale_locks(workdir)
    prune_dead_tokens(workdir)
    if removed:
        print(
            "attnrmt: removed the Snakemake lock of a killed run (no live Snakemake of this "
            "workflow works in this directory)",
            flush=True,
        )
    hold_liveness_token(workdir)
    return removed
