"""Block fragments (npz): the write-once record of finished cells, and the reuse cache.

``results/<run>/<sweep>/fragments/<block>.npz`` holds the results of one block's cells,
written atomically (temporary file in the same directory, then :func:`os.replace`), never
pickled. Per cell: ``cell_key`` (sha256 of the canonical parameters), ``cell_seed`` (the
seed words as JSON), ``computed`` (True when computed by the job that wrote the fragment,
False when copied from an earlier fragment), and every :class:`attnrmt.model.CellResult`
field: scalars as ``(n,)`` arrays, arrays ragged as ``<field>__values`` (concatenated) and
``<field>__offsets`` (``(n+1,)``). Provenance (:mod:`attnrmt.sweep.provenance`):
``environments`` (distinct environment JSON) and per cell ``environment_id``,
``peak_memory_bytes``, ``attempt``; fragments written before provenance lack them and
still load (their cells get :data:`attnrmt.contract.PROVENANCE_ABSENT`). A block whose
cells partly failed leaves its finished cells in ``<sweep>/salvage/<block>.npz`` (same
format; never a Snakemake output) so that a rerun reuses them
(failure records: :mod:`attnrmt.sweep.failures`).

Snakemake deletes a job's output before rerunning it (forced rerun, changed rule code),
so every fragment also gets a hard link (a copy where links are unsupported) in
``<sweep>/cache/``, which no rule owns: finished cells survive any rerun and are reused
bit for bit. Remove a sweep's directory to recompute it from scratch.

Reuse is by ``(cell_key, cell_seed)`` across every fragment of the *run*
(:func:`fragment_index` with ``run_wide=True`` looks in sibling sweeps too), so a cell two
sweeps share is computed once. Block jobs ask :func:`locate_cells` (64-bit fingerprints of
the ids, read once per process) for just their own cells, so the cost per block does not
grow with the cells the run has finished.

Lifecycle: block jobs write fragments (this module) -> ``gather_cells`` appends them to the
cell table (:mod:`attnrmt.sweep.table_writer`) -> readers open the table
(:mod:`attnrmt.sweep.table_reader`). See ``docs/data-contract.md``, "Fragments".
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import shutil
import struct
import threading
import uuid
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.sweep.provenance import (
    ENVIRONMENTS_MEMBER,
    PROVENANCE_KEYS,
    decode_provenance,
    encode_provenance,
)

FRAGMENT_FORMAT_VERSION = 1
FRAGMENTS_DIRNAME = "fragments"
SALVAGE_DIRNAME = "salvage"
CACHE_DIRNAME = "cache"
FRAGMENT_SUFFIX = ".npz"


def temporary_sibling(target: Path) -> Path:
    """A unique temporary name beside ``target`` (``.<name>.<pid>.<random>.tmp``).

    Temporary names start with ``.`` and end with ``.tmp``; no reader ever takes them for
    a fragment or a store.
    """
    return target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


@dataclass(frozen=True)
class Fragment:
    """Decoded content of one fragment file.

    Attributes
    ----------
    cell_keys : list of str
    cell_seeds : list of str
        Seed words of each cell as JSON (``"[w0, w1, ...]"``).
    computed : ndarray of bool
        Whether each cell was computed by the job that wrote the fragment (else reused).
    records : list of dict
        One ``CellResult.to_dict()``-like dict per cell (arrays as float64 ndarrays).
    """

    cell_keys: list[str]
    cell_seeds: list[str]
    computed: np.ndarray
    records: list[dict[str, Any]]


def seed_token(seed_words: Sequence[int]) -> str:
    """Canonical text of a cell's seed words (used to match reusable results)."""
    return json.dumps([int(word) for word in seed_words], separators=(",", ":"))


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


def decode_fragment(arrays: Mapping[str, np.ndarray]) -> Fragment:
    """Inverse of :func:`encode_fragment`."""
    keys = [str(key) for key in arrays["cell_key"]]
    n_cells = len(keys)
    records: list[dict[str, Any]] = [{} for _ in range(n_cells)]
    for index, known in enumerate(decode_provenance(arrays, n_cells)):
        records[index].update(known)
    for name in arrays:
        if name in (
            "format_version",
            "cell_key",
            "cell_seed",
            "computed",
            ENVIRONMENTS_MEMBER,
            *PROVENANCE_KEYS,
        ):
            continue
        if name.endswith("__offsets"):
            continue
        if name.endswith("__values"):
            field = name[: -len("__values")]
            flat = np.asarray(arrays[name])
            offsets = np.asarray(arrays[f"{field}__offsets"])
            for index in range(n_cells):
                records[index][field] = flat[offsets[index] : offsets[index + 1]].copy()
        else:
            column = np.asarray(arrays[name])
            for index in range(n_cells):
                records[index][name] = column[index].item()
    return Fragment(
        cell_keys=keys,
        cell_seeds=[str(seed) for seed in arrays["cell_seed"]],
        computed=np.asarray(arrays["computed"], dtype=bool),
        records=records,
    )


