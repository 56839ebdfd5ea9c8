"""Block fragments (npz), the write-once record of finished cells (``docs/data-contract.md``,
"Fragments"): ``fragments/<block>.npz`` (ids, ``computed``, every
:class:`attnrmt.model.CellResult` field, scalars as ``(n,)`` columns, arrays ragged as
``<field>__values`` + ``__offsets``, provenance; never pickled), its independent copy
``cache/<block>.npz`` (no rule owns it: it survives Snakemake's reruns) and a running
block's ``salvage/<block>/<task>.npz``. Every read is verified (zip structure, CRC32 of
each member read, :func:`schema_problem`); a damaged file is moved to ``<sweep>/damaged/``
and its intact twin used and copied back, else its cells are recomputed. Reuse goes
through the one index of finished cells (:class:`CellIndex`)."""

from __future__ import annotations

import contextlib
import io
import math
import os
import shutil
import struct
import sys
import threading
import time
import zipfile
import zlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from attnrmt.contract import (
    POOLING_FIELDS,
    PROVENANCE_ABSENT,
    PROVENANCE_FIELDS,
    SIZE_FIELDS,
    TOP_K_FIELDS,
)
from attnrmt.sweep.store.atomic import atomic_path, write_bytes_atomically
from attnrmt.sweep.store.cell_table.lookup import (
    cell_id_hashes,
    cell_ids,
    id_digests,
    key_bytes,
    root_seeds_of,
)
from attnrmt.sweep.store.layout import (
    CACHE_DIRNAME,
    FRAGMENT_SUFFIX,
    FRAGMENTS_DIRNAME,
    SALVAGE_DIRNAME,
)
from attnrmt.sweep.store.provenance import (
    ENVIRONMENTS_MEMBER,
    PROVENANCE_KEYS,
    encode_provenance,
    environments_of,
)

FRAGMENT_FORMAT_VERSION = 1
#: Members that name a fragment's cells rather than hold their results.
_META_MEMBERS = ("format_version", "cell_key", "cell_seed", "computed")
_T = TypeVar("_T")


def encode_fragment(
    cell_keys: Sequence[str],
    cell_seeds: Sequence[str],
    computed: Sequence[bool],
    records: Sequence[Mapping[str, Any]],
) -> dict[str, np.ndarray]:
    """Arrays of a fragment (see the module docstring) from per-cell records."""
    n_cells = len(cell_keys)
    if not (len(cell_seeds) == len(computed) == len(records) == n_cells):
        raise ValueError("cell_keys, cell_seeds, computed and records differ in length")
    arrays: dict[str, np.ndarray] = {
        "format_version": np.asarray(FRAGMENT_FORMAT_VERSION, dtype=np.int64),
        "cell_key": np.asarray(list(cell_keys), dtype=np.str_).reshape(n_cells),
        "cell_seed": np.asarray(list(cell_seeds), dtype=np.str_).reshape(n_cells),
        "computed": np.asarray(list(computed), dtype=bool).reshape(n_cells),
    }
    if n_cells == 0:
        return arrays
    arrays.update(encode_provenance(records))
    for name in records[0]:
        if name in PROVENANCE_KEYS:
            continue
        first = np.asarray(records[0][name])
        if first.ndim == 0:
            dtype = np.int64 if np.issubdtype(first.dtype, np.integer) else np.float64
            arrays[name] = np.array([record[name] for record in records], dtype=dtype)
        else:
            values = [np.asarray(record[name], dtype=np.float64).ravel() for record in records]
            arrays[f"{name}__values"] = np.concatenate(values)
            arrays[f"{name}__offsets"] = np.concatenate(
                [[0], np.cumsum([value.size for value in values])]
            ).astype(np.int64)
    return arrays


def with_identity(
    arrays: Mapping[str, np.ndarray],
    *,
    cell_keys: Sequence[str] | None = None,
    cell_seeds: Sequence[str] | None = None,
    computed: Sequence[bool] | None = None,
    attempt: int | None = None,
) -> dict[str, np.ndarray]:
    """A fragment's columns with the given identity members (and every cell's ``attempt``)
    replaced, the arrays shared: a task's columns become a fragment without decoding a
    cell. O(cells)."""
    out = dict(arrays)
    n_cells = len(out["computed"])
    for name, values, dtype in (
        ("cell_key", cell_keys, np.str_),
        ("cell_seed", cell_seeds, np.str_),
        ("computed", computed, bool),
    ):
        if values is not None:
            if len(values) != n_cells:
                raise ValueError(f"{name}: {len(values)} values for {n_cells} cells")
            out[name] = np.asarray(list(values), dtype=dtype).reshape(n_cells)
    if attempt is not None and n_cells:
        out["attempt"] = np.full(n_cells, int(attempt), dtype=np.int64)
    return out


