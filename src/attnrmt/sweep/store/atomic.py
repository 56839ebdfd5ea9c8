"""Atomic writes, the one helper for every artefact of a run: write a temporary sibling
(``.<name>.<pid>.<random>.tmp``), make it durable, rename it over the target. Readers
see the old content or the new; a killed writer leaves at most a temporary, which
:func:`remove_stale_temporaries` deletes. Files and directory trees. O(size) + one fsync
and one rename per file."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

#: Every temporary name starts with ``.`` and ends with this suffix.
_TEMPORARY_SUFFIX = ".tmp"


def temporary_sibling(target: Path) -> Path:
    """A unique temporary name beside ``target`` (``.<name>.<pid>.<random>.tmp``)."""
    unique = f"{os.getpid()}.{uuid.uuid4().hex[:8]}"
    return target.with_name(f".{target.name}.{unique}{_TEMPORARY_SUFFIX}")


def is_temporary(path: Path) -> bool:
    """Whether ``path`` is named like a temporary of :func:`temporary_sibling`."""
    return path.name.startswith(".") and path.name.endswith(_TEMPORARY_SUFFIX)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def fsync_tree(root: Path) -> None:
    """fsync every file and directory under ``root`` (a file: itself). O(files)."""
    paths: list[str | Path] = [root] if root.is_file() else []
    for directory, _, files in os.walk(root):
        paths += [*(os.path.join(directory, name) for name in files), directory]
    for path in paths:
        descriptor = os.open(path, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


@contextlib.contextmanager
def atomic_path(
    target: str | os.PathLike[str], *, durable: bool = True, replace_tree: bool = False
) -> Iterator[Path]:
    """Yield a temporary sibling of ``target`` (file or directory); on success make it durable
    (``durable``) and rename it over ``target`` (``replace_tree``: an existing directory is
    removed just before); on error remove it and re-raise."""
    final = Path(target)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(final)
    try:
        yield tmp
        if durable:
            fsync_tree(tmp)
        if replace_tree and final.is_dir():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists() or tmp.is_symlink():
            _remove(tmp)


def write_bytes_atomically(
    path: str | os.PathLike[str], data: bytes, *, mode: int | None = None, durable: bool = True
) -> Path:
    """Write ``data`` to ``path`` atomically; ``mode`` (e.g. 0o600) is set at creation, so
    the content is never readable with wider permissions."""
    with atomic_path(path, durable=durable) as tmp:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        descriptor = os.open(tmp, flags, 0o666 if mode is None else mode)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
    return Path(path)


def write_text_atomically(
    path: str | os.PathLike[str], text: str, *, mode: int | None = None, durable: bool = True
) -> Path:
    """:func:`write_bytes_atomically` of UTF-8 ``text``."""
    return write_bytes_atomically(path, text.encode("utf-8"), mode=mode, durable=durable)


def write_json_atomically(
    path: str | os.PathLike[str], payload: Mapping[str, Any], *, durable: bool = False
) -> Path:
    """Write ``payload`` as sorted, indented JSON atomically (``default=str``)."""
    text = json.dumps(dict(payload), indent=1, sort_keys=True, default=str)
    return write_text_atomically(path, text, durable=durable)


def remove_stale_temporaries(
    directory: str | os.PathLike[str], *, older_than_seconds: float = 0.0, recursive: bool = True
) -> int:
    """Delete the temporaries under ``directory`` older than ``older_than_seconds`` whose
    writer (the pid in the name) is not a live process of this host; how many. O(entries)."""
    root = Path(directory)
    if not root.is_dir():
        return 0
    now = time.time()
    removed = 0
    candidates = (
        root.rglob(f".*{_TEMPORARY_SUFFIX}") if recursive else root.glob(f".*{_TEMPORARY_SUFFIX}")
    )
    for path in list(candidates):
        if not is_temporary(path) or _writer_alive(path):
            continue
        try:
            if now - path.lstat().st_mtime < older_than_seconds:
                continue
        except FileNotFoundError:
            continue
        _remove(path)
        removed += 1
    return removed


def _writer_alive(path: Path) -> bool:
    """Whether the pid field of a temporary's name is a live process (False if absent)."""
    parts = path.name[1 : -len(_TEMPORARY_SUFFIX)].split(".")
    pid = next((int(part) for part in reversed(parts[:-1]) if part.isdigit()), None)
    if pid is None or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
