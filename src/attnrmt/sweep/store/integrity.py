"""Every stored byte verifiable (``docs/data-contract.md``, "Integrity"): each store's
writer records the size and CRC-32C of every file in ``<name>.digest.json`` (products in
:data:`_PRODUCTS_RECORD`). The quick check (sizes, every ``zarr.json`` by checksum) costs
O(files), the full one (``attnrmt verify``, a rerun before reuse) O(bytes); a store
without its record is rebuilt."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from attnrmt.sweep.store.atomic import write_bytes_atomically

#: A record's name: the store's or product's name plus this.
_DIGEST_SUFFIX = ".digest.json"
#: Files of a store that the quick check reads whole (the rest: present, same size).
METADATA_NAMES = frozenset({"zarr.json"})


class DamagedStore(ValueError):
    """A store or product that does not match its digest record (the message names the
    file and the command that heals it)."""


def digest_path(path: str | os.PathLike[str]) -> Path:
    """``<path>.digest.json``: the record of a store or product."""
    path = Path(path)
    return path.with_name(path.name + _DIGEST_SUFFIX)


def _file_crc32c(path: Path) -> str:
    """CRC-32C of a file's bytes, 8 hex digits. O(bytes), in blocks of 4 MiB."""
    import google_crc32c

    checksum = google_crc32c.Checksum()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            checksum.update(block)
    return checksum.digest().hex()


def _files(path: Path) -> list[Path]:
    """Every file of a store (a directory) or the product itself, sorted."""
    if path.is_dir():
        return sorted(entry for entry in path.rglob("*") if entry.is_file())
    return [path]