def take_cells(
    sources: Sequence[Mapping[str, np.ndarray]], picks: Sequence[tuple[int, int]]
) -> dict[str, np.ndarray]:
    """The fragment of the cells ``picks`` (``(source, row)`` pairs, in order) of the columns
    ``sources``: what :func:`encode_fragment` writes for them, value and dtype, without
    decoding a cell; fields of the first picked source (``KeyError`` when another lacks
    one). O(values + runs of consecutive rows x members)."""
    runs: list[list[int]] = []  # [source, first row, stop row]
    for source, row in picks:
        if runs and runs[-1][0] == source and runs[-1][2] == row:
            runs[-1][2] = row + 1
        else:
            runs.append([source, row, row + 1])

    def joined(name: str) -> np.ndarray:
        return np.concatenate([member(sources[source], name)[lo:hi] for source, lo, hi in runs])

    out: dict[str, np.ndarray] = {
        "format_version": np.asarray(FRAGMENT_FORMAT_VERSION, dtype=np.int64)
    }
    for name, dtype in (("cell_key", np.str_), ("cell_seed", np.str_), ("computed", bool)):
        out[name] = joined(name) if runs else np.asarray([], dtype=dtype)
    if not runs:
        return out
    ids = joined("environment_id").astype(np.int64)
    texts: dict[int, str] = {}
    for source in dict.fromkeys(source for source, _, _ in runs):
        texts.update(environments_of(sources[source]))
    distinct = [texts[i] for i in dict.fromkeys(ids.tolist()) if i in texts]
    out[ENVIRONMENTS_MEMBER] = np.asarray(distinct, dtype=np.str_).reshape(len(distinct))
    out["environment_id"] = ids
    for name in PROVENANCE_FIELDS:
        if name != "environment_id":
            out[name] = joined(name).astype(np.int64)
    skip = {*_META_MEMBERS, ENVIRONMENTS_MEMBER, *PROVENANCE_KEYS}
    for name in sources[runs[0][0]]:
        if name in skip or name.endswith("__offsets"):
            continue
        if not name.endswith("__values"):
            out[name] = joined(name)
            continue
        field = name[: -len("__values")]
        values: list[np.ndarray] = []
        lengths: list[np.ndarray] = []
        for source, lo, hi in runs:
            offsets = np.asarray(sources[source][f"{field}__offsets"])
            values.append(np.asarray(sources[source][name])[offsets[lo] : offsets[hi]])
            lengths.append(np.diff(offsets[lo : hi + 1]))
        out[name] = np.concatenate(values).astype(np.float64, copy=False)
        out[f"{field}__offsets"] = np.concatenate([[0], np.cumsum(np.concatenate(lengths))]).astype(
            np.int64
        )
    return out


