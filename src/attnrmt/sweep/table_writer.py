"""Writer of the cell table (:mod:`attnrmt.sweep.table_layout`): rule ``gather_cells``.

One writer per sweep at a time (``fcntl`` lock on ``cell_table/.lock``). An update, with
``G`` grid points, ``n`` new cells in ``f`` new fragments (a +1% update of a 10^6-cell
sweep: G = 1.01e6, n = 1e4, f = 1e3):

1. finds the table row of every plan cell (:func:`plan_grid`: O(G) int64). When the
   previous grid version has the same :func:`grid_identity` (ids at equal coordinates
   are equal), its rows are carried over by coordinates (:func:`carried_rows`: O(G)
   array work on the old grid index, 8 probe ids read from one chunk: O(1)); otherwise
   the ids ``(cell_key, root_seed)`` of the table are read (O(cells) x 40 bytes) and
   every plan cell looked up (:class:`IdIndex`, 64-bit digests, O(G log G));
2. reads the fragments not recorded as ingested by an earlier segment (skipped unread:
   O(1) each) in batches (:func:`ingest_fragments`, :func:`take_batch`: the cells of a
   batch are looked up together, O(n log n) vectorised, O(f) file reads of O(members)
   Python work each) and hands them to the new segment's writer, which turns them into
   columns once per chunk (:class:`SegmentWriter`: O(n + values), not O(f x columns));
3. writes the segment (one Zarr array per column: O(columns) fixed cost + O(n) bytes),
   fsyncs its files from a few threads, renames it into place;
4. writes the grid index of the current plan (O(G): 8 bytes per grid point, compressed)
   to a new grid directory, then replaces ``manifest.json`` atomically
   (:func:`os.replace`).

So an update costs O(G) vectorised numpy (~0.1-0.3 s at G = 10^6) + O(f) fragment reads
(~0.2-0.3 ms each) + O(n) + a fixed cost a full write pays too: the import of zarr (~0.3 s)
and the creation of the segment's ~24 arrays (~0.2-0.3 s under load); measured in
``docs/scaling.md``, "An update reads only what it must".

Memory: O(grid points) arrays, never a Python object per cell: grid positions and rows
(int64), the missing cells' ids (40 bytes each, copied from the plan's raw keys,
:func:`plan_ids`) and their digest index, the new row of each (int64): ~90 bytes per
cell on a first gather (tests/sweep/test_store.py), plus a batch of fragments and the
writer's held fragments (each at most :data:`PENDING_BYTES` or one chunk of rows) and one
chunk per column whatever the spectra's size; a full lookup adds ~100 bytes per table
cell. The plan the caller passes holds 32 bytes per cell
(:class:`attnrmt.sweep.plan.CellGrid`). Bytes written are O(new cells) + O(grid) — the
old segments are never rewritten, so adding 1% of cells writes about 1% of a full write
plus the grid index. Values are copied bit for bit from the fragments (float64, int64).
"""

from __future__ import annotations

import binascii
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from attnrmt.contract import AXES, PROVENANCE_FIELDS, TOP_K_FIELDS
from attnrmt.sweep.fragments import (
    FRAGMENT_SUFFIX,
    fragment_paths,
    read_fragment_arrays,
    write_json_atomically,
)
from attnrmt.sweep.grid import (
    axis_coordinates,
    cell_grid_index,
    dataset_attrs,
    grid_lookups,
    log_line,
    model_summary,
    sweep_spectrum,
)
from attnrmt.sweep.provenance import ENVIRONMENTS_MEMBER, absent_column, environments_of
from attnrmt.sweep.table_layout import (
    GRIDS_DIRNAME,
    INGESTED_NAME,
    KEY_BYTES,
    MANIFEST_NAME,
    ROW_ARRAY,
    ROW_CHUNK,
    SEGMENTS_DIRNAME,
    STORE_FORMAT_VERSION,
    VALUE_CHUNK,
    compressors,
    read_manifest,
    table_dir,
)

#: Members of a fragment that are not result fields.
_FRAGMENT_META = ("format_version", "cell_key", "cell_seed", "computed", ENVIRONMENTS_MEMBER)
#: Grid versions kept besides the current one (readers that opened them keep working).
KEEP_OLD_GRIDS = 2


# --------------------------------------------------------------------------- cell ids


def key_bytes(keys: Sequence[str]) -> np.ndarray:
    """``(n,)`` ``S32`` array of hex cell keys as raw bytes. O(n), one C-level decode."""
    if len(keys) == 0:
        return np.empty(0, dtype=f"S{KEY_BYTES}")
    try:
        text = "".join(keys)  # type: ignore[arg-type]
    except TypeError:  # numpy str_ or other objects
        text = "".join(str(key) for key in keys)
    raw = binascii.unhexlify(text)
    return np.frombuffer(raw, dtype=f"S{KEY_BYTES}")


def root_seeds_of(seed_tokens: Sequence[str]) -> np.ndarray:
    """Root seed (last seed word) of each seed token ``"[w0,w1,w2,w3,root]"``. O(n)."""
    return np.array(
        [int(str(token).rsplit(",", 1)[1].rstrip("]")) for token in seed_tokens], dtype=np.int64
    )


def cell_ids(keys: np.ndarray, root_seeds: np.ndarray) -> np.ndarray:
    """``(n,)`` ``S40`` ids: key bytes then the root seed (little-endian int64).

    A cell is reused only if key *and* seed match (``docs/architecture.md``, "Cell
    identity"); the first four seed words derive from the key, so key + root seed is the
    whole identity.
    """
    key_part = np.ascontiguousarray(keys, dtype=f"S{KEY_BYTES}").view(np.uint8)
    seed_part = np.ascontiguousarray(root_seeds, dtype="<i8").view(np.uint8)
    joined = np.concatenate([key_part.reshape(-1, KEY_BYTES), seed_part.reshape(-1, 8)], axis=1)
    return np.ascontiguousarray(joined).view(f"S{KEY_BYTES + 8}").reshape(-1)