def write_fragment(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> Path:
    """Write fragment arrays atomically: temp file in the same directory, fsync, replace.

    A crash at any point leaves either no file at ``path`` or a complete one; temporary
    files start with ``.`` and end with ``.tmp`` and are never read as fragments.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(target)
    try:
        with open(tmp, "wb") as handle:
            np.savez(handle, allow_pickle=False, **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return target


def _link_or_copy(source: Path, target: Path) -> None:
    """Atomically make ``target`` a hard link of ``source`` (a copy where links fail)."""
    tmp = temporary_sibling(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        try:
            os.link(source, tmp)
        except OSError:
            shutil.copyfile(source, tmp)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError, OSError):
            tmp.unlink()


def publish_fragment(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> Path:
    """Write a block's fragment so that its cells outlive Snakemake's output handling.

    The arrays go atomically to ``<sweep>/cache/<block>.npz`` first, which no rule owns,
    then that file is hard-linked (atomically; copied where links fail) to
    ``<sweep>/fragments/<block>.npz``. A visible fragment therefore always has its cache
    entry, so a rerun of the job (forced, code-triggered, or marked incomplete because
    Snakemake was killed between the write and its bookkeeping), which deletes the output
    first, reuses every cell instead of recomputing it.
    """
    fragment = Path(path)
    cached = write_fragment(fragment.parent.parent / CACHE_DIRNAME / fragment.name, arrays)
    _link_or_copy(cached, fragment)
    return fragment


def read_fragment(path: str | os.PathLike[str]) -> Fragment:
    """Read a fragment written by :func:`write_fragment`."""
    with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as npz:
        return decode_fragment({name: npz[name] for name in npz.files})


#: Header of a C-order ``.npy`` member (what :func:`numpy.savez` writes for plain arrays).
_NPY_HEADER = re.compile(
    r"\{'descr': '([<>|=][a-zA-Z][0-9]*)', 'fortran_order': False, 'shape': \(([0-9, ]*)\), \}"
)
#: Parsed ``.npy`` headers by their bytes: ``(dtype, shape, count)``, or None when not a
#: plain header. Fragments of one sweep repeat a few dozen headers, so a header is parsed
#: once per process. Cleared when it grows past :data:`_HEADER_CACHE_SIZE` entries.
_HEADER_CACHE: dict[bytes, tuple[np.dtype, tuple[int, ...], int] | None] = {}
_HEADER_CACHE_SIZE = 4096
#: Local file header of a zip member: signature, version, flags, method, time, date, crc,
#: compressed size, uncompressed size, name length, extra length (30 bytes).
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")


def _parse_npy_header(header: bytes) -> tuple[np.dtype, tuple[int, ...], int] | None:
    """``(dtype, shape, number of items)`` of a plain C-order ``.npy`` header, or None."""
    match = _NPY_HEADER.match(header.decode("latin1"))
    if match is None:
        return None
    shape = tuple(int(n) for n in match.group(2).replace(" ", "").split(",") if n)
    return np.dtype(match.group(1)), shape, math.prod(shape)


def _npy_array(data: bytes, base: np.ndarray, begin: int, size: int) -> np.ndarray | None:
    """The array of the ``.npy`` member ``data[begin : begin + size]`` as a read-only view
    of ``base`` (``data`` as uint8), or None when its header is not a plain C-order
    non-object array (then :func:`numpy.load` reads it). O(1) besides the view: headers
    are parsed once per process (:data:`_HEADER_CACHE`)."""
    if data[begin : begin + 6] != b"\x93NUMPY" or data[begin + 6] not in (1, 2, 3):
        return None
    width = 2 if data[begin + 6] == 1 else 4
    length = int.from_bytes(data[begin + 8 : begin + 8 + width], "little")
    start = begin + 8 + width
    header = data[start : start + length]
    parsed = _HEADER_CACHE.get(header, False)
    if parsed is False:
        if len(_HEADER_CACHE) >= _HEADER_CACHE_SIZE:
            _HEADER_CACHE.clear()
        parsed = _HEADER_CACHE[header] = _parse_npy_header(header)
    if parsed is None:
        return None
    dtype, shape, count = parsed
    start += length
    if start + count * dtype.itemsize > begin + size:
        return None
    return base[start : start + count * dtype.itemsize].view(dtype).reshape(shape)


#: The zip64 extra field :func:`numpy.savez` writes: tag 1, 16 bytes of sizes.
_ZIP64_EXTRA = struct.Struct("<HHQQ")


def _zip64_size(extra: bytes) -> int | None:
    """Compressed size from a zip64 extra field (tag 1: uncompressed then compressed
    size, 8 bytes each), or None."""
    if len(extra) == _ZIP64_EXTRA.size:  # numpy.savez's: that field alone
        tag, length, _, compressed = _ZIP64_EXTRA.unpack_from(extra)
        if tag == 1 and length == 16:
            return int(compressed)
    cursor = 0
    while cursor + 4 <= len(extra):
        tag = int.from_bytes(extra[cursor : cursor + 2], "little")
        length = int.from_bytes(extra[cursor + 2 : cursor + 4], "little")
        if tag == 1 and length >= 16:
            return int.from_bytes(extra[cursor + 12 : cursor + 20], "little")
        cursor += 4 + length
    return None


def _member_spans(data: bytes) -> list[tuple[str, int, int]] | None:
    """``(name, begin, size)`` of every member of an uncompressed zip, walking its local
    headers (what :func:`numpy.savez` writes: stored, sizes in the header or its zip64
    extra); None for anything else (compressed members, data descriptors, trailing
    garbage). O(members)."""
    spans = []
    unpack = _LOCAL_HEADER.unpack_from
    at = 0
    end = len(data)
    while at + 30 <= end and data[at : at + 4] == b"PK\x03\x04":
        (_, _, flags, method, _, _, _, _, size, name_length, extra_length) = unpack(data, at)
        if flags & 0x08 or method != zipfile.ZIP_STORED:
            return None
        name_end = at + 30 + name_length
        name = data[at + 30 : name_end].decode("utf-8")
        if size == 0xFFFFFFFF:
            size = _zip64_size(data[name_end : name_end + extra_length])
            if size is None:
                return None
        begin = name_end + extra_length
        if begin + size > end:
            return None
        spans.append((name, begin, size))
        at = begin + size
    return spans if data[at : at + 4] == b"PK\x01\x02" else None


def _stored_members(data: bytes) -> list[tuple[str, memoryview]] | None:
    """``(name, bytes)`` of every member of an uncompressed zip (views of ``data``), or
    None (:func:`_member_spans`)."""
    spans = _member_spans(data)
    view = memoryview(data)
    return (
        None
        if spans is None
        else [(name, view[begin : begin + size]) for name, begin, size in spans]
    )


def read_fragment_arrays(path: str | os.PathLike[str]) -> dict[str, np.ndarray] | None:
    """Every member of a fragment as an array (read-only), or None if unreadable or torn.

    The same arrays as :func:`numpy.load` (``allow_pickle=False``), ~30x faster on
    small fragments: the file is read once, its stored members are located by their
    local headers (:func:`_member_spans`, which requires the central directory right
    after the last member) and their ``.npy`` headers parsed by a regular expression
    once per process (:func:`_npy_array`; ``numpy.load`` opens each member through
    :mod:`zipfile` and parses its header with :func:`ast.literal_eval`); any other file
    or member goes through :func:`numpy.load`. The arrays are read-only views of the
    file's bytes. O(fragment bytes) to read, O(members) to parse: ~0.1 ms for a fragment
    of 31 members (the +1% update of a 10^6-cell sweep reads ~1,000 of them).
    """
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        spans = _member_spans(data)
        if spans is None:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                members = [(info.filename, archive.read(info)) for info in archive.infolist()]
            data = b"".join(member for _, member in members)
            spans, at = [], 0
            for filename, member in members:
                spans.append((filename, at, len(member)))
                at += len(member)
        base = np.frombuffer(data, dtype=np.uint8)
        arrays: dict[str, np.ndarray] = {}
        for filename, begin, size in spans:
            name = filename.removesuffix(".npy")
            array = _npy_array(data, base, begin, size)
            if array is None:
                with np.load(path, allow_pickle=False) as npz:
                    array = npz[name]
            arrays[name] = array
        return arrays
    except Exception:  # OSError, BadZipFile, zlib.error, ...: a torn or foreign file
        return None


def read_fragment_cell_ids(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """``(cell_key, cell_seed)`` of each cell of a fragment, reading only those members."""
    with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as npz:
        return list(zip(npz["cell_key"].tolist(), npz["cell_seed"].tolist(), strict=True))


def fragment_paths(sweep_dir: str | os.PathLike[str]) -> list[Path]:
    """All complete fragment files of a sweep (current, orphaned, salvaged, cached), sorted."""
    sweep = Path(sweep_dir)
    found: list[Path] = []
    for sub in (FRAGMENTS_DIRNAME, SALVAGE_DIRNAME, CACHE_DIRNAME):
        directory = sweep / sub
        if directory.is_dir():
            found.extend(
                path
                for path in directory.iterdir()
                if path.name.endswith(FRAGMENT_SUFFIX) and not path.name.startswith(".")
            )
    return sorted(found)


_CELL_ID_CACHE: dict[tuple[int, int, int, int], list[tuple[str, str]]] = {}
_CELL_ID_CACHE_LOCK = threading.Lock()


def cached_fragment_cell_ids(path: Path) -> list[tuple[str, str]]:
    """:func:`read_fragment_cell_ids`, cached in-process by (device, inode, size, mtime).

    Block jobs run as threads of one Snakemake process, so each fragment's keys are read
    once per run instead of once per job (thousands of fragments stay cheap: a ``stat``
    each; a fragment and its hard link in ``cache/`` are read once). Fragments are replaced
    atomically, so a changed file has a new inode/mtime.
    """
    stat = path.stat()
    signature = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    with _CELL_ID_CACHE_LOCK:
        cached = _CELL_ID_CACHE.get(signature)
    if cached is not None:
        return cached
    ids = read_fragment_cell_ids(path)
    with _CELL_ID_CACHE_LOCK:
        _CELL_ID_CACHE[signature] = ids
    return ids


def fragment_index(
    sweep_dir: str | os.PathLike[str],
    exclude: Iterable[str | os.PathLike[str]] = (),
    run_wide: bool = False,
) -> dict[tuple[str, str], Path]:
    """Map ``(cell_key, cell_seed)`` to a fragment holding that finished cell.

    With ``run_wide``, the fragments of the run's other sweeps (sibling directories of
    ``sweep_dir``) are searched too, after the sweep's own: a cell shared by two sweeps of
    a run (same key and seed) is then reused instead of recomputed. Unreadable files (e.g.
    truncated by a crash of an older writer) are skipped. O(fragments) ``stat`` calls;
    each file's keys are read once per process (:func:`cached_fragment_cell_ids`).
    """
    excluded = {Path(path).resolve() for path in exclude}
    sweep = Path(sweep_dir).resolve()
    directories = [sweep]
    if run_wide and sweep.parent.is_dir():
        directories += sorted(
            path for path in sweep.parent.iterdir() if path.is_dir() and path != sweep
        )
    index: dict[tuple[str, str], Path] = {}
    for directory in directories:
        for path in fragment_paths(directory):
            if path in excluded:
                continue
            try:
                ids = cached_fragment_cell_ids(path)
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
                continue
            for cell_id in ids:
                index.setdefault(cell_id, path)
    return index


def cell_id_hashes(cell_ids: Iterable[tuple[str, str]]) -> np.ndarray:
    """64-bit fingerprints of ``(cell_key, cell_seed)`` pairs, ``(n,)`` uint64.

    The first 8 bytes of ``blake2b(key + "|" + seed)``. Only a pre-filter: a match is
    always confirmed on the full key and seed (:func:`load_cell_records`), so a collision
    (probability ~ n^2 / 2^64) can only make a cell be recomputed, never reused wrongly.
    O(n).
    """
    return np.fromiter(
        (
            int.from_bytes(
                hashlib.blake2b(f"{key}|{seed}".encode(), digest_size=8).digest(), "little"
            )
            for key, seed in cell_ids
        ),
        dtype=np.uint64,
    )


Signature = tuple[int, int, int, int]
"""A file's identity: device, inode, size, mtime (ns). Fragments are only ever replaced
atomically, so a changed file has a new signature."""


def _read_file_hashes(path: str) -> np.ndarray:
    """Sorted :func:`cell_id_hashes` of one fragment file's cells. O(cells of the file)."""
    with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as npz:
        ids = zip(npz["cell_key"].tolist(), npz["cell_seed"].tolist(), strict=True)
        return np.sort(cell_id_hashes(ids))


