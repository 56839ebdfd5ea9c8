"""One writer per run folder (``docs/architecture.md``, "Store"), by POSIX locks (honoured
by NFS, dropped by the kernel however the process ends): liveness tokens
``.snakemake/attnrmt-live/<host>-<pid>.token`` of each Snakemake process (a killed run's
Snakemake locks are removed when no token is held), the writer lock
``results/<run>/.attnrmt-writer.lock`` (:func:`hold_writer_lock`), the run record
``.attnrmt-run.json`` naming the folder's config (:func:`claim_run_dir`) and the cell
table's lock (:func:`table_lock`). A process never reopens a lock file it holds (closing
any descriptor drops its locks). O(tokens) file opens per Snakemake start."""

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
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO

from attnrmt.sweep.spec.config import ConfigError
from attnrmt.sweep.store.atomic import write_json_atomically, write_text_atomically
from attnrmt.sweep.store.cell_table.layout import LOCK_NAME
from attnrmt.sweep.store.layout import RunLayout

LIVE_DIRNAME = "attnrmt-live"
WRITER_LOCK_FILENAME = ".attnrmt-writer.lock"
WRITER_RECORD_FILENAME = ".attnrmt-writer.json"
RUN_RECORD = RunLayout(".").record.name
#: ``"<pid>:<real path of the run folder>"``: the process ``pid`` (this one's parent, the
#: ``attnrmt run`` driver) holds the folder's writer lock for this process's whole life.
WRITER_ENV = "ATTNRMT_WRITER_LOCK_HOLDER"

_held: dict[str, IO[str]] = {}  # this process's locks: "token" and real run folder paths


def _try_lock(path: Path) -> IO[str] | None:
    """``path`` opened and locked exclusively, or None when another process holds it."""
    handle = open(path, "a")
    try:
        fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        handle.close()
        if exc.errno not in (errno.EACCES, errno.EAGAIN):
            raise
        return None
    return handle


def _own_token() -> str:
    return f"{socket.gethostname()}-{os.getpid()}.token"


def token_is_held(path: Path) -> bool:
    """Whether another process holds a POSIX lock on ``path`` (Linux: ``F_GETLK``; elsewhere
    a non-blocking ``lockf`` tried and released); never this process's own token. O(1)."""
    linux = sys.platform.startswith("linux")
    try:
        handle = open(path, "rb" if linux else "ab")
    except OSError:
        return False
    with handle:
        if not linux:
            probe = _try_lock(Path(path))
            if probe is not None:
                probe.close()
            return probe is None
        request = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)  # struct flock
        answer = fcntl.fcntl(handle.fileno(), fcntl.F_GETLK, request)
        return struct.unpack("hhqqi", answer)[0] != fcntl.F_UNLCK


def _tokens(workdir: str | os.PathLike[str]) -> list[Path]:
    """Other processes' tokens in ``workdir``, sorted."""
    live = Path(workdir) / ".snakemake" / LIVE_DIRNAME
    own = _own_token() if "token" in _held else None
    return [token for token in sorted(live.glob("*.token")) if token.name != own]


def hold_liveness_token(workdir: str | os.PathLike[str] = ".") -> Path:
    """Lock this process's token for the rest of its life (idempotent; locked before it is
    named, so no prober sees it unlocked); its path."""
    live = Path(workdir) / ".snakemake" / LIVE_DIRNAME
    token = live / _own_token()
    if "token" not in _held:
        live.mkdir(parents=True, exist_ok=True)
        temporary = live / f".{token.stem}.tmp"
        handle = open(temporary, "w")
        fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.replace(temporary, token)
        _held["token"] = handle
    return token


def remove_stale_locks(workdir: str | os.PathLike[str] = ".") -> bool:
    """Remove Snakemake's directory locks if no other live process of the workflow holds a
    token; whether locks were removed."""
    locks = Path(workdir) / ".snakemake" / "locks"
    if not any(locks.glob("*.lock")) or any(map(token_is_held, _tokens(workdir))):
        return False
    shutil.rmtree(locks, ignore_errors=True)
    return True


def prune_dead_tokens(workdir: str | os.PathLike[str] = ".") -> int:
    """Delete the tokens no live process holds; how many. O(tokens)."""
    removed = 0
    for token in _tokens(workdir):
        if not token_is_held(token):
            with contextlib.suppress(FileNotFoundError):
                token.unlink()
                removed += 1
    return removed


def claim_directory(workdir: str | os.PathLike[str] = ".") -> bool:
    """For the Snakefile: remove stale locks (saying so), prune dead tokens, hold this
    process's token; whether stale locks were removed."""
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


def live_run_since(workdir: Path) -> tuple[bool, float | None]:
    """``(known, since)``: the start (token mtime) of the oldest live Snakemake in
    ``workdir`` (None: none lives); ``(False, None)`` when the lock query fails. O(tokens)."""
    since: float | None = None
    own = _own_token()
    for token in (workdir / ".snakemake" / LIVE_DIRNAME).glob("*.token"):
        try:
            held = ("token" in _held) if token.name == own else token_is_held(token)
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


