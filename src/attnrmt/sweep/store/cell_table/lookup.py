"""Where a plan's cells are in a cell table (``docs/scaling.md``, "An update reads only
what it must"): cell ids (key bytes and root seed, ``docs/architecture.md``, "Cell
identity") and their lookup by digest (:class:`IdIndex`), grid positions
(:func:`plan_grid`), rows carried over by coordinates (:func:`carried_rows`). All
O(cells) array work, never a Python object per cell."""

from __future__ import annotations

import binascii
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from attnrmt.sweep.spec.identity import KEY_DIGEST_BYTES, MODEL_VERSION, canonical_json
from attnrmt.sweep.store.cell_table.layout import ROW_CHUNK
from attnrmt.sweep.store.grid import axis_coordinates, coordinate_values, model_summary

_ID_DTYPE = f"S{KEY_DIGEST_BYTES + 8}"
#: Odd 64-bit constant mixing the root seed into an id's digest (Fibonacci hashing).
_SEED_MIX = np.uint64(0x9E3779B97F4A7C15)


def key_bytes(keys: Sequence[str]) -> np.ndarray:
    """``(n,)`` ``S32`` array of hex cell keys as raw bytes. O(n), one C-level decode."""
    if len(keys) == 0:
        return np.empty(0, dtype=f"S{KEY_DIGEST_BYTES}")
    return np.frombuffer(binascii.unhexlify("".join(map(str, keys))), f"S{KEY_DIGEST_BYTES}")


def root_seeds_of(seed_tokens: Sequence[str]) -> np.ndarray:
    """Root seed (last seed word) of each seed token ``"[w0,w1,w2,w3,root]"``. O(n)."""
    return np.array([int(str(t).rsplit(",", 1)[1].rstrip("]")) for t in seed_tokens], np.int64)


def cell_ids(keys: np.ndarray, root_seeds: np.ndarray) -> np.ndarray:
    """``(n,)`` ``S40`` ids: key bytes (``S32``, or ``(n, 32)`` uint8) then the root seed
    (little-endian int64), the whole identity (the other seed words derive from the key).
    O(n)."""
    key_part = np.ascontiguousarray(keys)
    if key_part.dtype != np.uint8:
        key_part = np.ascontiguousarray(key_part, dtype=f"S{KEY_DIGEST_BYTES}").view(np.uint8)
    seed_part = np.ascontiguousarray(root_seeds, dtype="<i8").view(np.uint8)
    joined = np.concatenate(
        [key_part.reshape(-1, KEY_DIGEST_BYTES), seed_part.reshape(-1, 8)], axis=1
    )
    return np.ascontiguousarray(joined).view(_ID_DTYPE).reshape(-1)