class CellLocator:
    """In-process index of the cell-id fingerprints of fragment files, by file identity.

    Block jobs are threads of one Snakemake process: each fragment of the run is read
    once per process (its ``cell_key`` and ``cell_seed`` members) and kept as 8 bytes per
    cell. Files seen in at least :data:`MERGE_EVERY` calls' worth of new files are merged
    into one sorted array (fingerprints and owning file), so a lookup costs one binary
    search there plus one per file not merged yet, instead of one per file of the run.
    Memory O(16 bytes x cells of the run); a merge O(cells log cells), every
    :data:`MERGE_EVERY` new files. Thread-safe.
    """

    MERGE_EVERY = 64

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[Signature, np.ndarray] = {}
        self._merged_hashes = np.zeros(0, dtype=np.uint64)
        self._merged_owner = np.zeros(0, dtype=np.int64)
        self._owners: list[Signature] = []
        self._merged: set[Signature] = set()

    def _file(self, path: str, signature: Signature) -> np.ndarray | None:
        """The file's sorted fingerprints if it is not merged yet (read on first sight);
        None when merged."""
        with self._lock:
            if signature in self._merged:
                return None
            cached = self._pending.get(signature)
        if cached is None:
            cached = _read_file_hashes(path)
            with self._lock:
                self._pending[signature] = cached
                if len(self._pending) >= self.MERGE_EVERY:
                    self._merge()
        return cached

    def _merge(self) -> None:
        """Fold the pending files into the merged arrays (lock held)."""
        hashes = [self._merged_hashes]
        owners = [self._merged_owner]
        for signature, file_hashes in self._pending.items():
            owners.append(np.full(file_hashes.size, len(self._owners), dtype=np.int64))
            hashes.append(file_hashes)
            self._owners.append(signature)
            self._merged.add(signature)
        all_hashes = np.concatenate(hashes)
        order = np.argsort(all_hashes, kind="stable")
        self._merged_hashes = all_hashes[order]
        self._merged_owner = np.concatenate(owners)[order]
        self._pending = {}

    def locate(self, hashes: np.ndarray, files: Sequence[tuple[str, Signature]]) -> np.ndarray:
        """For each fingerprint, the position in ``files`` of a file holding it, or -1.

        ``files`` are the candidate fragments in preference order; a fingerprint is
        attributed to the first of them that holds it.
        """
        where = np.full(hashes.size, -1, dtype=np.int64)
        position_of = {signature: position for position, (_, signature) in enumerate(files)}
        for position, (path, signature) in enumerate(files):
            try:
                file_hashes = self._file(path, signature)
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
                continue
            if file_hashes is not None and file_hashes.size:
                _mark(where, hashes, file_hashes, position, position_of)
        with self._lock:
            merged_hashes, merged_owner = self._merged_hashes, self._merged_owner
            owners = list(self._owners)
        if merged_hashes.size:
            rank = np.array(
                [position_of.get(signature, len(files)) for signature in owners] + [len(files)],
                dtype=np.int64,
            )
            lo = np.searchsorted(merged_hashes, hashes, side="left")
            hi = np.searchsorted(merged_hashes, hashes, side="right")
            for index in np.flatnonzero(hi > lo).tolist():
                best = int(rank[merged_owner[lo[index] : hi[index]]].min())
                if best < len(files) and (where[index] < 0 or best < where[index]):
                    where[index] = best
        return where


