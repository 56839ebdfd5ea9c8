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

One writer per results folder: a run (a Snakemake process that will execute jobs, not a
dry run) holds a POSIX lock on ``results/<run>/.attnrmt-writer.lock`` for its whole life
(:func:`hold_writer_lock`, from the Snakefile, before Snakemake takes its own directory
lock) and records who it is in ``results/<run>/.attnrmt-writer.json`` (pid, host, start,
command). A second run of the same folder is refused with that record
(:class:`RunInProgress`), and never told to ``--unlock``: Snakemake's own lock message,
which says so, is not reached while the first run lives. ``attnrmt run`` takes the lock
itself for all of its steps (sweep, report, summary: no gap between them in which a second
run could start) and tells its Snakemake children so through :data:`WRITER_ENV`
(a POSIX lock belongs to one process; the child of its holder does not take it again).

Cost: O(tokens) file opens per Snakemake start; tokens of dead processes are deleted at
every start, so there are about as many as live Snakemake processes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import socket
import struct
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from attnrmt.sweep.store.atomic import write_json_atomically

SNAKEMAKE_DIRNAME = ".snakemake"
LOCKS_DIRNAME = "locks"
LIVE_DIRNAME = "attnrmt-live"
WRITER_LOCK_FILENAME = ".attnrmt-writer.lock"
WRITER_RECORD_FILENAME = ".attnrmt-writer.json"

_held_token: IO[str] | None = None
_held_writer_locks: dict[str, IO[str]] = {}


def remove_stale_locks(workdir: str | os.PathLike[str] = ".") -> bool:
    """Remove Snakemake's directory locks if no live Snakemake of this workflow holds a
    token (:mod:`attnrmt.sweep.run.locks`); return whether locks were removed."""
    snakemake_dir = Path(workdir) / SNAKEMAKE_DIRNAME
    locks = snakemake_dir / LOCKS_DIRNAME
    if not locks.is_dir() or not any(locks.glob("*.lock")):
        return False
    own = None if _held_token is None else own_token_name()
    for token in sorted((snakemake_dir / LIVE_DIRNAME).glob("*.token")):
        if token.name != own and token_is_held(token):
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
        if token.name != own and not token_is_held(token):
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


#: ``struct flock`` of Linux (l_type, l_whence, l_start, l_len, l_pid), for ``F_GETLK``.
_FLOCK_FORMAT = "hhqqi"


def token_is_held(path: Path) -> bool:
    """Whether another process holds a POSIX lock on the token file ``path``, the one
    liveness probe of this package. On Linux ``F_GETLK`` asks without taking the lock
    (read-only open, so a reader without write access can probe); elsewhere a
    non-blocking ``lockf`` is tried and released. A missing or unreadable file is not held.
    Never call it on this process's own held token (see :func:`own_token_name`). O(1).
    """
    try:
        handle = open(path, "rb" if sys.platform.startswith("linux") else "ab")
    except OSError:
        return False
    with handle:
        if sys.platform.startswith("linux"):  # _FLOCK_FORMAT is Linux's struct flock
            request = struct.pack(_FLOCK_FORMAT, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
            answer = fcntl.fcntl(handle.fileno(), fcntl.F_GETLK, request)
            return struct.unpack(_FLOCK_FORMAT, answer)[0] != fcntl.F_UNLCK
        try:
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EAGAIN):
                return True
            raise
        return False


def live_run_since(workdir: Path) -> tuple[bool, float | None]:
    """``(known, since)``: the start (token mtime) of the oldest live Snakemake of the
    workflow in ``workdir``, None when none lives; ``known`` False when the lock query
    fails (then ``since`` is None too). O(live tokens).

    This process's own token (the progress line runs inside Snakemake) is live by
    definition and never opened: closing a descriptor of it would drop its lock.
    """
    since: float | None = None
    own = own_token_name()
    for token in (workdir / SNAKEMAKE_DIRNAME / LIVE_DIRNAME).glob("*.token"):
        try:
            held = holds_own_token() if token.name == own else token_is_held(token)
            started = token.stat().st_mtime
        except FileNotFoundError:  # its process ended and a new one pruned it
            continue
        except OSError:
            return False, None
        if held:
            since = started if since is None else min(since, started)
    return True, since


class RunInProgress(RuntimeError):
    """Another live process writes this results folder (:func:`hold_writer_lock`)."""