def _record_files(record: Path) -> dict[str, list[Any]] | None:
    """The ``files`` of a digest record, None when it is missing or unreadable."""
    try:
        return dict(json.loads(record.read_text(encoding="utf-8"))["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_digest(path: str | os.PathLike[str]) -> Path:
    """Record the size and CRC-32C of every file of the store or product ``path``
    (atomically, beside it); the record's path. O(bytes) of the files that changed: a file
    with the size, inode and modification time of the previous record keeps its CRC (the
    stores replace files by a rename, never rewrite them)."""
    path = Path(path)
    previous = _record_files(digest_path(path)) or {}
    files: dict[str, list[Any]] = {}
    for file in _files(path):
        name = str(file.relative_to(path)) if file != path else "."
        stat = file.stat()
        old = previous.get(name) or [None] * 4
        same = len(old) == 4 and (old[0], old[2], old[3]) == (
            stat.st_size,
            stat.st_ino,
            stat.st_mtime_ns,
        )
        crc = old[1] if same else _file_crc32c(file)
        files[name] = [stat.st_size, crc, stat.st_ino, stat.st_mtime_ns]
    record = digest_path(path)
    write_bytes_atomically(record, json.dumps({"files": files}, sort_keys=True).encode())
    return record


def damage(
    path: str | os.PathLike[str],
    full: bool = False,
    record_of: str | os.PathLike[str] | None = None,
) -> list[str]:
    """What is wrong with the store or product ``path`` against its record (empty: it
    matches): ``"<file>: missing"``, ``"... size"``, ``"... checksum"``, or that the
    record is missing. Quick check unless ``full`` (module docstring). ``record_of``: check
    against another store's record (the cell table against its snapshot's: the same files,
    hard-linked)."""
    path = Path(path)
    record = digest_path(path if record_of is None else record_of)
    files = _record_files(record)
    return [f"{record}: no readable digest record"] if files is None else _check(path, files, full)


#: The stores of a sweep folder with a record (the cell table is checked against its
#: snapshot's, ``cells.zarr``).
_SWEEP_STORES = ("cells.zarr", "theory.zarr", "analysis.zarr")


def sweep_damage(
    sweep_dir: str | os.PathLike[str], full: bool = False, unrecorded: bool = True
) -> dict[str, list[str]]:
    """``{store name: problems}`` of a sweep folder's stores that are present (on disk or
    by their record) and damaged, or (with ``unrecorded``) present without a record.
    O(files) quick, O(bytes) full."""
    sweep_dir = Path(sweep_dir)
    found: dict[str, list[str]] = {}
    for name in _SWEEP_STORES:
        store = sweep_dir / name
        recorded = digest_path(store).exists()
        if recorded or (unrecorded and store.exists()):
            problems = damage(store, full)
            if name == "cells.zarr" and (sweep_dir / "cell_table.zarr").exists():
                problems += damage(sweep_dir / "cell_table.zarr", full, record_of=store)
            if problems:
                found[name] = problems
    return found


def _check(base: Path, files: dict[str, list[Any]], full: bool) -> list[str]:
    """Problems of the recorded ``files`` (relative to ``base``; ``"."`` is ``base``)."""
    problems = []
    for name, (size, crc, *_) in sorted(files.items()):
        file = base if name == "." else base / name
        try:
            actual = file.stat().st_size
        except OSError:
            problems.append(f"{file}: missing")
            continue
        if actual != size:
            problems.append(f"{file}: {actual} bytes, recorded {size}")
        elif (full or name == "." or file.name in METADATA_NAMES) and _file_crc32c(file) != crc:
            problems.append(f"{file}: checksum differs from the record")
    return problems


#: The record of a run's products (CSV tables, figures), in ``results/<run>/``.
_PRODUCTS_RECORD = "products.digest.json"
_PRODUCTS_LOCK = threading.Lock()


def record_products(
    run_dir: str | os.PathLike[str], paths: Iterable[str | os.PathLike[str]]
) -> Path:
    """Add (or update) the size and CRC-32C of product files under ``run_dir`` to its
    :data:`_PRODUCTS_RECORD` (files outside ``run_dir`` are skipped). The per-sweep product
    rules run concurrently (in threads, or processes): the read-modify-write holds a thread
    lock and a POSIX lock on ``.products.lock``. O(bytes)."""
    run_dir = Path(run_dir)
    record = run_dir / _PRODUCTS_RECORD
    with _PRODUCTS_LOCK, open(run_dir / ".products.lock", "a") as lock:
        fcntl.lockf(lock, fcntl.LOCK_EX)
        files = _record_files(record) or {}
        for path in map(Path, paths):
            if path.resolve().is_relative_to(run_dir.resolve()):  # elsewhere: not ours
                name = str(path.resolve().relative_to(run_dir.resolve()))
                files[name] = [path.stat().st_size, _file_crc32c(path)]
        write_bytes_atomically(record, json.dumps({"files": files}, sort_keys=True).encode())
    return record


def products_damage(run_dir: str | os.PathLike[str]) -> list[str]:
    """Problems of a run's recorded products (every byte: they are small). O(bytes)."""
    files = _record_files(Path(run_dir) / _PRODUCTS_RECORD)
    return [] if files is None else _check(Path(run_dir), files, full=True)


def heal_run(run_dir: str | os.PathLike[str], sweeps: Iterable[str]) -> list[str]:
    """Before a rerun: check every byte of every store of ``sweeps`` under ``run_dir``;
    remove each damaged or unrecorded one (a damaged cell table with its snapshot, and
    what was computed from it: the sweep's ``analysis.zarr``) so that the rerun rebuilds
    it; one line per removed store, naming what was damaged. O(bytes of the stores)."""
    lines = []
    for problem in products_damage(run_dir):
        Path(problem.split(": ", 1)[0]).unlink(missing_ok=True)
        lines.append(f"attnrmt run: damaged product {problem}: rewritten by this run")
    for sweep in sweeps:
        sweep_dir = Path(run_dir) / sweep
        found = sweep_damage(sweep_dir, full=True)
        removed = set(found)
        if "cells.zarr" in removed:
            removed |= {"cell_table.zarr", "analysis.zarr"}
        if "theory.zarr" in removed:
            removed.add("analysis.zarr")
        for name in sorted(removed):
            store = sweep_dir / name
            shutil.rmtree(store, ignore_errors=True)
            digest_path(store).unlink(missing_ok=True)
        for name, problems in sorted(found.items()):
            redo = "rebuilt from the fragments" if name == "cells.zarr" else "recomputed"
            lines.append(
                f"attnrmt run: {sweep}/{name} damaged ({problems[0]}"
                f"{f' and {len(problems) - 1} more' if len(problems) > 1 else ''}): "
                f"{redo} by this run"
            )
    return lines


def outdated_run(
    run_dir: str | os.PathLike[str], expected: Mapping[str, str], analysis_sha256: str | None = None
) -> list[str]:
    """Before a rerun: remove each store made for another config of its sweep
    (``config_sha256`` against ``expected``; ``analysis.zarr`` also
    ``analysis_settings_sha256`` against ``analysis_sha256``), so the rerun rebuilds it; of
    the cells only the ``cells.zarr`` snapshot. One line per removed store. O(sweeps)."""
    lines = []
    for sweep, sha in expected.items():
        for name in _SWEEP_STORES:
            store = Path(run_dir) / sweep / name
            try:
                attrs = json.loads((store / "zarr.json").read_text(encoding="utf-8"))
                attrs = dict(attrs["attributes"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            wanted = {"config_sha256": sha}
            if name == "analysis.zarr" and analysis_sha256 is not None:
                wanted["analysis_settings_sha256"] = analysis_sha256
            for key, value in wanted.items():
                stored = str(attrs[key]) if key in attrs else None
                if stored is not None and stored != value:
                    shutil.rmtree(store, ignore_errors=True)
                    digest_path(store).unlink(missing_ok=True)
                    what = "config of the sweep" if key == "config_sha256" else "analysis settings"
                    lines.append(
                        f"attnrmt run: {sweep}/{name} holds another {what} ({key} "
                        f"{stored[:12]}, now {value[:12]}): rebuilt by this run"
                    )
                    break
    return lines


def heal_hint(config: str | None = None) -> str:
    """The command that heals a damaged store: a rerun of the run's config."""
    return f"attnrmt run {config}" if config else "attnrmt run <the run's config>"


def require_intact(sweep_dir: str | os.PathLike[str], full: bool = False) -> None:
    """Raise :class:`DamagedStore` naming every damaged file of the stores of a sweep
    folder that have a record (those without one are not checked) and the healing
    command. O(files) quick, O(bytes) full."""
    found = sweep_damage(sweep_dir, full, unrecorded=False)
    if found:
        raise DamagedStore(damaged_message([p for problems in found.values() for p in problems]))


def damaged_message(problems: Sequence[str]) -> str:
    """One message for ``problems``: what is damaged and how to heal it."""
    shown = "; ".join(problems[:5]) + (
        f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
    )
    return (
        f"damaged results: {shown}. A rerun of the same config rebuilds them from the "
        f"fragments ({heal_hint()}); `attnrmt verify <results/run>` checks every byte"
    )