def _mark(
    where: np.ndarray,
    hashes: np.ndarray,
    file_hashes: np.ndarray,
    position: int,
    position_of: Mapping[Signature, int],
) -> None:
    """Set ``where`` to ``position`` for the fingerprints ``file_hashes`` holds, unless an
    earlier file already holds them."""
    probe = np.minimum(np.searchsorted(file_hashes, hashes), file_hashes.size - 1)
    hit = (file_hashes[probe] == hashes) & ((where < 0) | (where > position))
    where[hit] = position


_LOCATOR = CellLocator()


def _run_fragment_files(
    sweep_dir: Path, excluded: set[str], run_wide: bool
) -> list[tuple[str, Signature]]:
    """``(path, signature)`` of every complete fragment :func:`fragment_index` searches,
    in its order (the sweep's own first; ``cache/``, ``fragments/``, ``salvage/``; names
    sorted), each file content once (a fragment and its hard link in ``cache/`` share a
    signature). O(files) ``stat`` calls, no :class:`~pathlib.Path` per file."""
    sweep = sweep_dir.resolve()
    directories = [str(sweep)]
    if run_wide and sweep.parent.is_dir():
        directories += sorted(
            str(path) for path in sweep.parent.iterdir() if path.is_dir() and path != sweep
        )
    seen: set[Signature] = set()
    files: list[tuple[str, Signature]] = []
    for directory in directories:
        for sub in sorted((FRAGMENTS_DIRNAME, SALVAGE_DIRNAME, CACHE_DIRNAME)):
            try:
                entries = sorted(
                    (entry.name, entry)
                    for entry in os.scandir(os.path.join(directory, sub))
                    if entry.name.endswith(FRAGMENT_SUFFIX) and not entry.name.startswith(".")
                )
            except OSError:  # no such directory
                continue
            for _, entry in entries:
                if entry.path in excluded:
                    continue
                try:
                    stat = entry.stat()
                except OSError:  # replaced or removed since the listing
                    continue
                signature = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
                if signature not in seen:
                    seen.add(signature)
                    files.append((entry.path, signature))
    return files