def id_parts(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inverse of :func:`cell_ids`: ``(n, 32)`` uint8 key bytes and ``(n,)`` int64 root
    seeds. O(n)."""
    raw = np.ascontiguousarray(ids, dtype=_ID_DTYPE).view(np.uint8).reshape(-1, 40)
    seeds = np.ascontiguousarray(raw[:, KEY_DIGEST_BYTES:]).view("<i8").reshape(-1)
    return raw[:, :KEY_DIGEST_BYTES], seeds


def id_digests(ids: np.ndarray) -> np.ndarray:
    """``(n,)`` uint64 digest of ``S40`` ids: the key's first 8 bytes (a uniform hash) XOR
    the mixed seed; distinct ids collide with probability ``n^2 / 2^65``, which
    :class:`IdIndex` checks. O(n)."""
    raw = np.ascontiguousarray(ids, dtype=_ID_DTYPE).view(np.uint8).reshape(-1, 40)
    key_part = np.ascontiguousarray(raw[:, :8]).view("<u8").reshape(-1)
    seed_part = np.ascontiguousarray(raw[:, KEY_DIGEST_BYTES:]).view("<u8").reshape(-1)
    return key_part ^ (seed_part * _SEED_MIX)


def cell_id_hashes(cell_id_pairs: Iterable[tuple[str, str]]) -> np.ndarray:
    """:func:`id_digests` of ``(hex cell key, seed token)`` pairs, ``(n,)`` uint64. O(n)."""
    pairs = list(cell_id_pairs)
    if not pairs:
        return np.empty(0, dtype=np.uint64)
    keys, seeds = zip(*pairs, strict=True)
    return id_digests(cell_ids(key_bytes(keys), root_seeds_of(seeds)))


class IdIndex:
    """Lookup of ``S40`` ids in a fixed array: built O(n log n) on the uint64 digests,
    :meth:`find` O(m log n), comparing whole ids (a digest collision never matches; shared
    digests fall back to sorting whole ids). Memory: 16 bytes per id."""

    def __init__(self, ids: np.ndarray) -> None:
        self.ids = np.ascontiguousarray(ids, dtype=_ID_DTYPE).reshape(-1)
        digests = id_digests(self.ids)
        self.order = np.argsort(digests)  # stability is moot: exact mode if any repeat
        self.sorted: np.ndarray = digests[self.order]
        self.exact = bool(np.any(self.sorted[1:] == self.sorted[:-1]))
        if self.exact:
            self.order = np.argsort(self.ids, kind="stable")
            self.sorted = self.ids[self.order]

    def find(self, wanted: np.ndarray) -> np.ndarray:
        """Position in ``ids`` of each wanted id (the first if repeated); ``-1`` if absent."""
        wanted = np.ascontiguousarray(wanted, dtype=_ID_DTYPE).reshape(-1)
        if self.sorted.size == 0 or wanted.size == 0:
            return np.full(wanted.shape, -1, dtype=np.int64)
        probe = wanted if self.exact else id_digests(wanted)
        position = np.minimum(sorted_search(self.sorted, probe), self.sorted.size - 1)
        candidate = self.order[position]
        found = (self.sorted[position] == probe) & (self.ids[candidate] == wanted)
        return np.where(found, candidate, -1).astype(np.int64)


def sorted_search(haystack: np.ndarray, needles: np.ndarray) -> np.ndarray:
    """:func:`numpy.searchsorted` of ``needles`` in the sorted ``haystack``, needles sorted
    first (memory walked in order). O(m log m + m log n)."""
    if needles.size < 1024:
        return np.searchsorted(haystack, needles)
    order = np.argsort(needles)
    position = np.empty(needles.size, dtype=np.int64)
    position[order] = np.searchsorted(haystack, needles[order])
    return position


# --------------------------------------------------------------------------- the plan


def plan_grid(sweep_plan: Any) -> tuple[np.ndarray, tuple[int, ...]]:
    """Flat position in the sorted grid of every plan cell, and the grid shape: per-axis
    permutations composed by outer sums. O(cells) int64."""
    coords = axis_coordinates(sweep_plan.axes)
    shape = (*(len(values) for values in coords.values()), int(sweep_plan.replicates))
    maps = []
    for axis, sorted_values in coords.items():
        where = {value: index for index, value in enumerate(sorted_values.tolist())}
        config = coordinate_values(axis, sweep_plan.axes[axis], sort=False).tolist()
        maps.append(np.array([where[value] for value in config], dtype=np.int64))
    strides = np.cumprod((*shape[1:], 1)[::-1])[::-1]
    positions = np.zeros(1, dtype=np.int64)
    for axis_map, stride in zip([*maps, np.arange(shape[-1])], strides.tolist(), strict=True):
        positions = np.add.outer(positions, axis_map * stride).reshape(-1)
    present = sweep_plan.grid.present  # zipped axes: the cells that exist
    return (positions if present is None else positions[present]), shape


def plan_ids(sweep_plan: Any, indices: np.ndarray | None, root_seed: int) -> np.ndarray:
    """``S40`` ids of the plan cells at ``indices`` (all when None), from the plan's raw
    keys. O(len(indices))."""
    grid = sweep_plan.grid
    where = grid.present if indices is None or grid.present is None else grid.present[indices]
    if where is None:
        where = slice(None) if indices is None else np.asarray(indices, dtype=np.int64)
    keys = np.ascontiguousarray(grid.keys[where]).view(f"S{KEY_DIGEST_BYTES}").reshape(-1)
    return cell_ids(keys, np.full(keys.size, int(root_seed), dtype=np.int64))


# --------------------------------------------------------------------------- grid versions


def grid_identity(sweep_plan: Any, root_seed: int) -> dict[str, Any]:
    """What a cell's id depends on besides its coordinates: ``context`` (sha256 of ``top_k``,
    ``spectrum``, the model version, the root seed) and ``models`` (canonical JSON of each
    named spec); equal identities give equal ids at equal coordinates. O(models)."""
    context = {
        "model_version": MODEL_VERSION,
        "top_k": int(sweep_plan.top_k),
        "spectrum": str(sweep_plan.spectrum),
        "root_seed": int(root_seed),
    }
    return {
        "context": hashlib.sha256(canonical_json(context).encode()).hexdigest(),
        "models": {
            kind: {str(name): canonical_json(spec) for name, spec in specs.items()}
            for kind, specs in model_summary(sweep_plan).items()
        },
    }


def _same_identity(old: Any, new: Mapping[str, Any]) -> bool:
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


def renamed_models(old: Any, new: Mapping[str, Any]) -> bool:
    """Whether ``new`` names a model the old identity lacks with a spec the old one has
    under another name (a renamed model: its cells are in the table, placed at the old
    name's coordinates, so they must be stored again at the new ones). O(models)."""
    old_models = old.get("models", {}) if isinstance(old, Mapping) else {}
    for kind, specs in new["models"].items():
        before = old_models.get(kind, {})
        old_specs = set(before.values())
        if any(name not in before and spec in old_specs for name, spec in specs.items()):
            return True
    return False


def _coordinate_map(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Index in ``old`` of each coordinate of ``new`` (``-1``: new). O(len(old) + len(new))."""
    where = {value: index for index, value in enumerate(old.tolist())}
    return np.array([where.get(value, -1) for value in new.tolist()], dtype=np.int64)


def carried_rows(
    grid: tuple[Mapping[str, Any], np.ndarray] | None,
    sweep_plan: Any,
    identity: Mapping[str, Any],
    positions: np.ndarray,
    probe_ids: Callable[[np.ndarray], np.ndarray],
    table_ids_at: Callable[[np.ndarray], np.ndarray],
) -> np.ndarray | None:
    """Table row of each plan cell from the previous grid version ``grid`` (-1: not in it),
    mapping coordinates axis by axis: O(grid points). None (look every cell up) without a
    previous version, with another identity or axes, or when one of 8 probes disagrees
    (``probe_ids(indices)`` against ``table_ids_at(rows)``)."""
    if grid is None:
        return None
    attrs, old_rows = grid
    if not _same_identity(attrs.get("identity"), identity) or old_rows.size == 0:
        return None
    old_coords = axis_coordinates(attrs["axes"])
    new_coords = axis_coordinates(sweep_plan.axes)
    if list(old_coords) != list(new_coords):  # an axis added or dropped (table)
        return None
    maps = [_coordinate_map(old_coords[axis], new_coords[axis]) for axis in new_coords]
    replicates = np.arange(int(sweep_plan.replicates))
    maps.append(np.where(replicates < old_rows.shape[-1], replicates, -1))
    dense = old_rows[np.ix_(*(np.maximum(index, 0) for index in maps))]
    for axis, index in enumerate(maps):  # coordinates the old grid lacks: no row
        dense[(slice(None),) * axis + (np.flatnonzero(index < 0),)] = -1
    plan_rows = dense.reshape(-1)[positions]
    carried = np.flatnonzero(plan_rows >= 0)
    in_first_chunk = carried[plan_rows[carried] < ROW_CHUNK]
    pool = in_first_chunk if in_first_chunk.size else carried
    probes = pool[np.linspace(0, pool.size - 1, min(pool.size, 8)).astype(np.int64)]
    if probes.size and not np.array_equal(table_ids_at(plan_rows[probes]), probe_ids(probes)):
        return None
    return np.ascontiguousarray(plan_rows, dtype=np.int64)


def row_points(
    grid: tuple[Mapping[str, Any], np.ndarray], sweep_plan: Any, shape: tuple[int, ...], n_rows: int
) -> np.ndarray:
    """Flat position in the plan's grid (``shape``) of each of ``n_rows`` table rows, from
    where the previous grid version placed it (``-1``: placed nowhere, or at coordinates
    the plan lacks; every row when the axes differ, a ``table`` axis added or dropped: the
    update then reads the fragments again). O(grid points) array work on the old ``row``
    index."""
    attrs, old_rows = grid
    old_coords = axis_coordinates(attrs["axes"])
    new_coords = axis_coordinates(sweep_plan.axes)
    if list(old_coords) != list(new_coords):  # an axis added or dropped: placed nowhere
        return np.full(n_rows, -1, dtype=np.int64)
    maps = [_coordinate_map(new_coords[axis], old_coords[axis]) for axis in new_coords]
    old_replicates = np.arange(old_rows.shape[-1])
    maps.append(np.where(old_replicates < shape[-1], old_replicates, -1))
    flat = old_rows.reshape(-1)
    present = np.flatnonzero((flat >= 0) & (flat < n_rows))
    index = [
        axis_map[part]
        for axis_map, part in zip(maps, np.unravel_index(present, old_rows.shape), strict=True)
    ]
    placed = np.all([part >= 0 for part in index], axis=0)
    points = np.full(n_rows, -1, dtype=np.int64)
    if present.size:
        new_flat = np.ravel_multi_index(tuple(np.maximum(part, 0) for part in index), shape)
        points[flat[present]] = np.where(placed, new_flat, -1)
    return points
