"""Plan a run: expand each sweep into cells (content-keyed) and group them into blocks.

A **cell** is one call of :func:`attnrmt.model.simulate_cell` (one grid point, one
replicate). Its identity, :attr:`Cell.key`, is the sha256 of the canonical JSON of its
parameters: model *specs* (not their names), numbers normalised (so ``0.1`` from a
linspace and a typed ``0.1`` are the same cell), plus :data:`MODEL_VERSION`. Its random
generator is ``numpy.random.default_rng(cell.seed_words(root_seed))``; neither depends on
the grid position, the block size or the execution order.

A **block** is one Snakemake job: cells of one *line* (every parameter equal except
``snr`` and ``replicate``), sorted by ``(snr, replicate)``, chunked by ``block_size``
(``auto``: about ``block_seconds`` of estimated work per block, from the cost model). Its
key hashes only the root seed and its cells' keys, so extending an axis adds blocks and
leaves every block whose membership did not change (and its fragment) intact.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import json
import math
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any, overload

import numpy as np

from attnrmt.contract import AXES, round_significant
from attnrmt.sweep.config import ResolvedSweep, resolve_sweeps

#: Bump when :func:`attnrmt.model.simulate_cell` changes its output for the same inputs;
#: every cell key (and so every fragment) changes with it.
MODEL_VERSION = 1
#: Hex digits of a block key (64 bits).
BLOCK_KEY_HEX = 16
#: The first 16 bytes of a key as four little-endian uint32 seed words.
_SEED_WORDS = struct.Struct("<4I")
#: Parameters that vary within a line (a line is one block group).
LINE_FREE_PARAMETERS = ("snr", "replicate")


# --------------------------------------------------------------------------- canonical JSON


def canonical_number(value: Any) -> Any:
    """A number in canonical form for hashing: integral values as ``int``, others rounded.

    Booleans stay booleans; ``4``, ``4.0`` -> ``4``; ``0.30000000000000004`` -> ``0.3``
    (12 significant digits).
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        return value
    if isinstance(value, Integral):
        return int(value)
    rounded = round_significant(value)
    if rounded.is_integer():
        return int(rounded)
    return rounded


@functools.lru_cache(maxsize=1 << 16)
def _number_json(value: int | float) -> str:
    """JSON text of :func:`canonical_number` (cached: grid values repeat across cells)."""
    return json.dumps(canonical_number(value), allow_nan=False)