def locate_cells(
    wanted: Sequence[tuple[str, str]],
    sweep_dir: str | os.PathLike[str],
    exclude: Iterable[str | os.PathLike[str]] = (),
    run_wide: bool = False,
) -> dict[tuple[str, str], Path]:
    """A fragment that probably holds each wanted ``(cell_key, cell_seed)``, for the ones
    found (the same files, in the same order, as :func:`fragment_index`; confirm with
    :func:`load_cell_records`, which matches the full key and seed).

    What a block job asks before computing. Unlike :func:`fragment_index` it builds no
    map of every finished cell of the run, which cost O(cells of the run) per block, so
    O(blocks x cells) per run (2.7 s per block at 10^6 cells, and ~400 MB). The
    fingerprints of each fragment (:func:`cell_id_hashes`) are read once per process
    (:class:`CellLocator`): memory O(16 bytes x cells of the run); time per call
    O(files) ``stat`` calls plus O(wanted x (log cells + unmerged files)).
    """
    excluded = {os.path.realpath(path) for path in exclude}
    files = _run_fragment_files(Path(sweep_dir), excluded, run_wide)
    where = _LOCATOR.locate(cell_id_hashes(wanted), files)
    return {
        wanted[index]: Path(files[position][0])
        for index, position in enumerate(where.tolist())
        if position >= 0
    }