def writer_env(run_dir: str | os.PathLike[str]) -> dict[str, str]:
    """The environment telling a child that this process holds ``run_dir``'s writer lock."""
    return {WRITER_ENV: f"{os.getpid()}:{os.path.realpath(run_dir)}"}


def hold_writer_lock(run_dir: str | os.PathLike[str], command: Sequence[str] | None = None) -> Path:
    """Make this process the one writer of ``run_dir`` until it ends (or
    :func:`release_writer_lock`), recorded beside the lock; the record's path. Idempotent;
    a child of the holder told through :data:`WRITER_ENV` passes. O(1). Raises
    :class:`RunInProgress` (naming the writer's pid, host, start, command) if one lives."""
    directory = Path(run_dir)
    key = os.path.realpath(directory)
    record = directory / WRITER_RECORD_FILENAME
    if key in _held or os.environ.get(WRITER_ENV) == f"{os.getppid()}:{key}":
        return record
    directory.mkdir(parents=True, exist_ok=True)
    handle = _try_lock(directory / WRITER_LOCK_FILENAME)
    if handle is None:
        raise RunInProgress(describe_writer(directory))
    _held[key] = handle
    command = list(sys.argv if command is None else command)
    who = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    write_json_atomically(record, {**who, "command": command})
    return record


def release_writer_lock(run_dir: str | os.PathLike[str]) -> None:
    """Drop this process's writer lock on ``run_dir`` (no-op if none; ``attnrmt.run`` in a
    notebook outlives its run). O(1)."""
    handle = _held.pop(os.path.realpath(run_dir), None)
    if handle is not None:
        with contextlib.suppress(FileNotFoundError):
            (Path(run_dir) / WRITER_RECORD_FILENAME).unlink()
        handle.close()


def describe_writer(run_dir: str | os.PathLike[str]) -> str:
    """Why a second run of ``run_dir`` is refused: who writes it and what to do."""
    try:
        record = json.loads((Path(run_dir) / WRITER_RECORD_FILENAME).read_text())
    except (OSError, ValueError):
        record = {}
    record = record if isinstance(record, dict) else {}
    pid, host, started = record.get("pid", "?"), record.get("host", "?"), record.get("started")
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


class RunDirConflict(ConfigError):
    """``results/<run>/`` belongs to another config file (see :func:`claim_run_dir`)."""


def claim_run_dir(
    run_dir: str | os.PathLike[str], config_file: str | os.PathLike[str], write: bool = True
) -> None:
    """Make sure ``results/<run>/`` belongs to ``config_file`` (its relative or absolute
    path recorded), recording it when new (and ``write``); a deleted record is known from a
    sweep's copy, a folder without any is adopted. O(sweeps). Raises
    :class:`RunDirConflict` (naming both files and the ways out) for another config's."""
    run_dir = Path(run_dir)
    if Path(config_file).resolve().parent == (run_dir / "rounds").resolve():
        return  # a round's config (attnrmt.sweep.compute.rounds): the run claimed its folder
    record = RunLayout(run_dir).record
    absolute = Path(config_file).absolute()
    with contextlib.suppress(ValueError):
        absolute = absolute.relative_to(Path.cwd())
    mine = {"config_file": str(absolute), "config_path": str(Path(config_file).resolve())}
    for copy in (record, *sorted(run_dir.glob(f"*/{RUN_RECORD}"))):
        try:
            owner = json.loads(copy.read_text(encoding="utf-8"))
            owner_name = str(owner["config_file"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if not any(owner.get(k) == v for k, v in mine.items()):
            label = mine["config_file"]
            raise RunDirConflict(
                f"run {run_dir.name!r}: {run_dir}/ holds the results of the config file "
                f"{owner_name!r} (recorded in {copy}), not of {label!r}. Give {label!r} "
                f"its own run name (set run: in it, or remove run: to use "
                f"{Path(label).stem!r}), or delete {run_dir}/ to replace those results"
            )
        if copy == record:
            return
        break  # the record was deleted; a sweep's copy says it is ours: recreate it
    if write:
        write_text_atomically(record, json.dumps(mine, indent=2) + "\n", durable=False)


def copy_run_record(sweep_dir: str | os.PathLike[str]) -> None:
    """Keep a copy of the run's record (if any) in ``<run>/<sweep>/``. O(1)."""
    sweep_dir = Path(sweep_dir)
    try:
        text = RunLayout(sweep_dir.parent).record.read_text(encoding="utf-8")
    except OSError:
        return
    copy = sweep_dir / RUN_RECORD
    if not copy.is_file() or copy.read_text(encoding="utf-8") != text:
        write_text_atomically(copy, text, durable=False)


@contextlib.contextmanager
def table_lock(sweep_dir: Path) -> Iterator[None]:
    """Exclusive lock of one sweep's cell table; blocks until the other writer is done."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    with open(sweep_dir / LOCK_NAME, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