def _canonical_tree(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(key): _canonical_tree(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical_tree(item) for item in value]
    return canonical_number(value)


def canonical_json(value: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, numbers by :func:`canonical_number`."""
    return json.dumps(
        _canonical_tree(value), sort_keys=True, separators=(",", ":"), allow_nan=False
    )


class _SpecJsonCache:
    """Canonical JSON of spec dicts, cached by object identity.

    The plan shares one spec dict among all cells that use it, so each spec (a custom
    ``R`` can hold T^2 numbers) is serialised once. The cache holds a reference to each
    spec, so an ``id`` is never reused while cached; specs must not be mutated.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self._entries: dict[int, tuple[Any, str]] = {}
        self._capacity = capacity

    def __call__(self, spec: Any) -> str:
        entry = self._entries.get(id(spec))
        if entry is not None and entry[0] is spec:
            return entry[1]
        text = canonical_json(spec)
        if len(self._entries) >= self._capacity:
            self._entries.clear()
        self._entries[id(spec)] = (spec, text)
        return text


_spec_json = _SpecJsonCache()


# The key's spectrum entry: none for the default (full) route, see :func:`cell_key`.
_SPECTRUM_JSON = {"full": "", "top": '"spectrum":"top",'}


def cell_key(
    *,
    d: int,
    delta: float,
    gamma: float,
    T: int,
    positional_spec: Mapping[str, Any],
    weights_spec: Mapping[str, Any],
    snr: float,
    centered: bool,
    replicate: int,
    top_k: int,
    spectrum: str = "full",
) -> str:
    """sha256 hex of a cell's canonical parameters (model names excluded, specs included).

    The canonical JSON is, with keys sorted: ``T, centered, d, delta, gamma,
    model_version, positional, replicate, snr, [spectrum,] top_k, weights`` (numbers by
    :func:`canonical_number`; specs by :func:`canonical_json`). ``spectrum`` enters only
    when it is ``"top"`` (a top cell stores other data), so full cells keep the keys they
    had before the key existed.
    """
    text = (
        _key_prefix(d, delta, gamma, T, positional_spec, centered)
        + _key_middle(_number_json(snr), _number_json(replicate))
        + _key_suffix(top_k, spectrum, weights_spec)
    )
    return hashlib.sha256(text.encode("ascii")).hexdigest()


# The canonical JSON of :func:`cell_key` in three parts: what is fixed along a line up to
# the replicate (prefix), the replicate and snr (middle), the rest (suffix). The plan
# hashes each line's prefix once and only the middle and suffix per cell.


def _key_prefix(
    d: int, delta: float, gamma: float, T: int, positional_spec: Mapping[str, Any], centered: bool
) -> str:
    number = _number_json
    return (
        f'{{"T":{number(T)},"centered":{"true" if centered else "false"},'
        f'"d":{number(d)},"delta":{number(delta)},'
        f'"gamma":{number(gamma)},"model_version":{MODEL_VERSION},'
        f'"positional":{_spec_json(positional_spec)},"replicate":'
    )


def _key_middle(snr_json: str, replicate_json: str) -> str:
    return f'{replicate_json},"snr":{snr_json},'


def _key_suffix(top_k: int, spectrum: str, weights_spec: Mapping[str, Any]) -> str:
    return (
        f'{_SPECTRUM_JSON[spectrum]}"top_k":{_number_json(top_k)},'
        f'"weights":{_spec_json(weights_spec)}}}'
    )


# --------------------------------------------------------------------------- cells, blocks


@dataclass(frozen=True, slots=True)
class Cell:
    """One simulation cell: a grid point of a sweep and a replicate index.

    Attributes
    ----------
    d, delta, gamma, T, snr, centered
        Model parameters (docs/model.md, "The generative model"), normalised coordinate values.
    positional, weights : str
        Model *names* (dataset coordinates; not part of the key).
    replicate : int
        Replicate index, ``0 .. replicates - 1``.
    top_k : int
        Number of top eigenpairs measured.
    positional_spec, weights_spec : dict
        Canonical specs (shared between cells; do not mutate).
    spectrum : str
        ``"full"`` or ``"top"`` (:func:`attnrmt.model.simulate_cell`); part of the key only
        when ``"top"``.
    key : str
        sha256 hex of the canonical parameters (:func:`cell_key`), computed on creation.
    """

    d: int
    delta: float
    gamma: float
    T: int
    positional: str
    weights: str
    snr: float
    centered: bool
    replicate: int
    top_k: int
    positional_spec: dict[str, Any] = field(repr=False)
    weights_spec: dict[str, Any] = field(repr=False)
    spectrum: str = "full"
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        key = cell_key(
            d=self.d,
            delta=self.delta,
            gamma=self.gamma,
            T=self.T,
            positional_spec=self.positional_spec,
            weights_spec=self.weights_spec,
            snr=self.snr,
            centered=self.centered,
            replicate=self.replicate,
            top_k=self.top_k,
            spectrum=self.spectrum,
        )
        object.__setattr__(self, "key", key)

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def coords(self) -> dict[str, Any]:
        """Axis coordinates of the cell, in :data:`AXES` order (names for models)."""
        return {axis: getattr(self, axis) for axis in AXES}

    @property
    def line(self) -> tuple:
        """Every coordinate except ``snr`` (the block grouping; replicate excluded too)."""
        return (
            self.d,
            self.delta,
            self.gamma,
            self.T,
            self.positional,
            self.weights,
            self.centered,
        )

    def seed_words(self, root_seed: int) -> list[int]:
        """Seed for :func:`numpy.random.default_rng`: four uint32 words of the key, root.

        The words are the key's first 16 bytes read as little-endian uint32.
        """
        return [*_SEED_WORDS.unpack(bytes.fromhex(self.key[:32])), int(root_seed)]

    def simulate_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for :func:`attnrmt.model.simulate_cell` (without ``seed``)."""
        return {
            "d": self.d,
            "delta": self.delta,
            "gamma": self.gamma,
            "T": self.T,
            "positional": self.positional_spec,
            "weights": self.weights_spec,
            "snr": self.snr,
            "centered": self.centered,
            "top_k": self.top_k,
            "spectrum": self.spectrum,
        }


def block_key(root_seed: int, cell_keys: list[str]) -> str:
    """Short stable hex: sha256 over the root seed and the sorted cell keys."""
    digest = hashlib.sha256(f"attnrmt-block:{int(root_seed)}".encode("ascii"))
    for key in sorted(cell_keys):
        digest.update(b":" + key.encode("ascii"))
    return digest.hexdigest()[:BLOCK_KEY_HEX]


def block_key_of_digests(root_seed: int, key_digests: np.ndarray) -> str:
    """:func:`block_key` of cells given as raw key digests, ``(m, 32)`` uint8.

    The same bytes are hashed (``":" + hex key`` per key, hex keys sorted; sorting the hex
    text sorts the digests), in one ``update``. O(m log m), vectorised.
    """
    hexed = np.frombuffer(
        binascii.hexlify(np.ascontiguousarray(key_digests).tobytes()),
        dtype=f"S{2 * KEY_DIGEST_BYTES}",
    )
    joined = np.empty((hexed.size, 2 * KEY_DIGEST_BYTES + 1), dtype=np.uint8)
    joined[:, 0] = ord(":")
    joined[:, 1:] = np.sort(hexed).view(np.uint8).reshape(hexed.size, -1)
    digest = hashlib.sha256(f"attnrmt-block:{int(root_seed)}".encode("ascii"))
    digest.update(joined.tobytes())
    return digest.hexdigest()[:BLOCK_KEY_HEX]


#: Bytes of a raw cell key (sha256 digest).
KEY_DIGEST_BYTES = 32
#: Field names of :class:`Cell`'s constructor, in order (the key is computed, not given).
_CELL_FIELDS = (
    "d",
    "delta",
    "gamma",
    "T",
    "positional",
    "weights",
    "snr",
    "centered",
    "replicate",
    "top_k",
    "positional_spec",
    "weights_spec",
    "spectrum",
)


def _line_digests(prefix: str, tails: Iterable[bytes], count: int) -> bytearray:
    """Concatenated sha256 digests of ``prefix + tail`` for each of ``count`` tails: the
    prefix is hashed once and its state copied per tail. O(count) time, 32 bytes per tail
    held (the digests), tails consumed one at a time."""
    start = hashlib.sha256(prefix.encode("ascii"))
    digests = bytearray(count * KEY_DIGEST_BYTES)
    view = memoryview(digests)
    offset = 0
    for tail in tails:
        state = start.copy()
        state.update(tail)
        view[offset : offset + KEY_DIGEST_BYTES] = state.digest()
        offset += KEY_DIGEST_BYTES
    return digests


class CellGrid:
    """The cells of one sweep as arrays: a cell is an integer position in the grid.

    Positions number the cells in grid order: the axes in :data:`AXES` order with each
    axis in the config's order (last fastest), then the replicate, i.e. the C-order flat
    index of ``shape = (len(axes[a]) for a in AXES) + (replicates,)``; coordinates follow
    by :func:`numpy.unravel_index`. The only per-cell data held is :attr:`keys`, the raw
    sha256 key of every cell (``(cells, 32)`` uint8, 32 bytes per cell, computed once:
    block keys need them); :class:`Cell` objects are built on access
    (:meth:`cell`). Memory: O(axes + models) + 32 bytes per cell.

    A *line* is a point of every axis except ``snr`` (and the replicate): its cells
    are, in block order (sorted by ``(snr, replicate)``), :meth:`line_positions`.
    Keys, seeds and blocks are those of one :class:`Cell` per cell (``docs/architecture.md``,
    "Cell identity" and "The plan holds arrays, not cells").
    """

    def __init__(self, resolved: ResolvedSweep) -> None:
        self.axes: dict[str, list] = {axis: list(resolved.axes[axis]) for axis in AXES}
        self.replicates = int(resolved.replicates)
        self.top_k = int(resolved.top_k)
        self.spectrum = str(resolved.spectrum)
        self.positional_specs = resolved.positional_specs
        self.weights_specs = resolved.weights_specs
        self.shape: tuple[int, ...] = (*(len(self.axes[axis]) for axis in AXES), self.replicates)
        self.size = math.prod(self.shape)
        snr_axis = AXES.index("snr")
        #: Distance between consecutive snr values of one line (centered x replicates).
        self.snr_stride = math.prod(self.shape[snr_axis + 1 :])
        #: snr indices sorted by value (stable, as ``sorted`` of ``(snr, replicate)``).
        self.snr_order = np.argsort(np.asarray(self.axes["snr"], dtype=np.float64), kind="stable")
        self.line_length = len(self.axes["snr"]) * self.replicates
        self.keys = self._all_keys()

    # ------------------------------------------------------------------ lines

    def line_bases(self) -> Iterator[int]:
        """Flat position of each line's first grid cell (snr index 0, replicate 0), lines
        in order of first appearance in grid order (``d .. weights``, then ``centered``).
        O(lines)."""
        outer = math.prod(self.shape[: AXES.index("snr")])
        n_centered = len(self.axes["centered"])
        line_span = len(self.axes["snr"]) * self.snr_stride
        for outer_index in range(outer):
            for centered_index in range(n_centered):
                yield outer_index * line_span + centered_index * self.replicates

    def line_positions(self, base: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Flat positions of members ``start:stop`` of the line at ``base``, in block order
        (snr ascending, then replicate). O(stop - start)."""
        stop = self.line_length if stop is None else stop
        member = np.arange(start, stop, dtype=np.int64)
        snr_index = self.snr_order[member // self.replicates]
        return base + snr_index * self.snr_stride + member % self.replicates

    def line_position(self, base: int, member: int) -> int:
        """Flat position of one member of a line (O(1))."""
        snr_index, replicate = divmod(member, self.replicates)
        return base + int(self.snr_order[snr_index]) * self.snr_stride + replicate

    # ------------------------------------------------------------------ keys

    def _all_keys(self) -> np.ndarray:
        """Raw keys of every cell (:func:`cell_key`, hashed per line). O(cells)."""
        keys = np.empty((self.size, KEY_DIGEST_BYTES), dtype=np.uint8)
        snr_json = [_number_json(snr) for snr in self.axes["snr"]]
        replicate_json = [_number_json(replicate) for replicate in range(self.replicates)]
        in_grid_order = np.add.outer(
            np.arange(len(snr_json)) * self.snr_stride, np.arange(self.replicates)
        ).reshape(-1)
        for base in self.line_bases():
            d, delta, gamma, T, positional, weights, _, centered, _ = self.values(base)
            suffix = _key_suffix(self.top_k, self.spectrum, self.weights_specs[(weights, T)])
            prefix = _key_prefix(
                d, delta, gamma, T, self.positional_specs[(positional, T)], centered
            )
            tails = (
                (_key_middle(snr, replicate) + suffix).encode("ascii")
                for snr in snr_json
                for replicate in replicate_json
            )
            keys[base + in_grid_order] = np.frombuffer(
                _line_digests(prefix, tails, self.line_length), dtype=np.uint8
            ).reshape(-1, KEY_DIGEST_BYTES)
        return keys

    def key_hex(self, position: int) -> str:
        """Hex key of the cell at ``position``."""
        return self.keys[position].tobytes().hex()

    def keys_hex(self, positions: np.ndarray) -> list[str]:
        """Hex keys of the cells at ``positions``. O(len(positions))."""
        raw = binascii.hexlify(np.ascontiguousarray(self.keys[positions]).tobytes())
        width = 2 * KEY_DIGEST_BYTES
        return [raw[i : i + width].decode("ascii") for i in range(0, len(raw), width)]

    # ------------------------------------------------------------------ cells

    def values(self, position: int) -> tuple:
        """``(d, delta, gamma, T, positional, weights, snr, centered, replicate)`` of a
        position (coordinate values, model names). O(axes)."""
        indices = []
        for size in reversed(self.shape):
            position, index = divmod(position, size)
            indices.append(index)
        indices.reverse()
        return (
            *(self.axes[axis][index] for axis, index in zip(AXES, indices, strict=False)),
            indices[-1],
        )

    def cell(self, position: int) -> Cell:
        """The :class:`Cell` at ``position`` (its key read from :attr:`keys`). O(axes)."""
        return self._cell(self.values(int(position)), self.key_hex(int(position)))

    def _cell(self, values: tuple, key: str) -> Cell:
        d, delta, gamma, T, positional, weights, snr, centered, replicate = values
        cell = object.__new__(Cell)
        fields = (
            d,
            delta,
            gamma,
            T,
            positional,
            weights,
            snr,
            centered,
            replicate,
            self.top_k,
            self.positional_specs[(positional, T)],
            self.weights_specs[(weights, T)],
            self.spectrum,
        )
        for name, value in zip(_CELL_FIELDS, fields, strict=True):
            object.__setattr__(cell, name, value)
        object.__setattr__(cell, "key", key)
        return cell

    def columns(self, positions: np.ndarray) -> list[list]:
        """Coordinate values (model names for models) of ``positions``, one list per axis
        in :data:`AXES` order, then the replicates (vectorised unravel). O(len(positions))."""
        indices = np.unravel_index(np.asarray(positions, dtype=np.int64), self.shape)
        columns = [
            np.asarray(self.axes[axis], dtype=object)[index].tolist()
            for axis, index in zip(AXES, indices, strict=False)
        ]
        return [*columns, indices[-1].tolist()]

    def cells(self, positions: np.ndarray) -> list[Cell]:
        """:class:`Cell` objects of ``positions``. O(len(positions))."""
        return [
            self._cell(values, key)
            for values, key in zip(
                zip(*self.columns(positions), strict=True), self.keys_hex(positions), strict=True
            )
        ]

    def block_params(self, positions: np.ndarray, root_seed: int) -> list[dict[str, Any]]:
        """``{"key", "seed", "kwargs"}`` of the cells at ``positions``: equal to
        :func:`attnrmt.sweep.blocks.block_params` of their :class:`Cell` objects
        (``Cell.key``, ``Cell.seed_words(root_seed)``, ``Cell.simulate_kwargs()``, same
        dict order), built from the arrays without a Cell per cell: seed words are the
        keys' first 16 bytes viewed as little-endian uint32. O(len(positions))."""
        positions = np.asarray(positions, dtype=np.int64)
        columns = self.columns(positions)[:-1]  # the replicate is not a kwarg
        words = np.ascontiguousarray(self.keys[positions, :16]).view("<u4").tolist()
        root, top_k, spectrum = int(root_seed), self.top_k, self.spectrum
        positional_specs, weights_specs = self.positional_specs, self.weights_specs
        return [
            {
                "key": key,
                "seed": [*seed, root],
                "kwargs": {
                    "d": d,
                    "delta": delta,
                    "gamma": gamma,
                    "T": T,
                    "positional": positional_specs[(positional, T)],
                    "weights": weights_specs[(weights, T)],
                    "snr": snr,
                    "centered": centered,
                    "top_k": top_k,
                    "spectrum": spectrum,
                },
            }
            for key, seed, d, delta, gamma, T, positional, weights, snr, centered in zip(
                self.keys_hex(positions), words, *columns, strict=True
            )
        ]


#: Cells built at a time when iterating over a :class:`CellSequence`.
_ITER_CHUNK = 4096


class CellSequence(Sequence):
    """A read-only sequence of the cells of a :class:`CellGrid`, built on access.

    Either the whole grid in grid order (``line=None``) or members ``start:stop`` of one
    line in block order. Holds no cell: O(1) memory; iteration builds :data:`_ITER_CHUNK`
    cells at a time. :attr:`positions` gives the flat positions (an array).
    """

    __slots__ = ("grid", "line", "start", "stop")

    def __init__(
        self, grid: CellGrid, line: int | None = None, start: int = 0, stop: int | None = None
    ) -> None:
        self.grid = grid
        self.line = line
        self.start = start
        self.stop = (grid.size if line is None else grid.line_length) if stop is None else stop

    def __len__(self) -> int:
        return self.stop - self.start

    @property
    def positions(self) -> np.ndarray:
        """Flat grid positions of the cells, in sequence order (int64)."""
        if self.line is None:
            return np.arange(self.start, self.stop, dtype=np.int64)
        return self.grid.line_positions(self.line, self.start, self.stop)

    def _position(self, index: int) -> int:
        if self.line is None:
            return self.start + index
        return self.grid.line_position(self.line, self.start + index)

    @overload
    def __getitem__(self, index: int) -> Cell: ...

    @overload
    def __getitem__(self, index: slice) -> list[Cell]: ...

    def __getitem__(self, index: int | slice) -> Cell | list[Cell]:
        if isinstance(index, slice):
            return self.grid.cells(self.positions[index])
        length = len(self)
        if not -length <= index < length:
            raise IndexError(index)
        return self.grid.cell(self._position(index % length))

    def __iter__(self) -> Iterator[Cell]:
        for begin in range(0, len(self), _ITER_CHUNK):
            chunk = CellSequence(
                self.grid,
                self.line,
                self.start + begin,
                min(self.stop, self.start + begin + _ITER_CHUNK),
            )
            yield from self.grid.cells(chunk.positions)

    def block_params(self, root_seed: int) -> list[dict[str, Any]]:
        """:meth:`CellGrid.block_params` of these cells (what a block job receives)."""
        return self.grid.block_params(self.positions, root_seed)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CellSequence({len(self)} cells)"


@dataclass(frozen=True, slots=True)
class Block:
    """One Snakemake job: cells of one line, sorted by ``(snr, replicate)``.

    Attributes
    ----------
    key : str
        :func:`block_key` of the root seed and the cells' keys (content only).
    cells : sequence of Cell
        A :class:`CellSequence` (built on access) for plan blocks, or a tuple.
    """

    key: str
    cells: Sequence[Cell]

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def cell_keys(self) -> list[str]:
        """Keys of the block's cells, in block order."""
        if isinstance(self.cells, CellSequence):
            return self.cells.grid.keys_hex(self.cells.positions)
        return [cell.key for cell in self.cells]


@dataclass(frozen=True)
class SweepPlan:
    """Cells and blocks of one sweep.

    Attributes
    ----------
    name : str
    axes : dict[str, list]
        Coordinate values in :data:`AXES` order (``d, delta, gamma, T, positional,
        weights, snr, centered``).
    replicates, top_k : int
    cells : sequence of Cell
        Grid order: axes in :data:`AXES` order (last fastest), then replicate. A
        :class:`CellSequence` over :attr:`grid` (cells built on access).
    blocks : list[Block]
        Lines in grid order; within a line, chunks of ``block_size`` cells.
    config_sha256 : str
        sha256 of the sweep's canonical config (axes, models used, replicates, top_k,
        root seed, :data:`MODEL_VERSION`); not execution, dask or analysis settings.
    models : dict
        ``{"positional": {name: canonical spec}, "weights": {name: canonical spec}}``
        for the models this sweep uses (canonical specs do not depend on ``T``).
    spectrum : str
        ``"full"`` or ``"top"`` (config key ``spectrum``): what ``eigenvalues`` holds.
    grid : CellGrid or None
        The cells as arrays (positions, raw keys); None for a plan built from a cell list.
    """

    name: str
    axes: dict[str, list]
    replicates: int
    top_k: int
    cells: Sequence[Cell] = field(repr=False)
    blocks: list[Block] = field(repr=False)
    config_sha256: str
    models: dict[str, dict[str, dict[str, Any]]] = field(repr=False)
    spectrum: str = "full"
    grid: CellGrid | None = field(default=None, repr=False, compare=False)

    @property
    def n_cells(self) -> int:
        """Number of cells."""
        return len(self.cells)

    def block_index(self) -> dict[str, Block]:
        """``{block key: block}``."""
        return {block.key: block for block in self.blocks}

    def cell_keys(self) -> list[str]:
        """Hex keys of every cell, in :attr:`cells` order: from :attr:`grid`'s raw keys
        without building a :class:`Cell` (~0.2 s per 10^6 cells). O(cells)."""
        if self.grid is not None:
            return self.grid.keys_hex(np.arange(self.grid.size))
        return [cell.key for cell in self.cells]


@dataclass(frozen=True)
class RunPlan:
    """Plan of a run: ``run`` name, root ``seed``, ``sweeps`` ``{name: SweepPlan}``."""

    run: str
    seed: int
    sweeps: dict[str, SweepPlan]


def _block_sizes(block_size: int | str, block_seconds: float) -> None:
    """Check the execution settings of :func:`make_blocks` / :func:`grid_blocks`."""
    auto = block_size == "auto"
    if not auto and (not isinstance(block_size, Integral) or block_size < 1):
        raise ValueError(f"block_size={block_size!r}: must be >= 1 or 'auto'")
    if auto and not block_seconds > 0:
        raise ValueError(f"block_seconds={block_seconds!r}: must be > 0 with block_size auto")


def _line_block_size(
    first_cell: Cell, line_length: int, block_size: int | str, block_seconds: float
) -> int:
    """Cells per block of a line: ``block_size``, or for ``"auto"`` the cost model's
    :func:`attnrmt.sweep.cost.cells_per_block` of the line's first cell."""
    from attnrmt.sweep.cost import cells_per_block, estimated_cell_seconds

    if block_size != "auto":
        return int(block_size)
    return cells_per_block(
        estimated_cell_seconds(first_cell.simulate_kwargs()), block_seconds, line_length
    )


def grid_blocks(
    grid: CellGrid, root_seed: int, block_size: int | str, block_seconds: float = 0.0
) -> list[Block]:
    """:func:`make_blocks` of a :class:`CellGrid`, by index arithmetic: the same blocks
    (keys, cells, order) without a Python object per cell. Each block is a range of one
    line's members (:class:`CellSequence`); its key hashes the raw keys of that range
    (:func:`block_key_of_digests`). O(lines + blocks) objects, O(cells) hashing."""
    _block_sizes(block_size, block_seconds)
    blocks = []
    length = grid.line_length
    for base in grid.line_bases():
        size = _line_block_size(
            grid.cell(grid.line_position(base, 0)), length, block_size, block_seconds
        )
        positions = grid.line_positions(base)
        for start in range(0, length, size):
            stop = min(start + size, length)
            key = block_key_of_digests(root_seed, grid.keys[positions[start:stop]])
            blocks.append(Block(key, CellSequence(grid, base, start, stop)))
    return blocks


def make_blocks(
    cells: Sequence[Cell], root_seed: int, block_size: int | str, block_seconds: float = 0.0
) -> list[Block]:
    """Group cells by line, sort each line by ``(snr, replicate)``, chunk by block size.

    ``block_size``: cells per block, or ``"auto"``: per line,
    :func:`attnrmt.sweep.cost.cells_per_block` of the line's estimated cell cost
    (:func:`attnrmt.sweep.cost.estimated_cell_seconds`, fixed constants) and
    ``block_seconds``. Blocks never mix lines; lines appear in order of first appearance
    in ``cells``. O(cells log line length) with one object per cell; the plan uses
    :func:`grid_blocks` (same blocks, arrays).
    """
    _block_sizes(block_size, block_seconds)
    lines: dict[tuple, list[Cell]] = {}
    for cell in cells:
        lines.setdefault(cell.line, []).append(cell)
    blocks = []
    for line_cells in lines.values():
        line_cells.sort(key=lambda cell: (cell.snr, cell.replicate))
        size = _line_block_size(line_cells[0], len(line_cells), block_size, block_seconds)
        for start in range(0, len(line_cells), size):
            chunk = tuple(line_cells[start : start + size])
            blocks.append(Block(block_key(root_seed, [cell.key for cell in chunk]), chunk))
    return blocks


def execution_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's ``execution:`` block with the schema's defaults filled in."""
    from attnrmt.sweep.config import load_schema

    properties = load_schema()["properties"]["execution"]["properties"]
    defaults = {name: spec["default"] for name, spec in properties.items() if "default" in spec}
    return {**defaults, **dict(config.get("execution") or {})}


def _models_used(resolved: ResolvedSweep) -> dict[str, dict[str, dict[str, Any]]]:
    first_T = resolved.axes["T"][0]
    return {
        "positional": {
            name: resolved.positional_specs[(name, first_T)] for name in resolved.axes["positional"]
        },
        "weights": {
            name: resolved.weights_specs[(name, first_T)] for name in resolved.axes["weights"]
        },
    }


def sweep_config_sha256(resolved: ResolvedSweep, root_seed: int) -> str:
    """sha256 of a sweep's canonical config (see :attr:`SweepPlan.config_sha256`)."""
    specs = {
        kind: {f"{name}@T={T}": spec for (name, T), spec in table.items()}
        for kind, table in (
            ("positional", resolved.positional_specs),
            ("weights", resolved.weights_specs),
        )
    }
    payload = {
        "axes": resolved.axes,
        "models": specs,
        "replicates": resolved.replicates,
        "top_k": resolved.top_k,
        "seed": int(root_seed),
        "model_version": MODEL_VERSION,
    }
    if resolved.spectrum != "full":  # full sweeps keep their hash
        payload["spectrum"] = resolved.spectrum
    return hashlib.sha256(canonical_json(payload).encode("ascii")).hexdigest()


def plan_sweep(
    resolved: ResolvedSweep, root_seed: int, block_size: int | str, block_seconds: float = 0.0
) -> SweepPlan:
    """Cells, blocks and config hash of one resolved sweep.

    The cells are a :class:`CellGrid` (raw keys, 32 bytes per cell) viewed as a
    :class:`CellSequence`; blocks are line ranges (:func:`grid_blocks`). O(cells) hashing,
    O(lines + blocks) Python objects.
    """
    grid = CellGrid(resolved)
    return SweepPlan(
        name=resolved.name,
        axes={axis: list(resolved.axes[axis]) for axis in AXES},
        replicates=resolved.replicates,
        top_k=resolved.top_k,
        cells=CellSequence(grid),
        blocks=grid_blocks(grid, root_seed, block_size, block_seconds),
        config_sha256=sweep_config_sha256(resolved, root_seed),
        models=_models_used(resolved),
        spectrum=resolved.spectrum,
        grid=grid,
    )


def plan_run(
    config: Mapping[str, Any], resolved: Mapping[str, ResolvedSweep] | None = None
) -> RunPlan:
    """Plan every sweep of a schema-valid config (e.g. from :func:`load_config`).

    ``resolved``: the sweeps the one validation already resolved
    (:attr:`attnrmt.sweep.config.ValidConfig.sweeps`), so the semantic checks are not
    repeated; without it they run here and raise
    :class:`~attnrmt.sweep.config.ConfigError` on a problem.
    """
    resolved = resolve_sweeps(config) if resolved is None else resolved
    root_seed = int(config.get("seed", 2026))
    execution = execution_settings(config)
    block_size, block_seconds = execution["block_size"], float(execution["block_seconds"])
    return RunPlan(
        run=str(config.get("run", "default")),
        seed=root_seed,
        sweeps={
            name: plan_sweep(sweep, root_seed, block_size, block_seconds)
            for name, sweep in resolved.items()
        },
    )


__all__ = [
    "BLOCK_KEY_HEX",
    "KEY_DIGEST_BYTES",
    "MODEL_VERSION",
    "Block",
    "Cell",
    "CellGrid",
    "CellSequence",
    "RunPlan",
    "SweepPlan",
    "block_key",
    "block_key_of_digests",
    "canonical_json",
    "canonical_number",
    "cell_key",
    "execution_settings",
    "grid_blocks",
    "make_blocks",
    "plan_run",
    "plan_sweep",
    "sweep_config_sha256",
]