#: Odd 64-bit constant mixing the root seed into an id's digest (Fibonacci hashing).
_SEED_MIX = np.uint64(0x9E3779B97F4A7C15)


def id_digests(ids: np.ndarray) -> np.ndarray:
    """``(n,)`` uint64 digest of ``S40`` ids: the key's first 8 bytes XOR the mixed seed.

    Keys are sha256 digests, so 8 of their bytes are a uniform 64-bit hash: sorting and
    searching uint64 is ~10x faster than fixed-width bytes. Equal ids have equal digests;
    distinct ids rarely do (``n^2 / 2^65``), and :class:`IdIndex` checks. O(n).
    """
    raw = np.ascontiguousarray(ids, dtype=f"S{KEY_BYTES + 8}").view(np.uint8)
    raw = raw.reshape(-1, KEY_BYTES + 8)
    key_part = np.ascontiguousarray(raw[:, :8]).view("<u8").reshape(-1)
    seed_part = np.ascontiguousarray(raw[:, KEY_BYTES:]).view("<u8").reshape(-1)
    return key_part ^ (seed_part * _SEED_MIX)


class IdIndex:
    """Lookup of ``S40`` cell ids in a fixed array of ids (``docs/scaling.md``).

    Built in O(n log n) on the uint64 digests (:func:`id_digests`); :meth:`find` is
    O(m log n) and compares the whole ids of the candidates, so a digest collision never
    matches a wrong cell. When two stored entries share a digest (equal ids, or a
    collision), the index sorts the whole ids instead (exact, slower). Memory: 16 bytes
    per id besides ``ids``.
    """

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = np.ascontiguousarray(ids, dtype=f"S{KEY_BYTES + 8}").reshape(-1)
        digests = id_digests(self.ids)
        self.order = np.argsort(digests)  # stability is moot: exact mode if any repeat
        self.sorted: np.ndarray = digests[self.order]
        self.exact = bool(np.any(self.sorted[1:] == self.sorted[:-1]))
        if self.exact:
            self.order = np.argsort(self.ids, kind="stable")
            self.sorted = self.ids[self.order]

    def find(self, wanted: np.ndarray) -> np.ndarray:
        """Position in ``ids`` of each wanted id (the first if repeated); ``-1`` if absent."""
        wanted = np.ascontiguousarray(wanted, dtype=f"S{KEY_BYTES + 8}").reshape(-1)
        if self.sorted.size == 0 or wanted.size == 0:
            return np.full(wanted.shape, -1, dtype=np.int64)
        probe = wanted if self.exact else id_digests(wanted)
        position = np.minimum(sorted_search(self.sorted, probe), self.sorted.size - 1)
        candidate = self.order[position]
        found = (self.sorted[position] == probe) & (self.ids[candidate] == wanted)
        return np.where(found, candidate, -1).astype(np.int64)


def sorted_search(haystack: np.ndarray, needles: np.ndarray) -> np.ndarray:
    """:func:`numpy.searchsorted` of ``needles`` in the sorted ``haystack``, needles
    sorted first: the search then walks memory in order, ~5x faster than random probes
    of a large haystack. O(m log m + m log n)."""
    if needles.size < 1024:
        return np.searchsorted(haystack, needles)
    order = np.argsort(needles)
    position = np.empty(needles.size, dtype=np.int64)
    position[order] = np.searchsorted(haystack, needles[order])
    return position


def unique_ids(ids: np.ndarray) -> np.ndarray:
    """The distinct ids of ``ids`` (in digest order; sorted bytes if digests repeat)."""
    ids = np.ascontiguousarray(ids, dtype=f"S{KEY_BYTES + 8}").reshape(-1)
    index = IdIndex(ids)
    return np.unique(ids) if index.exact else ids[index.order]


# --------------------------------------------------------------------------- segments


