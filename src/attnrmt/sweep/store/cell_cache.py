"""The shared cell cache (``docs/data-contract.md``, "The cell cache"): every finished cell
of every run, outside any run, as a one-cell fragment at
``<root>/<key[:2]>/<key>-<seed digest>.npz`` (:func:`entry_path`; no index). Writes are
atomic and never over an entry; reads are verified like every fragment read and matched
on key and seed (a bad entry is removed and recomputed) and set the mtime that
:func:`prune` (least recently used first, down to ``cell_cache.max_gb``) reads. Location:
:func:`cache_root`. O(1) per cell; O(entries) per prune."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.sweep.store.atomic import is_temporary, write_bytes_atomically
from attnrmt.sweep.store.fragments import (
    FRAGMENT_SUFFIX,
    FragmentDamaged,
    fragment_bytes,
    load_verified,
    say,
    take_cells,
)

#: Environment variable that overrides ``cell_cache.path``: a directory, or ``off``.
ENVIRONMENT_VARIABLE = "ATTNRMT_CELL_CACHE"

CellId = tuple[str, str]


def cache_root(config: Mapping[str, Any]) -> Path | None:
    """The cache directory of a validated config (``cell_cache`` filled from the schema),
    or None when the cache is off; :data:`ENVIRONMENT_VARIABLE` wins over the config. O(1)."""
    override = os.environ.get(ENVIRONMENT_VARIABLE)
    if override is not None:
        return None if override.strip().lower() in ("", "off") else Path(override).expanduser()
    settings = config.get("cell_cache") or {}
    if not settings.get("enabled", False) or not settings.get("path"):
        return None
    return Path(str(settings["path"])).expanduser()


def max_bytes(config: Mapping[str, Any]) -> int:
    """``cell_cache.max_gb`` of a validated config, in bytes (10^9 per GB). O(1)."""
    return int(float((config.get("cell_cache") or {})["max_gb"]) * 1e9)


def entry_path(root: Path, cell_id: CellId) -> Path:
    """``<root>/<key[:2]>/<key>-<16 hex of sha256(seed words)>.npz`` of a cell. O(1)."""
    key, seed = cell_id
    seed_digest = hashlib.sha256(seed.encode("ascii")).hexdigest()[:16]
    return root / key[:2] / f"{key}-{seed_digest}{FRAGMENT_SUFFIX}"


def _read_entry(path: Path, cell_id: CellId) -> dict[str, np.ndarray] | None:
    """The verified columns of one entry holding exactly ``cell_id``, None when absent; a
    damaged or mismatched entry is removed (said once) and None returned. Sets the entry's
    mtime (last used). O(bytes of the entry)."""
    try:
        arrays = load_verified(path)
    except FileNotFoundError:
        return None
    except (OSError, FragmentDamaged) as error:
        reason = error.reason if isinstance(error, FragmentDamaged) else str(error)
        say(f"damaged cell cache entry {path} ({reason}) removed; its cell is recomputed")
        path.unlink(missing_ok=True)
        return None
    ids = list(zip(arrays["cell_key"].tolist(), arrays["cell_seed"].tolist(), strict=True))
    if ids != [cell_id]:
        say(f"cell cache entry {path} holds another cell; removed, its cell is recomputed")
        path.unlink(missing_ok=True)
        return None
    with contextlib.suppress(OSError):  # a read-only cache still serves
        os.utime(path)
    return arrays


def read_cells(
    root: Path, wanted: Iterable[CellId]
) -> tuple[list[dict[str, np.ndarray]], dict[CellId, tuple[int, int]]]:
    """The wanted cells the cache holds: their columns (one source per entry) and where
    each is, ``{cell id: (source, 0)}``, as :func:`attnrmt.sweep.store.fragments.
    load_cell_columns` gives them for :func:`~attnrmt.sweep.store.fragments.take_cells`.
    O(wanted) ``open`` calls plus the bytes of the entries found."""
    sources: list[dict[str, np.ndarray]] = []
    where: dict[CellId, tuple[int, int]] = {}
    for cell_id in wanted:
        arrays = _read_entry(entry_path(root, cell_id), cell_id)
        if arrays is not None:
            where[cell_id] = (len(sources), 0)
            sources.append(arrays)
    return sources, where


def write_cells(
    root: Path,
    sources: Sequence[Mapping[str, np.ndarray]],
    where: Mapping[CellId, tuple[int, int]],
    cell_ids: Iterable[CellId],
) -> int:
    """Write an entry for each of ``cell_ids`` (its row of ``sources``, copied as stored)
    that the cache lacks; return how many were written. An unwritable cache is said once
    and skipped (the run goes on). O(cells x bytes per cell)."""
    written = 0
    for cell_id in cell_ids:
        path = entry_path(root, cell_id)
        if path.exists():
            continue
        arrays = take_cells(sources, [where[cell_id]])
        arrays["computed"] = np.ones(1, dtype=bool)  # computed by some run, once
        try:
            write_bytes_atomically(path, fragment_bytes(arrays), durable=False)
        except OSError as error:
            say(f"cell cache {root} not written ({error.strerror or error}); the run goes on")
            return written
        written += 1
    return written


def _entries(root: Path) -> list[tuple[int, int, str]]:
    """``(mtime ns, bytes, path)`` of every entry (temporaries left out). O(entries)."""
    found = []
    for path in root.glob(f"*/*{FRAGMENT_SUFFIX}"):
        with contextlib.suppress(OSError):
            if not is_temporary(path):
                stat = path.lstat()
                found.append((stat.st_mtime_ns, stat.st_size, str(path)))
    return found


def prune(root: Path, limit_bytes: int) -> tuple[int, int]:
    """Evict least recently used entries (oldest mtime first) until the entries' bytes
    are at most ``limit_bytes``; return ``(entries removed, bytes removed)``.
    O(entries log entries)."""
    entries = sorted(_entries(root))
    total = sum(size for _, size, _ in entries)
    removed = freed = 0
    for _, size, path in entries:
        if total - freed <= limit_bytes:
            break
        try:
            os.unlink(path)
        except OSError:
            continue
        removed += 1
        freed += size
    return removed, freed


def cache_bytes(root: Path) -> int:
    """Bytes of every entry of the cache. O(entries)."""
    return sum(size for _, size, _ in _entries(root))