#: ``"<pid>:<real path of the run folder>"``: the process ``pid`` (this one's parent, the
#: ``attnrmt run`` driver) holds the folder's writer lock for this process's whole life.
WRITER_ENV = "ATTNRMT_WRITER_LOCK_HOLDER"


def writer_env(run_dir: str | os.PathLike[str]) -> dict[str, str]:
    """The environment that tells a child process this one holds ``run_dir``'s writer
    lock (:data:`WRITER_ENV`). O(1)."""
    return {WRITER_ENV: f"{os.getpid()}:{os.path.realpath(run_dir)}"}


def release_writer_lock(run_dir: str | os.PathLike[str]) -> None:
    """Drop the writer lock this process holds on ``run_dir`` (no-op if none): for a
    process that outlives its run (``attnrmt.run`` in a notebook). O(1)."""
    handle = _held_writer_locks.pop(os.path.realpath(run_dir), None)
    if handle is not None:
        with contextlib.suppress(FileNotFoundError):
            (Path(run_dir) / WRITER_RECORD_FILENAME).unlink()
        handle.close()


def hold_writer_lock(run_dir: str | os.PathLike[str], command: Sequence[str] | None = None) -> Path:
    """Make this process the one writer of ``run_dir`` (module docstring) for the rest of
    its life; return the record's path. Idempotent in the process. O(1).

    The lock is a POSIX lock (``fcntl.lockf``, honoured by NFS across hosts) on
    ``.attnrmt-writer.lock``, which the kernel drops when the process ends however it
    ends (SIGKILL included): a dead run never blocks the next one. The process must never
    open that file again (closing any descriptor of it drops the lock).

    Raises
    ------
    RunInProgress
        The folder's writer is alive; the message names its pid, host, start time and
        command, and how to stop it.
    """
    directory = Path(run_dir)
    key = os.path.realpath(directory)
    record_path = directory / WRITER_RECORD_FILENAME
    if key in _held_writer_locks or os.environ.get(WRITER_ENV) == f"{os.getppid()}:{key}":
        return record_path  # held by this process, or by its parent for its whole life
    directory.mkdir(parents=True, exist_ok=True)
    handle = open(directory / WRITER_LOCK_FILENAME, "a")
    try:
        fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.close()
        if exc.errno not in (errno.EACCES, errno.EAGAIN):
            raise
        raise RunInProgress(describe_writer(directory)) from None
    _held_writer_locks[key] = handle
    record = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.time(),
        "command": list(sys.argv if command is None else command),
    }
    write_json_atomically(record_path, record)
    return record_path


def read_writer_record(run_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The last writer's record of ``run_dir`` (pid, host, started, command), or None."""
    try:
        record = json.loads((Path(run_dir) / WRITER_RECORD_FILENAME).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def describe_writer(run_dir: str | os.PathLike[str]) -> str:
    """Why a second run of ``run_dir`` is refused: who writes it and what to do."""
    record = read_writer_record(run_dir) or {}
    pid, host = record.get("pid", "?"), record.get("host", "?")
    started = record.get("started")
    since = (
        time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(float(started)))
        if isinstance(started, int | float)
        else "an unknown time"
    )
    command = " ".join(str(part) for part in record.get("command", []))[:200]
    return (
        f"{run_dir} is being written by a live run: pid {pid} on host {host}, started "
        f"{since}" + (f" ({command})" if command else "") + ". One run at a time writes a "
        f"results folder: wait for it to end, or stop it (kill -TERM {pid} on {host}; its "
        "finished cells are kept) and rerun the same command. Its Snakemake lock protects "
        "it: do not remove it (no --unlock) while that run lives."
    )


__all__ = [
    "LIVE_DIRNAME",
    "LOCKS_DIRNAME",
    "SNAKEMAKE_DIRNAME",
    "WRITER_ENV",
    "WRITER_LOCK_FILENAME",
    "WRITER_RECORD_FILENAME",
    "RunInProgress",
    "claim_directory",
    "describe_writer",
    "hold_liveness_token",
    "hold_writer_lock",
    "holds_own_token",
    "live_run_since",
    "own_token_name",
    "prune_dead_tokens",
    "read_writer_record",
    "release_writer_lock",
    "remove_stale_locks",
    "token_is_held",
    "writer_env",
]