class _Appender:
    """Appends to a 1-D or 2-D Zarr array in whole chunks (one partial chunk buffered).

    The array is created at the first whole chunk, or at :meth:`close` with all its data
    in one write (a small segment: one Zarr call per column instead of a create, a
    resize and a write) and chunks of exactly its length: Zarr encodes whole chunks, so
    a 10-row column in chunks of ``ROW_CHUNK`` rows would fill and compress ~1 MB (~7 ms
    a column, most of a small update's time). Readers take each array's own chunks. Its
    dtype is that of the first values added.
    """

    def __init__(self, group: Any, name: str, chunk: int) -> None:
        self.group = group
        self.name = name
        self.chunk = chunk
        self.array: Any = None
        self.dtype: np.dtype | None = None
        self.pending: list[np.ndarray] = []
        self.n_pending = 0

    def add(self, values: np.ndarray) -> None:
        if self.dtype is None:
            self.dtype = np.asarray(values).dtype
        values = np.asarray(values, dtype=self.dtype)
        if len(values) == 0:
            return
        self.pending.append(values)
        self.n_pending += len(values)
        if self.n_pending >= self.chunk:
            joined = np.concatenate(self.pending)
            whole = (len(joined) // self.chunk) * self.chunk
            self._write(joined[:whole])
            self.pending = [joined[whole:]] if whole < len(joined) else []
            self.n_pending = len(joined) - whole

    def _write(self, values: np.ndarray) -> None:
        if self.array is None:
            self.array = _new_array(self.group, self.name, values, self.chunk)
        else:
            self.array.append(values)

    def close(self) -> None:
        joined = np.concatenate(self.pending) if self.pending else np.empty(0, dtype=self.dtype)
        if self.array is None:  # shorter than one chunk: one chunk of its own length
            self.array = _new_array(self.group, self.name, joined, max(1, len(joined)))
        elif len(joined):
            self.array.append(joined)
        self.pending, self.n_pending = [], 0


def _new_array(group: Any, name: str, data: np.ndarray, chunk: int) -> Any:
    """A segment column holding ``data`` (chunks of ``chunk`` rows, compressed)."""
    fill = np.nan if np.issubdtype(data.dtype, np.floating) else 0
    return group.create_array(
        name,
        data=data,
        chunks=(chunk, *data.shape[1:]),
        compressors=compressors(),
        fill_value=fill,
    )


#: Bytes of fragment members a :class:`SegmentWriter` holds before it turns them into
#: columns (besides the rows of :data:`~attnrmt.sweep.table_layout.ROW_CHUNK`).
PENDING_BYTES = 8 * 2**20


class SegmentWriter:
    """Builds one segment in a temporary directory; :meth:`commit` renames it into place.

    Columns are created from the fragments' fields: scalars ``(n,)``, top-k fields
    ``(n, top_k)`` (NaN-padded), every other array field ragged (``__values``,
    ``__start``, ``__length``). Provenance columns (:data:`attnrmt.contract.
    PROVENANCE_FIELDS`, int64) are always written, filled for fragments without them; the
    distinct environments go to the segment's ``environments`` attribute (id -> JSON).

    Fragments are held as they come (:meth:`append`: O(1) per fragment, a copy only of
    the rows taken from a partly taken one) and turned into columns together once they
    hold :data:`~attnrmt.sweep.table_layout.ROW_CHUNK` rows or :data:`PENDING_BYTES`
    (:meth:`_flush`: one concatenation per column, O(rows + values)), so the cost per
    fragment is a few list appends whatever its size: a +1% update of a 10^6-cell sweep
    brings ~1,000 fragments of ~10 cells. Memory: at most ``ROW_CHUNK`` rows or
    ``PENDING_BYTES`` of fragments, plus one chunk per column.
    """

    def __init__(self, segments_dir: Path, top_k: int) -> None:
        import zarr

        self.segments_dir = segments_dir
        self.name = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        self.tmp = segments_dir / f".{self.name}.tmp"
        segments_dir.mkdir(parents=True, exist_ok=True)
        self.group = zarr.open_group(str(self.tmp), mode="w", zarr_format=3)
        self.top_k = int(top_k)
        self.rows = 0
        self.value_counts: dict[str, int] = {}
        self.columns: dict[str, _Appender] = {}
        self.ingested: list[str] = []
        self.environments: dict[int, str] = {}
        self.pending: list[tuple[np.ndarray, Mapping[str, np.ndarray]]] = []
        self.pending_rows = 0
        self.pending_bytes = 0

    def _column(self, name: str, chunk: int | None = None) -> _Appender:
        if name not in self.columns:
            self.columns[name] = _Appender(self.group, name, ROW_CHUNK if chunk is None else chunk)
        return self.columns[name]

    def append(self, ids: np.ndarray, arrays: Mapping[str, np.ndarray], take: np.ndarray) -> None:
        """Append rows ``take`` (sorted, distinct) of a fragment: its ``S40`` ids and
        decoded npz members ``arrays``. O(1) when every row is taken, else O(fragment)."""
        n_taken = int(take.size)
        if n_taken == 0:
            return
        if n_taken != ids.size:
            arrays, ids = fragment_rows(arrays, take), ids[take]
        self.environments.update(environments_of(arrays))
        self.pending.append((ids, arrays))
        self.rows += n_taken
        self.pending_rows += n_taken
        self.pending_bytes += sum(np.asarray(member).nbytes for member in arrays.values())
        if self.pending_rows >= ROW_CHUNK or self.pending_bytes >= PENDING_BYTES:
            self._flush()

    def _flush(self) -> None:
        """Turn the held fragments into column data. O(rows + values held)."""
        if not self.pending:
            return
        pending, self.pending = self.pending, []
        self.pending_rows = self.pending_bytes = 0
        members = [arrays for _, arrays in pending]
        counts = [int(ids.size) for ids, _ in pending]
        keys = np.concatenate([ids for ids, _ in pending]).view(np.uint8).reshape(-1, KEY_BYTES + 8)
        self._column("cell_key").add(keys[:, :KEY_BYTES])
        self._column("root_seed").add(
            np.ascontiguousarray(keys[:, KEY_BYTES:]).view("<i8").reshape(-1)
        )
        for name in PROVENANCE_FIELDS:  # old fragments: filled, so columns stay aligned
            self._column(name).add(
                np.concatenate(
                    [
                        np.asarray(arrays[name], dtype=np.int64)
                        if name in arrays
                        else absent_column(name, count)
                        for arrays, count in zip(members, counts, strict=True)
                    ]
                )
            )
        for name in _result_members(members):
            if not name.endswith("__values"):
                self._column(name).add(np.concatenate([arrays[name] for arrays in members]))
                continue
            field = name[: -len("__values")]
            flat, starts, lengths = _joined_ragged(members, field)
            if field in TOP_K_FIELDS:
                self._column(field).add(_padded_rows(flat, starts, lengths, self.top_k))
                continue
            base = self.value_counts.get(field, 0)
            self._column(f"{field}__start").add(
                base + np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
            )
            self._column(f"{field}__length").add(lengths)
            self._column(f"{field}__values", VALUE_CHUNK).add(_ragged_take(flat, starts, lengths))
            self.value_counts[field] = base + int(lengths.sum())

    def commit(self) -> dict[str, Any] | None:
        """Flush, rename into place; the manifest entry, or None if no row was written."""
        self._flush()
        for column in self.columns.values():
            column.close()
        if self.rows == 0:
            self.discard()
            return None
        self.group.attrs.update(
            {
                "rows": self.rows,
                "top_k": self.top_k,
                "format_version": STORE_FORMAT_VERSION,
                ENVIRONMENTS_MEMBER: {str(env): text for env, text in self.environments.items()},
            }
        )
        (self.tmp / INGESTED_NAME).write_text(json.dumps(sorted(self.ingested)))
        _fsync_tree(self.tmp)
        os.replace(self.tmp, self.segments_dir / self.name)
        return {"name": self.name, "rows": self.rows}

    def discard(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def _result_members(members: Sequence[Mapping[str, np.ndarray]]) -> list[str]:
    """Names of the result members (scalars and ``__values``) the fragments share; a
    fragment with other result fields than the first is an error (its columns would not
    align)."""

    def names(arrays: Mapping[str, np.ndarray]) -> list[str]:
        return [
            name
            for name in arrays
            if name not in _FRAGMENT_META
            and name not in PROVENANCE_FIELDS
            and not name.endswith("__offsets")
        ]

    first = names(members[0])
    for arrays in members[1:]:
        if set(names(arrays)) != set(first):
            raise ValueError(
                f"fragments with different result fields: {sorted(first)} "
                f"and {sorted(names(arrays))}"
            )
    return first


def _joined_ragged(
    members: Sequence[Mapping[str, np.ndarray]], field: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(values, start, length)`` of a ragged field over several fragments: their
    ``__values`` concatenated, each cell's start in that and its length. Two
    concatenations and O(cells + values) vectorised work, whatever the fragments' count."""
    flats = [arrays[f"{field}__values"] for arrays in members]
    offsets = [arrays[f"{field}__offsets"] for arrays in members]
    sizes = np.array([flat.size for flat in flats], dtype=np.int64)
    cells = np.array([offset.size - 1 for offset in offsets], dtype=np.int64)
    joined = np.concatenate(offsets).astype(np.int64, copy=False)
    last = np.cumsum(cells + 1) - 1  # each fragment's closing offset in ``joined``
    lengths = np.delete(np.diff(joined), last[:-1])
    starts = np.delete(joined, last) + np.repeat(np.cumsum(sizes) - sizes, cells)
    return np.concatenate(flats).astype(np.float64, copy=False), starts, lengths


def fragment_rows(arrays: Mapping[str, np.ndarray], take: np.ndarray) -> dict[str, np.ndarray]:
    """The members of a fragment restricted to the cells ``take`` (per-cell members
    indexed, ragged fields re-cut with new offsets; ``format_version`` and
    ``environments`` kept whole). O(members of the fragment)."""
    out: dict[str, np.ndarray] = {}
    for name, member in arrays.items():
        if name in ("format_version", ENVIRONMENTS_MEMBER) or name.endswith("__offsets"):
            if not name.endswith("__offsets"):
                out[name] = member
            continue
        if not name.endswith("__values"):
            out[name] = np.asarray(member)[take]
            continue
        field = name[: -len("__values")]
        offsets = np.asarray(arrays[f"{field}__offsets"], dtype=np.int64)
        starts, lengths = offsets[:-1][take], np.diff(offsets)[take]
        out[name] = _ragged_take(np.asarray(member), starts, lengths)
        out[f"{field}__offsets"] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return out


def _padded_rows(
    flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray, width: int
) -> np.ndarray:
    """``(n, width)`` rows of a ragged array, NaN-padded (top-k fields). O(n width)."""
    out = np.full((starts.size, width), np.nan)
    columns = np.arange(width)
    present = columns < np.minimum(lengths, width)[:, None]
    out[present] = flat[(starts[:, None] + columns)[present]]
    return out


def _ragged_take(flat: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``flat[start:start+length]`` for each row (vectorised). O(values)."""
    total = int(lengths.sum())
    if total == 0:
        return np.empty(0)
    if (
        starts.size
        and starts[0] == 0
        and total == flat.size
        and np.all(starts[1:] == np.cumsum(lengths)[:-1])
    ):
        return flat
    row_offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
    return flat[np.arange(total) + row_offsets]


def _fsync_file(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _fsync_tree(directory: Path) -> None:
    """fsync every file of a freshly written directory (durable before the rename).

    The files are synced from a few threads at once: the file system then commits them
    in fewer journal transactions than one by one (a segment is ~50 files). O(files).
    """
    from concurrent.futures import ThreadPoolExecutor

    files = [os.path.join(root, name) for root, _, names in os.walk(directory) for name in names]
    if len(files) <= 2:
        for path in files:
            _fsync_file(path)
        return
    with ThreadPoolExecutor(max_workers=min(8, len(files))) as pool:
        list(pool.map(_fsync_file, files))


# --------------------------------------------------------------------------- the table


@contextlib.contextmanager
def table_lock(directory: Path) -> Iterator[None]:
    """Exclusive lock of one sweep's table (blocks until the other writer finishes)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_table_ids(directory: Path, segments: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """``S40`` ids of every row of the listed segments, in global row order. O(rows)."""
    import zarr

    parts = []
    for segment in segments:
        group = zarr.open_group(str(directory / SEGMENTS_DIRNAME / segment["name"]), mode="r")
        parts.append(
            cell_ids(
                np.ascontiguousarray(group["cell_key"][:]).view(f"S{KEY_BYTES}").reshape(-1),
                group["root_seed"][:],
            )
        )
    return np.concatenate(parts) if parts else np.empty(0, dtype=f"S{KEY_BYTES + 8}")


def read_table_ids_at(
    directory: Path, segments: Sequence[Mapping[str, Any]], rows: np.ndarray
) -> np.ndarray:
    """``S40`` ids of the given global rows (reads the chunks holding them). O(rows)."""
    import zarr

    offsets = np.cumsum([0, *(int(segment["rows"]) for segment in segments)])
    out = np.empty(rows.size, dtype=f"S{KEY_BYTES + 8}")
    segment_of = np.searchsorted(offsets, rows, side="right") - 1
    for index in np.unique(segment_of).tolist():
        where = np.flatnonzero(segment_of == index)
        local = rows[where] - offsets[index]
        group = zarr.open_group(
            str(directory / SEGMENTS_DIRNAME / segments[index]["name"]), mode="r"
        )
        keys = np.ascontiguousarray(group["cell_key"].oindex[local, :])
        out[where] = cell_ids(
            keys.view(f"S{KEY_BYTES}").reshape(-1), group["root_seed"].oindex[local]
        )
    return out


def ingested_fragments(directory: Path, segments: Sequence[Mapping[str, Any]]) -> set[str]:
    """Names of fragments whose every cell is in the listed segments."""
    names: set[str] = set()
    for segment in segments:
        with contextlib.suppress(OSError, ValueError):
            names.update(
                json.loads(
                    (directory / SEGMENTS_DIRNAME / segment["name"] / INGESTED_NAME).read_text()
                )
            )
    return names


def plan_grid(sweep_plan: Any) -> tuple[np.ndarray, tuple[int, ...]]:
    """Flat position in the sorted grid of every plan cell, and the grid shape.

    A plan with a :class:`~attnrmt.sweep.plan.CellGrid` (``sweep_plan.grid``) numbers its
    cells in grid order of the config's axis order, so the positions are per-axis
    permutations to the sorted coordinates, composed by broadcasting
    (:func:`permuted_positions`): O(cells) int64, no cell built. Any other cell list
    falls back to :func:`attnrmt.sweep.grid.cell_grid_index` per cell.
    """
    coords = axis_coordinates(sweep_plan.axes)
    lookups = grid_lookups(coords)
    shape = (*(len(coords[axis]) for axis in AXES), int(sweep_plan.replicates))
    if getattr(sweep_plan, "grid", None) is not None:
        config_order = [
            np.array(
                [lookups[axis][_coordinate(axis, value)] for value in sweep_plan.axes[axis]],
                dtype=np.int64,
            )
            for axis in AXES
        ]
        return permuted_positions(config_order, shape), shape
    cells = sweep_plan.cells
    positions = np.ravel_multi_index(
        np.array([cell_grid_index(cell, lookups) for cell in cells], dtype=np.int64).T.reshape(
            len(shape), -1
        ),
        shape,
    )
    return positions, shape


def permuted_positions(axis_maps: Sequence[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
    """C-order flat index in ``shape`` of every point of the same-shaped grid whose axis
    ``a`` index ``i`` maps to ``axis_maps[a][i]`` (the last axis, replicates, maps to
    itself). Built axis by axis with outer sums: O(grid points) int64, no index tuple
    of the whole grid."""
    strides = np.cumprod((*shape[1:], 1)[::-1])[::-1]
    maps = [*axis_maps, np.arange(shape[-1], dtype=np.int64)]
    positions = np.zeros(1, dtype=np.int64)
    for axis_map, stride in zip(maps, strides.tolist(), strict=True):
        positions = np.add.outer(positions, axis_map * stride).reshape(-1)
    return positions


def plan_cell_ids(cells: Sequence[Any], root_seed: int) -> np.ndarray:
    """``S40`` ids of plan cells (:func:`cell_ids` of their keys and the root seed). O(n)."""
    return cell_ids(
        key_bytes([cell.key for cell in cells]), np.full(len(cells), int(root_seed), dtype=np.int64)
    )


def plan_ids(sweep_plan: Any, indices: np.ndarray | None, root_seed: int) -> np.ndarray:
    """``S40`` ids of the plan cells at ``indices`` (all when None), in that order.

    From the plan's raw keys (``sweep_plan.grid.keys``: a copy of 40 bytes per id, no
    cell built) when it has a :class:`~attnrmt.sweep.plan.CellGrid`; otherwise
    :func:`plan_cell_ids` of the cells. O(len(indices)).
    """
    grid = getattr(sweep_plan, "grid", None)
    if grid is None:
        cells = sweep_plan.cells
        return plan_cell_ids(
            cells if indices is None else [cells[i] for i in np.asarray(indices).tolist()],
            root_seed,
        )
    keys = grid.keys if indices is None else grid.keys[np.asarray(indices, dtype=np.int64)]
    return cell_ids(
        np.ascontiguousarray(keys).view(f"S{KEY_BYTES}").reshape(-1),
        np.full(len(keys), int(root_seed), dtype=np.int64),
    )


def grid_identity(sweep_plan: Any, root_seed: int) -> dict[str, Any]:
    """What a cell's id depends on besides its grid coordinates.

    :func:`attnrmt.sweep.plan.cell_key` hashes the coordinates, the model specs behind
    the names, ``top_k``, ``spectrum`` and :data:`~attnrmt.sweep.plan.MODEL_VERSION`; the
    id adds the root seed. ``context`` is the sha256 of all but the specs, ``models`` the
    canonical JSON of each named spec. Two grid versions whose identities are
    :func:`same_identity` give the same id at the same coordinates, so an update carries
    the old version's rows over by coordinates (:func:`carried_rows`) instead of looking
    every cell up. O(models).
    """
    from attnrmt.sweep.plan import MODEL_VERSION, canonical_json

    context = canonical_json(
        {
            "model_version": MODEL_VERSION,
            "top_k": int(sweep_plan.top_k),
            "spectrum": sweep_spectrum(sweep_plan),
            "root_seed": int(root_seed),
        }
    )
    return {
        "context": hashlib.sha256(context.encode()).hexdigest(),
        "models": {
            kind: {str(name): canonical_json(spec) for name, spec in specs.items()}
            for kind, specs in model_summary(sweep_plan).items()
        },
    }


def same_identity(old: Any, new: Mapping[str, Any]) -> bool:
    """Whether ids agree at equal coordinates: same context, and every model name both
    versions use has the same spec (names new to ``new`` have no old coordinates)."""
    if not isinstance(old, Mapping) or old.get("context") != new["context"]:
        return False
    old_models = old.get("models", {})
    return all(
        old_models.get(kind, {}).get(name, spec) == spec
        for kind, specs in new["models"].items()
        for name, spec in specs.items()
    )


def coordinate_map(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Index in ``old`` of each coordinate of ``new`` (``-1``: new). O(len(old) + len(new))."""
    where = {value: index for index, value in enumerate(old.tolist())}
    return np.array([where.get(value, -1) for value in new.tolist()], dtype=np.int64)


def carried_rows(
    directory: Path,
    manifest: Mapping[str, Any] | None,
    sweep_plan: Any,
    identity: Mapping[str, Any],
    positions: np.ndarray,
    probe_ids: Any,
) -> np.ndarray | None:
    """Table row of each plan cell from the previous grid version (``-1``: not in it).

    Maps the new grid's coordinates to the old grid's, axis by axis, and reads the old
    rows there: O(grid points) array work (the old grid index, 8 bytes per point, read
    and indexed once), no id of the table or of the plan is read besides the probes.
    None (look every cell up instead) when there is no previous version, it has another
    :func:`grid_identity`, or a probe disagrees: ``probe_ids(indices)`` gives the plan's
    ids of 8 carried cells, compared with the table's ids at their rows (taken from the
    table's first chunk of rows, so one chunk of ids is read: O(1)).
    """
    import zarr

    if manifest is None:
        return None
    try:
        grid = zarr.open_group(str(directory / manifest["grid"]), mode="r")
        attrs = dict(grid.attrs)
        if not same_identity(attrs.get("identity"), identity):
            return None
        old_coords = axis_coordinates(attrs["axes"])
        old_rows = np.asarray(grid[ROW_ARRAY][:]).reshape([int(n) for n in attrs["shape"]])
    except (OSError, KeyError, ValueError, FileNotFoundError):
        return None
    if old_rows.size == 0:
        return None
    new_coords = axis_coordinates(sweep_plan.axes)
    maps = [coordinate_map(old_coords[axis], new_coords[axis]) for axis in AXES]
    replicates = np.arange(int(sweep_plan.replicates))
    maps.append(np.where(replicates < old_rows.shape[-1], replicates, -1))
    dense = old_rows[np.ix_(*(np.maximum(index, 0) for index in maps))]
    for axis, index in enumerate(maps):  # coordinates the old grid lacks: no row
        dense[(slice(None),) * axis + (np.flatnonzero(index < 0),)] = -1
    plan_rows = dense.reshape(-1)[positions]
    carried = np.flatnonzero(plan_rows >= 0)
    # probes spread over the carried cells of the table's first chunk of rows: one chunk
    # of ids read (8 spread over the whole table read up to 8 chunks, ~5 MB each)
    in_first_chunk = carried[plan_rows[carried] < ROW_CHUNK]
    pool = in_first_chunk if in_first_chunk.size else carried
    probes = pool[np.linspace(0, pool.size - 1, min(pool.size, 8)).astype(np.int64)]
    if probes.size and not np.array_equal(
        read_table_ids_at(directory, manifest["segments"], plan_rows[probes]),
        probe_ids(probes),
    ):
        return None
    return plan_rows


def _coordinate(axis: str, value: Any) -> Any:
    """A config axis value as the key of :func:`attnrmt.sweep.grid.grid_lookups`."""
    return axis_coordinates({**{a: [] for a in AXES}, axis: [value]})[axis].tolist()[0]


def update_cell_table(
    sweep_plan: Any,
    fragment_files: Iterable[str | os.PathLike[str]],
    sweep_dir: str | os.PathLike[str],
    root_seed: int,
    scan_all_fragments: bool = True,
) -> dict[str, Any]:
    """Append the plan's missing cells to the sweep's table; publish a new version.

    Parameters
    ----------
    sweep_plan : SweepPlan
    fragment_files : iterable of path
        Fragments to read first (the sweep's current blocks).
    sweep_dir : path
        ``results/<run>/<sweep>``.
    root_seed : int
    scan_all_fragments : bool
        When cells are still missing after ``fragment_files``, also read the sweep's other
        fragments (cache, salvage, orphans): an interrupted run's finished cells, or an
        old-format store upgraded from its fragments, without recomputing any cell.

    Returns
    -------
    dict
        The new manifest (``format_version``, ``version``, ``grid``, ``segments``, counts).
    """
    directory = table_dir(sweep_dir)
    with table_lock(directory):
        _remove_temporaries(directory)
        old = read_manifest(directory / MANIFEST_NAME)
        segments = list(old["segments"]) if old else []
        _remove_orphan_segments(directory, segments)
        positions, shape = plan_grid(sweep_plan)
        identity = grid_identity(sweep_plan, root_seed)
        plan_rows = carried_rows(
            directory,
            old,
            sweep_plan,
            identity,
            positions,
            lambda indices: plan_ids(sweep_plan, indices, root_seed),
        )
        if plan_rows is None and not segments:  # a new table: every cell is missing
            plan_rows = np.full(positions.size, -1, dtype=np.int64)
        elif plan_rows is None:
            plan_rows = IdIndex(read_table_ids(directory, segments)).find(
                plan_ids(sweep_plan, None, root_seed)
            )
        missing = np.flatnonzero(plan_rows < 0)
        # the missing cells' ids (distinct: their parameters differ) and the row of each
        # in the new segment once a fragment provided it
        wanted_index = IdIndex(
            plan_ids(sweep_plan, None if missing.size == positions.size else missing, root_seed)
        )
        new_row = np.full(missing.size, -1, dtype=np.int64)
        done = ingested_fragments(directory, segments)
        writer = SegmentWriter(directory / SEGMENTS_DIRNAME, int(sweep_plan.top_k))
        try:
            n_taken = ingest_fragments(fragment_files, True, done, wanted_index, new_row, writer)
            if scan_all_fragments and n_taken < missing.size:
                n_taken += ingest_fragments(
                    fragment_paths(sweep_dir), False, done, wanted_index, new_row, writer
                )
            first_new_row = sum(int(segment["rows"]) for segment in segments)
            new_segment = writer.commit()
        except BaseException:
            writer.discard()
            raise
        if new_segment is not None:
            segments.append(new_segment)
            plan_rows[missing] = np.where(new_row >= 0, new_row + first_new_row, -1)
        rows = grid_rows(positions, plan_rows, shape)
        attrs = grid_attrs(sweep_plan, root_seed, rows, shape, identity)
        if new_segment is None and old is not None and _same_grid(directory, old, rows, attrs):
            return old  # nothing changed: readers keep the current version
        manifest = _publish_version(directory, segments, rows, attrs)
        _collect_garbage(directory, manifest)
    return manifest


#: Fragments read before their cells are looked up together (:func:`take_batch`).
BATCH_FRAGMENTS = 256


def take_batch(
    batch: Sequence[tuple[str, bool, Mapping[str, np.ndarray]]],
    wanted_index: IdIndex,
    new_row: np.ndarray,
    writer: SegmentWriter,
) -> int:
    """Append to ``writer`` the wanted cells of a batch of fragments ``(name, is_given,
    arrays)`` not taken yet; the number appended.

    ``new_row`` holds, for each wanted id of ``wanted_index``, its row in the new segment
    (``-1``: not found yet); it is updated. A cell present twice (in two fragments, or
    twice in one) is taken from its first occurrence in reading order. The batch's ids
    are built and looked up in one go: O(cells of the batch x log wanted) vectorised,
    plus O(1) calls per fragment (:meth:`SegmentWriter.append`). Fragments given by the
    caller are recorded as ingested.
    """
    if not batch:
        return 0
    counts = np.array([arrays["cell_key"].size for _, _, arrays in batch], dtype=np.int64)
    bounds = np.concatenate([[0], np.cumsum(counts)])
    ids = cell_ids(
        key_bytes(np.concatenate([arrays["cell_key"] for _, _, arrays in batch]).tolist()),
        root_seeds_of(np.concatenate([arrays["cell_seed"] for _, _, arrays in batch]).tolist()),
    )
    position = wanted_index.find(ids)
    hit = position >= 0
    hit[hit] = new_row[position[hit]] < 0
    rows = np.flatnonzero(hit)
    rows = np.sort(rows[np.unique(position[rows], return_index=True)[1]])
    new_row[position[rows]] = writer.rows + np.arange(rows.size)
    cuts = np.searchsorted(rows, bounds).tolist()
    starts = bounds.tolist()
    for index, (name, is_given, arrays) in enumerate(batch):
        writer.append(
            ids[starts[index] : starts[index + 1]],
            arrays,
            rows[cuts[index] : cuts[index + 1]] - starts[index],
        )
        if is_given:
            writer.ingested.append(name)
    return int(rows.size)


def ingest_fragments(
    paths: Iterable[str | os.PathLike[str]],
    given: bool,
    done: set[str],
    wanted_index: IdIndex,
    new_row: np.ndarray,
    writer: SegmentWriter,
) -> int:
    """Read the fragments ``paths`` whose name is not in ``done`` (added to it), in
    batches of at most :data:`BATCH_FRAGMENTS` fragments, :data:`PENDING_BYTES` or
    :data:`~attnrmt.sweep.table_layout.ROW_CHUNK` cells, and append their wanted
    cells (:func:`take_batch`); stop once every wanted cell is found. The number of cells
    appended. O(fragments read) file reads + O(their cells) vectorised work."""
    n_taken = int(np.count_nonzero(new_row >= 0))
    start = n_taken
    batch: list[tuple[str, bool, dict[str, np.ndarray]]] = []
    batch_bytes = batch_cells = 0
    for path in paths:
        name = os.path.basename(path)
        if n_taken == new_row.size:
            break
        if name in done:
            continue
        done.add(name)  # its hard link in cache/ holds the same cells
        arrays = read_fragment_arrays(path)
        if arrays is None or "cell_key" not in arrays:
            continue
        batch.append((name, given, arrays))
        batch_bytes += sum(member.nbytes for member in arrays.values())
        batch_cells += arrays["cell_key"].size
        if (
            len(batch) >= BATCH_FRAGMENTS
            or batch_bytes >= PENDING_BYTES
            or batch_cells >= ROW_CHUNK
        ):
            n_taken += take_batch(batch, wanted_index, new_row, writer)
            batch, batch_bytes, batch_cells = [], 0, 0
    n_taken += take_batch(batch, wanted_index, new_row, writer)
    return n_taken - start


def grid_rows(positions: np.ndarray, plan_rows: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Flat grid index: the table row of each grid point's cell, ``-1`` where absent.

    ``positions``: flat grid position of each plan cell; ``plan_rows``: its table row
    (``-1``: not in the table). O(grid points).
    """
    rows = np.full(int(np.prod(shape)), -1, dtype=np.int64)
    rows[positions] = plan_rows
    return rows


def grid_attrs(
    sweep_plan: Any,
    root_seed: int,
    rows: np.ndarray,
    shape: tuple[int, ...],
    identity: Mapping[str, Any],
) -> dict[str, Any]:
    """Attributes of a grid version: axes, sizes, :func:`grid_identity` and the dataset
    attributes of the view."""
    return json.loads(
        json.dumps(
            {
                "format_version": STORE_FORMAT_VERSION,
                "shape": list(shape),
                "identity": dict(identity),
                "axes": {axis: list(sweep_plan.axes[axis]) for axis in AXES},
                "replicates": int(sweep_plan.replicates),
                "top_k": int(sweep_plan.top_k),
                "dataset_attrs": {
                    **dataset_attrs(sweep_plan, root_seed, "attnrmt simulated cells"),
                    "cells_present": int(np.count_nonzero(rows >= 0)),
                    "cells_total": int(rows.size),
                },
            },
            default=str,
        )
    )


def _same_grid(
    directory: Path, manifest: Mapping[str, Any], rows: np.ndarray, attrs: Mapping[str, Any]
) -> bool:
    """Whether the current version already has this grid index and these attributes."""
    import zarr

    try:
        group = zarr.open_group(str(directory / manifest["grid"]), mode="r")
        return dict(group.attrs) == dict(attrs) and np.array_equal(group[ROW_ARRAY][:], rows)
    except (OSError, KeyError, ValueError, FileNotFoundError):
        return False


def _publish_version(
    directory: Path, segments: list[dict[str, Any]], rows: np.ndarray, attrs: Mapping[str, Any]
) -> dict[str, Any]:
    """Write a new grid version (immutable) and swap the manifest to it."""
    import zarr

    version = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    grids = directory / GRIDS_DIRNAME
    grids.mkdir(parents=True, exist_ok=True)
    tmp = grids / f".{version}.tmp"
    group = zarr.open_group(str(tmp), mode="w", zarr_format=3)
    group.create_array(
        ROW_ARRAY,
        data=rows,
        chunks=(min(rows.size, 1 << 20) or 1,),
        compressors=compressors(),
        fill_value=-1,
    )
    group.attrs.update(dict(attrs))
    _fsync_tree(tmp)
    os.replace(tmp, grids / version)
    counts = attrs["dataset_attrs"]
    manifest = {
        "format_version": STORE_FORMAT_VERSION,
        "version": version,
        "grid": f"{GRIDS_DIRNAME}/{version}",
        "segments": segments,
        "rows": int(sum(segment["rows"] for segment in segments)),
        "cells_present": counts["cells_present"],
        "cells_total": counts["cells_total"],
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    write_json_atomically(directory / MANIFEST_NAME, manifest)
    return manifest


def _remove_temporaries(directory: Path) -> None:
    """Remove what a killed writer left (``.*.tmp`` directories; never visible to readers)."""
    for sub in (SEGMENTS_DIRNAME, GRIDS_DIRNAME):
        parent = directory / sub
        for path in parent.glob(".*.tmp") if parent.is_dir() else []:
            shutil.rmtree(path, ignore_errors=True)


def _remove_orphan_segments(directory: Path, segments: Sequence[Mapping[str, Any]]) -> None:
    """Remove segments no manifest lists (renamed in by a writer killed before its swap).

    Segments are only ever appended, so every version a reader may hold lists a subset of
    the current manifest's segments: an unlisted one is read by nobody.
    """
    listed = {segment["name"] for segment in segments}
    parent = directory / SEGMENTS_DIRNAME
    for path in parent.iterdir() if parent.is_dir() else []:
        if not path.name.startswith(".") and path.name not in listed:
            shutil.rmtree(path, ignore_errors=True)


def _collect_garbage(directory: Path, manifest: Mapping[str, Any]) -> None:
    """Drop grid versions older than the :data:`KEEP_OLD_GRIDS` previous ones."""
    grids = sorted(
        path for path in (directory / GRIDS_DIRNAME).iterdir() if not path.name.startswith(".")
    )
    current = Path(manifest["grid"]).name
    old = [path for path in grids if path.name != current]
    for path in old[: max(0, len(old) - KEEP_OLD_GRIDS)]:
        shutil.rmtree(path, ignore_errors=True)


def gather_cells(
    sweep_plan: Any,
    fragment_files: Iterable[str | os.PathLike[str]],
    output_path: str | os.PathLike[str],
    root_seed: int,
    log_path: str | os.PathLike[str] | None = None,
) -> Path:
    """Rule ``gather_cells``: update the sweep's cell table, write ``cells.zarr`` (pointer).

    ``output_path`` (``results/<run>/<sweep>/cells.zarr``) becomes a directory holding a
    copy of the table's ``manifest.json``: the file Snakemake tracks. The table itself
    lives in ``<sweep>/cell_table/``, which no rule owns, so Snakemake deleting the output
    before a rerun costs nothing and an update appends only the new cells.
    """
    started = time.perf_counter()
    files = [Path(path) for path in fragment_files]
    target = Path(output_path)
    manifest = update_cell_table(sweep_plan, files, target.parent, root_seed)
    if target.exists() and not (target / MANIFEST_NAME).is_file():
        shutil.rmtree(target)  # a format-1 dense store: superseded by the table
    target.mkdir(parents=True, exist_ok=True)
    write_json_atomically(target / MANIFEST_NAME, manifest)
    log_line(
        log_path,
        f"{target}: {manifest['cells_present']}/{manifest['cells_total']} cells, "
        f"{len(manifest['segments'])} segments, {len(files)} fragments, "
        f"in {time.perf_counter() - started:.2f} s",
    )
    return target


def store_finished_cells(run_plan: Any, results_dir: str | os.PathLike[str]) -> list[str]:
    """Best effort after a failed or interrupted run: store every sweep's finished cells.

    Called by the Snakefile's ``onerror``: each sweep with fragments gets a table version
    holding whatever cells finished (``cells.zarr``, the rule's output, is left alone), so
    :func:`attnrmt.open_results` shows them. Returns one line per sweep stored; problems
    are reported in the lines, never raised. O(fragments) reads.
    """
    lines = []
    for name, sweep_plan in run_plan.sweeps.items():
        sweep_dir = Path(results_dir) / name
        if not fragment_paths(sweep_dir):
            continue
        try:
            manifest = update_cell_table(sweep_plan, [], sweep_dir, run_plan.seed)
        except Exception as exc:  # reported, never raised: the run has failed already
            lines.append(f"{name}: finished cells not stored ({exc!r})")
            continue
        lines.append(
            f"{name}: {manifest['cells_present']}/{manifest['cells_total']} "
            f"finished cells stored (open_results shows them)"
        )
    return lines


__all__ = [
    "FRAGMENT_SUFFIX",
    "gather_cells",
    "plan_ids",
    "store_finished_cells",
    "update_cell_table",
]