def member(arrays: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    """A fragment's member ``name``; a provenance column it lacks (written before
    provenance) as its absent value for every cell. O(cells)."""
    if name in arrays or name not in PROVENANCE_ABSENT:
        return np.asarray(arrays[name])
    return np.full(len(arrays["computed"]), PROVENANCE_ABSENT[name], dtype=np.int64)


def write_fragment(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> Path:
    """Write fragment arrays atomically (:func:`attnrmt.sweep.store.atomic.atomic_path`):
    a crash at any point leaves either no file at ``path`` or a complete one. O(bytes)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez(handle, allow_pickle=False, **arrays)
    return Path(path)


def fragment_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """The npz file of fragment arrays (what :func:`write_fragment` writes), in memory.
    O(bytes)."""
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **arrays)
    return buffer.getvalue()


def publish_fragment(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> Path:
    """Write a block's fragment to ``cache/<block>.npz`` and then, as an independent copy, to
    ``fragments/<block>.npz``, both atomically: a visible fragment always has its cache
    entry, so a rerun (which deletes the output first) reuses every cell. O(bytes) written
    and fsynced twice."""
    fragment = Path(path)
    data = fragment_bytes(arrays)
    write_bytes_atomically(twin_of(fragment) or fragment, data)
    write_bytes_atomically(fragment, data)
    return fragment


def salvage_dir(sweep_dir: str | os.PathLike[str], block: str) -> Path:
    """``<sweep>/salvage/<block>/``: the finished tasks of a block not completed yet."""
    return Path(sweep_dir) / SALVAGE_DIRNAME / block


def write_salvage(
    sweep_dir: str | os.PathLike[str], block: str, task: str, arrays: Mapping[str, np.ndarray]
) -> Path:
    """Write the cells of one finished task of ``block`` to ``salvage/<block>/<task>.npz``,
    atomically, not fsynced (a torn file fails the CRC check of every read). O(bytes)."""
    target = salvage_dir(sweep_dir, block) / f"{task}{FRAGMENT_SUFFIX}"
    return write_bytes_atomically(target, fragment_bytes(arrays), durable=False)


def clear_salvage(sweep_dir: str | os.PathLike[str], block: str) -> None:
    """Remove a completed block's salvage (its cells are in its fragment and cache entry):
    ``salvage/<block>/`` and an older run's ``salvage/<block>.npz``. O(files)."""
    shutil.rmtree(salvage_dir(sweep_dir, block), ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        (Path(sweep_dir) / SALVAGE_DIRNAME / f"{block}{FRAGMENT_SUFFIX}").unlink()


# --------------------------------------------------------------------------- integrity


#: The :class:`attnrmt.model.CellResult` fields every non-empty fragment holds: ragged
#: arrays (``<field>__values`` + ``<field>__offsets``), then ``(n,)`` scalar columns.
RAGGED_FIELDS: tuple[str, ...] = ("eigenvalues", *TOP_K_FIELDS, "effective_weights")
RESULT_FIELDS = (
    *RAGGED_FIELDS,
    *POOLING_FIELDS,
    *SIZE_FIELDS,
    "downstream_accuracy",
    "compute_seconds",
)
#: ``<sweep>/damaged/``: damaged files moved aside (never read as fragments).
DAMAGED_DIRNAME = "damaged"


class FragmentDamaged(ValueError):
    """A fragment file whose bytes are not what its writer wrote (CRC32 mismatch, torn
    zip, missing member, inconsistent shapes); ``inode``: of the file read."""

    def __init__(self, path: str | os.PathLike[str], reason: str, inode: int | None = None):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason, self.inode = Path(path), reason, inode


def schema_problem(arrays: Mapping[str, np.ndarray]) -> str | None:
    """What is wrong with a fragment's members, or None: identity members of one shape
    ``(n,)`` and their dtypes, every :data:`RESULT_FIELDS` member (``n > 0``), numeric
    ``(n,)`` columns, ragged fields with float64 values and int64 offsets partitioning them,
    top-k fields of equal offsets. O(members + cells)."""
    missing = [name for name in _META_MEMBERS if name not in arrays]
    if missing:
        return f"missing member {missing[0]!r}"
    if np.ndim(arrays["format_version"]) != 0 or arrays["format_version"].dtype.kind not in "iu":
        return "format_version is not an integer scalar"
    n_cells = int(np.size(arrays["cell_key"]))
    for name, kind in (("cell_key", "U"), ("cell_seed", "U"), ("computed", "b")):
        if arrays[name].shape != (n_cells,) or arrays[name].dtype.kind != kind:
            return f"{name} has shape {arrays[name].shape} and dtype {arrays[name].dtype}"
    if n_cells:
        for field in RESULT_FIELDS:
            if field not in arrays and f"{field}__values" not in arrays:
                return f"missing member {field!r}"
    for name, array in arrays.items():
        if name in _META_MEMBERS or name == ENVIRONMENTS_MEMBER:
            continue
        if name.endswith("__values"):
            problem = _ragged_problem(name[: -len("__values")], arrays, n_cells)
            if problem:
                return problem
        elif name.endswith("__offsets"):
            if f"{name[: -len('__offsets')]}__values" not in arrays:
                return f"{name} without its values"
        elif array.shape != (n_cells,) or array.dtype.kind not in "iuf":
            return f"{name} has shape {array.shape} and dtype {array.dtype} ({n_cells} cells)"
    top_k = [arrays[f"{field}__offsets"] for field in TOP_K_FIELDS if f"{field}__offsets" in arrays]
    if len(top_k) == len(TOP_K_FIELDS) and not all(
        np.array_equal(top_k[0], offsets) for offsets in top_k[1:]
    ):
        return "top-k fields of different lengths"
    return None


def _ragged_problem(field: str, arrays: Mapping[str, np.ndarray], n_cells: int) -> str | None:
    """What is wrong with one ragged field's ``__values`` and ``__offsets``, or None."""
    values, offsets = arrays[f"{field}__values"], arrays.get(f"{field}__offsets")
    if offsets is None:
        return f"{field}__values without its offsets"
    if values.ndim != 1 or values.dtype != np.float64:
        return f"{field}__values has shape {values.shape} and dtype {values.dtype}"
    if offsets.shape != (n_cells + 1,) or offsets.dtype != np.int64:
        return f"{field}__offsets has shape {offsets.shape} ({n_cells} cells)"
    if offsets[0] != 0 or offsets[-1] != values.size or np.any(np.diff(offsets) < 0):
        return f"{field}__offsets do not partition its {values.size} values"
    return None


def _member_spans(data: bytes) -> list[tuple[str, int, int, int, int]]:
    """``(name, data begin, stored size, CRC32, method)`` of every member of the zip ``data``:
    its central directory through :mod:`zipfile`, each member's data found through its
    local header (signature and name must match). O(members); raises on a torn zip."""
    spans = []
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for info in archive.infolist():
            at = info.header_offset
            name_length, extra_length = struct.unpack_from("<HH", data, at + 26)
            name = info.orig_filename.encode("utf-8" if info.flag_bits & 0x800 else "cp437")
            if data[at : at + 4] != b"PK\x03\x04" or data[at + 30 : at + 30 + name_length] != name:
                raise ValueError(f"member {info.filename!r}: bad local header")
            begin = at + 30 + name_length + extra_length
            spans.append((info.filename, begin, info.compress_size, info.CRC, info.compress_type))
    return spans


#: Parsed ``.npy`` headers by their bytes, ``(dtype, shape)``, or None when not a plain
#: C-order header (a sweep's fragments repeat a few dozen headers).
_NPY_HEADERS: dict[bytes, tuple[np.dtype, tuple[int, ...]] | None] = {}


def _npy_array(data: bytes, base: np.ndarray, begin: int, size: int) -> np.ndarray:
    """The array of the ``.npy`` member ``data[begin : begin + size]``: a read-only view
    of ``base`` (``data`` as uint8) for a version-1.0 C-order header (parsed by numpy
    once per process), else :func:`numpy.lib.format.read_array`. O(1) plus the view."""
    plain = data[begin : begin + 8] == b"\x93NUMPY\x01\x00"
    length = int.from_bytes(data[begin + 8 : begin + 10], "little")
    header = data[begin + 10 : begin + 10 + length]
    if plain and header not in _NPY_HEADERS:
        if len(_NPY_HEADERS) >= 4096:
            _NPY_HEADERS.clear()
        stream = io.BytesIO(data[begin : begin + 10 + length])
        np.lib.format.read_magic(stream)
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        _NPY_HEADERS[header] = None if fortran or dtype.hasobject else (dtype, shape)
    parsed = _NPY_HEADERS.get(header) if plain else None
    start = begin + 10 + length
    if parsed is None or start + math.prod(parsed[1]) * parsed[0].itemsize != begin + size:
        stream = io.BytesIO(data[begin : begin + size])
        return np.lib.format.read_array(stream, allow_pickle=False)
    return base[start : begin + size].view(parsed[0]).reshape(parsed[1])


def twin_of(path: str | os.PathLike[str]) -> Path | None:
    """The other copy of a block's fragment: ``<sweep>/cache/<name>`` for
    ``<sweep>/fragments/<name>`` and back; None for any other file (salvage)."""
    path = Path(path)
    twins = {FRAGMENTS_DIRNAME: CACHE_DIRNAME, CACHE_DIRNAME: FRAGMENTS_DIRNAME}
    other = twins.get(path.parent.name)
    return None if other is None else path.parent.parent / other / path.name


def _sweep_of(path: Path) -> tuple[Path, str]:
    """``(sweep directory, "<folder>-...-<name>")`` of a fragment, cache or salvage file."""
    parts = [path.name]
    parent = path.parent
    while parent.name not in (FRAGMENTS_DIRNAME, CACHE_DIRNAME, SALVAGE_DIRNAME):
        if parent == parent.parent:  # not under a sweep's folders: beside the file
            return path.parent, path.name
        parts.insert(0, parent.name)
        parent = parent.parent
    return parent.parent, "-".join([parent.name, *parts])


def quarantine(path: str | os.PathLike[str], inode: int | None = None) -> Path | None:
    """Move a damaged file to ``<sweep>/damaged/<UTC time>-<folder>-<name>``; where, or None
    when it is gone or (``inode`` given) was rewritten since it was read; OSError when it
    cannot be moved (a read-only file system). O(1)."""
    path = Path(path)
    sweep, label = _sweep_of(path)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f".{time.time_ns() % 10**9:09d}"
    target = sweep / DAMAGED_DIRNAME / f"{stamp}-{label}"
    try:
        if inode is not None and os.stat(path).st_ino != inode:
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(path, target)
    except FileNotFoundError:
        return None
    return target


def say(message: str) -> None:
    """``attnrmt: <message>`` on stderr (what the store tells of damage it heals)."""
    print(f"attnrmt: {message}", file=sys.stderr, flush=True)


def _recovered(path: Path, load: Callable[[Path], _T]) -> _T:
    """``load(path)``; a damaged file is moved aside, its twin loaded and copied back in its
    place, and one message says what happened. Raises :class:`FragmentDamaged` when no
    intact twin is left, OSError from ``load``."""
    try:
        return load(path)
    except FragmentDamaged as damage:
        moved = _move_aside(path, damage)
        twin = twin_of(path)
        outcome = "its cells count as missing; rerun the same command to recompute them"
        if twin is not None:
            try:
                result = load(twin)
                _restore(twin, path)
            except FragmentDamaged as twin_damage:
                outcome = (
                    f"its copy {twin} is damaged too ({twin_damage.reason}; moved to "
                    f"{_move_aside(twin, twin_damage)}): {outcome}"
                )
            except OSError:
                pass
            else:
                say(
                    f"damaged fragment {path} ({damage.reason}) moved to {moved}; "
                    f"restored from its intact copy {twin}"
                )
                return result
        say(f"damaged fragment {path} ({damage.reason}) moved to {moved}; {outcome}")
        raise


def _move_aside(path: Path, damage: FragmentDamaged) -> str:
    """:func:`quarantine`, as words for a message (also when it failed)."""
    try:
        moved = quarantine(path, damage.inode)
    except OSError as exc:
        return f"nowhere (it cannot be moved: {exc.strerror})"
    return str(moved) if moved is not None else "(moved or rewritten meanwhile)"


def _restore(twin: Path, path: Path) -> None:
    """Copy the verified bytes of ``twin`` to ``path`` atomically, with its mtime (the
    restored file is as old as its copy, so Snakemake sees nothing new)."""
    data = twin.read_bytes()
    stat = twin.stat()
    try:
        _verified_arrays(twin, data)
    except FragmentDamaged:
        return  # changed under us: leave the path absent, the rerun recomputes
    write_bytes_atomically(path, data)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _verified_arrays(path: Path, data: bytes) -> dict[str, np.ndarray]:
    """Every member of the fragment ``data`` as a read-only array, verified (zip structure,
    CRC32 of each member, :func:`schema_problem`), else :class:`FragmentDamaged`. O(bytes)."""
    try:
        view, base = memoryview(data), np.frombuffer(data, dtype=np.uint8)
        arrays: dict[str, np.ndarray] = {}
        for name, begin, size, crc, method in _member_spans(data):
            if method != zipfile.ZIP_STORED:
                with zipfile.ZipFile(io.BytesIO(data)) as archive:
                    member = io.BytesIO(archive.read(name))
                array = np.lib.format.read_array(member, allow_pickle=False)
            elif zlib.crc32(view[begin : begin + size]) != crc:
                raise ValueError(f"member {name!r}: CRC32 mismatch")
            else:
                array = _npy_array(data, base, begin, size)
            arrays[name.removesuffix(".npy")] = array
    except Exception as exc:  # BadZipFile, zlib.error, struct.error, ...: damage
        raise FragmentDamaged(path, str(exc) or type(exc).__name__) from exc
    problem = schema_problem(arrays)
    if problem is not None:
        raise FragmentDamaged(path, problem)
    return arrays


def load_verified(path: Path) -> dict[str, np.ndarray]:
    """Read ``path`` once and verify it (:func:`_verified_arrays`); the damage carries the
    inode read (so that a file rewritten meanwhile is not moved aside)."""
    with open(path, "rb") as handle:
        inode = os.fstat(handle.fileno()).st_ino
        data = handle.read()
    try:
        return _verified_arrays(path, data)
    except FragmentDamaged as damage:
        raise FragmentDamaged(path, damage.reason, inode) from damage


def read_fragment_arrays(path: str | os.PathLike[str]) -> dict[str, np.ndarray] | None:
    """Every member of a fragment as a read-only array, verified (:func:`_verified_arrays`);
    None if absent, unreadable or damaged (a damaged file is moved aside, and its intact
    twin used and restored when there is one: :func:`_recovered`). O(fragment bytes)."""
    try:
        return _recovered(Path(path), load_verified)
    except (OSError, FragmentDamaged):
        return None


def _load_members(
    path: Path, names: Sequence[str], optional: Collection[str] = ()
) -> dict[str, np.ndarray]:
    """The members ``names`` of a fragment through :mod:`zipfile` (which checks the zip
    structure and the CRC32 of each member read); ``optional`` ones may be absent.
    O(bytes of those members + members)."""
    with open(path, "rb") as handle:
        inode = os.fstat(handle.fileno()).st_ino
        try:
            with zipfile.ZipFile(handle) as archive:
                present = set(archive.namelist())
                arrays = {}
                for name in names:
                    if f"{name}.npy" not in present:
                        if name in optional:
                            continue
                        raise ValueError(f"missing member {name!r}")
                    member = archive.read(f"{name}.npy")
                    arrays[name] = np.lib.format.read_array(io.BytesIO(member), allow_pickle=False)
            shapes = {
                np.shape(arrays[name])
                for name in ("cell_key", "cell_seed", "computed")
                if name in arrays
            }
            if len(shapes) > 1 or any(len(shape) != 1 for shape in shapes):
                raise ValueError(f"cell_key, cell_seed, computed of shapes {sorted(shapes)}")
        except Exception as exc:  # BadZipFile, CRC, a seek out of the file (EINVAL), EIO
            # of a bad sector, NotImplementedError (a flipped version): the file is open,
            # so each is a verdict on its bytes
            raise FragmentDamaged(path, str(exc) or type(exc).__name__, inode) from exc
    return arrays


def read_fragment_members(
    path: str | os.PathLike[str], names: Sequence[str], optional: Collection[str] = ()
) -> dict[str, np.ndarray]:
    """Some members of a fragment, verified as read (:func:`_load_members`; damage handled as
    by :func:`_recovered`, which raises ``FragmentDamaged`` or ``OSError``). O(their bytes)."""
    return _recovered(Path(path), lambda file: _load_members(file, names, optional))


def read_fragment_cell_ids(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """``(cell_key, cell_seed)`` of each cell of a fragment, reading only those members
    (:func:`read_fragment_members`)."""
    arrays = read_fragment_members(path, ("cell_key", "cell_seed"))
    return list(zip(arrays["cell_key"].tolist(), arrays["cell_seed"].tolist(), strict=True))


class FragmentsLost(RuntimeError):
    """A gather found input fragments damaged beyond repair (moved aside)."""


def raise_for_lost_fragments(paths: Iterable[str | os.PathLike[str]]) -> None:
    """For rule ``gather_cells``: raise :class:`FragmentsLost` naming the input fragments
    moved aside as damaged (the rerun recomputes their cells). O(paths) ``stat`` calls."""
    lost = [Path(path) for path in paths if not os.path.exists(path)]
    if lost:
        names = ", ".join(str(path) for path in lost[:5]) + (" ..." if len(lost) > 5 else "")
        raise FragmentsLost(
            f"{len(lost)} damaged fragment(s) moved aside ({names}): their cells are "
            f"missing from the store; rerun the same command to recompute them"
        )


def _fragment_entries(directory: str) -> list[os.DirEntry[str]]:
    """Complete fragment files of one sweep directory, in reading order: ``fragments/``,
    ``salvage/`` (old-style files and each block's task files), ``cache/``; names sorted
    within each; temporaries (dot names) left out. O(files) directory reads, no
    :class:`~pathlib.Path` per file."""
    found: list[os.DirEntry[str]] = []
    for sub in (FRAGMENTS_DIRNAME, SALVAGE_DIRNAME, CACHE_DIRNAME):
        pending = [os.path.join(directory, sub)]
        while pending:
            try:
                entries = sorted(os.scandir(pending.pop(0)), key=lambda entry: entry.name)
            except OSError:  # no such directory
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                if entry.name.endswith(FRAGMENT_SUFFIX):
                    found.append(entry)
                elif sub == SALVAGE_DIRNAME and entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
    return found


def fragment_paths(sweep_dir: str | os.PathLike[str]) -> list[Path]:
    """Every complete fragment file of a sweep: current and orphaned (``fragments/``),
    salvaged (``salvage/``), cached (``cache/``), in that order (names sorted within
    each). O(files) directory reads."""
    return [Path(entry.path) for entry in _fragment_entries(os.fspath(sweep_dir))]


Signature = tuple[int, int, int, int]
"""A file's identity: device, inode, size, mtime (ns). Fragments are only ever replaced
atomically, so a changed file has a new signature."""


def _key_prefixes(keys: np.ndarray) -> np.ndarray:
    """The first 8 bytes of each raw cell key (``S32``, :func:`key_bytes`) as uint64 (keys
    are sha256 digests: a uniform 64-bit hash). O(n) vectorised."""
    raw = np.ascontiguousarray(keys, dtype="S32").view(np.uint8).reshape(-1, 32)
    return np.ascontiguousarray(raw[:, :8]).view(">u8").reshape(-1).astype(np.uint64)


class CellIndex:
    """The one index of finished cells (``docs/architecture.md``, "Cell identity"): per
    fragment file (by :data:`Signature`), its cells' sorted fingerprints
    (:func:`cell_id_hashes`) and key prefixes, read once per process, verified (a damaged
    file holds nothing). Every :data:`MERGE_EVERY` new files the fingerprints are merged
    into one sorted array, so a lookup is a binary search there plus one per unmerged file.
    Memory O(24 bytes x cells of the run). Thread-safe (block jobs are threads)."""

    MERGE_EVERY = 64

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._prefixes: dict[Signature, np.ndarray] = {}
        self._pending: dict[Signature, np.ndarray] = {}
        self._merged_hashes = np.zeros(0, dtype=np.uint64)
        self._merged_owner = np.zeros(0, dtype=np.int64)
        self._owners: list[Signature] = []

    def _read(self, path: str, signature: Signature) -> bool:
        """Index the file on first sight; whether it is readable. O(its cells)."""
        with self._lock:
            if signature in self._prefixes:
                return True
        try:
            ids = read_fragment_cell_ids(path)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return False
        keys = key_bytes([key for key, _ in ids])
        hashes = np.sort(id_digests(cell_ids(keys, root_seeds_of([seed for _, seed in ids]))))
        with self._lock:
            if signature not in self._prefixes:
                self._prefixes[signature] = _key_prefixes(keys)
                self._pending[signature] = hashes
        return True

    def _merge(self) -> None:
        """Fold the pending files into the merged arrays (lock held)."""
        owners = [self._merged_owner]
        for signature, hashes in self._pending.items():
            owners.append(np.full(hashes.size, len(self._owners), dtype=np.int64))
            self._owners.append(signature)
        all_hashes = np.concatenate([self._merged_hashes, *self._pending.values()])
        order = np.argsort(all_hashes, kind="stable")
        self._merged_hashes = all_hashes[order]
        self._merged_owner = np.concatenate(owners)[order]
        self._pending = {}

    def locate(self, hashes: np.ndarray, files: Sequence[tuple[str, Signature]]) -> np.ndarray:
        """For each fingerprint, the position in ``files`` (candidates in preference order)
        of the first file holding it, or -1. O(files + wanted x (log cells + unmerged
        files))."""
        readable = [self._read(path, signature) for path, signature in files]
        position_of = {
            sig: i for i, ((_, sig), ok) in enumerate(zip(files, readable, strict=True)) if ok
        }
        where = np.full(hashes.size, len(files), dtype=np.int64)
        with self._lock:
            if len(self._pending) >= self.MERGE_EVERY:
                self._merge()
            pending = [(position_of[s], h) for s, h in self._pending.items() if s in position_of]
            merged, owner = self._merged_hashes, self._merged_owner
            rank = np.array([position_of.get(s, len(files)) for s in self._owners] + [len(files)])
        for position, file_hashes in pending:
            if file_hashes.size:
                probe = np.minimum(np.searchsorted(file_hashes, hashes), file_hashes.size - 1)
                hit = file_hashes[probe] == hashes
                where[hit] = np.minimum(where[hit], position)
        if merged.size:
            lo = np.searchsorted(merged, hashes, side="left")
            hi = np.searchsorted(merged, hashes, side="right")
            for index in np.flatnonzero(hi > lo).tolist():
                best = int(rank[owner[lo[index] : hi[index]]].min())
                where[index] = min(where[index], best)
        where[where == len(files)] = -1
        return where

    def has_keys(self, prefixes: np.ndarray, files: Sequence[tuple[str, Signature]]) -> np.ndarray:
        """Whether some file of ``files`` holds a cell of each key prefix (any seed).
        O(cells of the files + wanted) x log."""
        held = [self._prefixes.get(sig) for path, sig in files if self._read(path, sig)]
        found = np.concatenate([np.zeros(0, np.uint64), *[p for p in held if p is not None]])
        return np.isin(prefixes, found)


_INDEX = CellIndex()


def fragment_files(
    sweep_dir: str | os.PathLike[str],
    exclude: Iterable[str | os.PathLike[str]] = (),
    run_wide: bool = False,
) -> list[tuple[str, Signature]]:
    """``(path, signature)`` of the complete fragments of a sweep (with ``run_wide``, then
    of the run's other sweeps, its sibling folders): ``fragments/``, ``salvage/``,
    ``cache/``, names sorted, a ``cache/`` twin of a listed fragment left out (read
    instead when that one is damaged). O(files) ``stat`` calls."""
    excluded = {os.path.realpath(path) for path in exclude}
    sweep = Path(sweep_dir).resolve()
    directories = [str(sweep)]
    if run_wide and sweep.parent.is_dir():
        directories += sorted(
            str(path) for path in sweep.parent.iterdir() if path.is_dir() and path != sweep
        )
    files: list[tuple[str, Signature]] = []
    for directory in directories:
        entries = [entry for entry in _fragment_entries(directory) if entry.path not in excluded]
        listed = {entry.path for entry in entries}
        for entry in entries:
            head, name = os.path.split(entry.path)
            sweep_path, sub = os.path.split(head)
            if sub == CACHE_DIRNAME and os.path.join(sweep_path, FRAGMENTS_DIRNAME, name) in listed:
                continue  # read its fragments/ twin (restored from this one if damaged)
            try:
                stat = entry.stat()
            except OSError:  # replaced or removed since the listing
                continue
            files.append((entry.path, (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)))
    return files


def locate_cells(
    wanted: Sequence[tuple[str, str]],
    sweep_dir: str | os.PathLike[str],
    exclude: Iterable[str | os.PathLike[str]] = (),
    run_wide: bool = False,
) -> dict[tuple[str, str], Path]:
    """A fragment that holds each wanted ``(cell_key, cell_seed)`` found (by fingerprint:
    confirm with :func:`load_cell_columns`, which matches the full key and seed), the
    first in :func:`fragment_files`' order. What a block job asks before computing;
    run-wide, a cell two sweeps share is computed once. O(files) ``stat`` calls plus
    :meth:`CellIndex.locate`."""
    files = fragment_files(sweep_dir, exclude, run_wide)
    where = _INDEX.locate(cell_id_hashes(wanted), files)
    return {wanted[i]: Path(files[p][0]) for i, p in enumerate(where.tolist()) if p >= 0}


def finished_keys(keys: Sequence[str], sweep_dir: str | os.PathLike[str]) -> set[str]:
    """The ``keys`` of which a fragment of the sweep holds a cell (any seed): what
    ``attnrmt plan``, ``attnrmt status`` and the failure records count as done.
    O(files) ``stat`` calls plus :meth:`CellIndex.has_keys`."""
    found = _INDEX.has_keys(_key_prefixes(key_bytes(keys)), fragment_files(sweep_dir))
    return {key for key, hit in zip(keys, found.tolist(), strict=True) if hit}


def load_cell_columns(
    wanted: Iterable[tuple[str, str]], index: Mapping[tuple[str, str], Path]
) -> tuple[list[dict[str, np.ndarray]], dict[tuple[str, str], tuple[int, int]]]:
    """The wanted ``(cell_key, cell_seed)`` found in ``index``: the columns of the files
    holding them (each read once and verified, :func:`read_fragment_arrays`) and where
    each cell is in them, ``{cell id: (source, row)}`` for :func:`take_cells`. An unreadable
    file contributes nothing (its cells are recomputed). O(bytes of those files)."""
    by_path: dict[Path, set[tuple[str, str]]] = {}
    for cell_id in wanted:
        if cell_id in index:
            by_path.setdefault(index[cell_id], set()).add(cell_id)
    sources: list[dict[str, np.ndarray]] = []
    where: dict[tuple[str, str], tuple[int, int]] = {}
    for path, ids in by_path.items():
        arrays = read_fragment_arrays(path)
        if arrays is None:
            continue
        source = len(sources)
        sources.append(arrays)
        for row, cell_id in enumerate(
            zip(arrays["cell_key"].tolist(), arrays["cell_seed"].tolist(), strict=True)
        ):
            if cell_id in ids:
                where[cell_id] = (source, row)
    return sources, where