def write_json_atomically(path: str | os.PathLike[str], payload: Mapping[str, Any]) -> Path:
    """Write JSON to ``path`` via a temporary file in the same directory and ``os.replace``
    (readers see the old file or the new one, never a partial one)."""
    target = Path(path)
    tmp = temporary_sibling(target)
    try:
        tmp.write_text(json.dumps(dict(payload), indent=1, sort_keys=True, default=str))
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return target


def finished_cell_keys(sweep_dir: str | os.PathLike[str]) -> set[str]:
    """Keys of every cell with a finished result in a sweep's fragments (any block)."""
    return {key for key, _ in fragment_index(sweep_dir)}


def load_cell_records(
    wanted: Iterable[tuple[str, str]], index: Mapping[tuple[str, str], Path]
) -> dict[tuple[str, str], dict[str, Any]]:
    """Records of the wanted ``(cell_key, cell_seed)`` found in ``index`` (each file read once)."""
    by_path: dict[Path, set[tuple[str, str]]] = {}
    for cell_id in wanted:
        if cell_id in index:
            by_path.setdefault(index[cell_id], set()).add(cell_id)
    records: dict[tuple[str, str], dict[str, Any]] = {}
    for path, ids in by_path.items():
        try:
            fragment = read_fragment(path)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            continue
        for key, seed, record in zip(
            fragment.cell_keys, fragment.cell_seeds, fragment.records, strict=True
        ):
            if (key, seed) in ids:
                records[(key, seed)] = record
    return records
