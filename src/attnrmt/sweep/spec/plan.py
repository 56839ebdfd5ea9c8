"""Plan a run: expand each sweep into cells (content-keyed) and group them into blocks
(docs/architecture.md, "Cell identity" and "The walk").

A cell is one grid point and replicate; its key hashes its canonical parameters and its
seed words come from the key and the root seed, independent of grid position, block size
and execution order. A block is one Snakemake job: cells of one *line* (equal but ``snr``
and ``replicate``) sorted by ``(snr, replicate)`` and chunked by ``block_size`` (``auto``:
about ``block_seconds`` of estimated work); with ``noise: shared`` blocks hold whole
replicate curves, seeded by the curve's key (docs/data-contract.md, "Shared-noise
sweeps"). O(cells) hashing, 32 bytes per cell."""

from __future__ import annotations

import binascii
import dataclasses
import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np

from attnrmt.contract import ALL_AXES, AXES, TABLE_AXIS, sweep_axes
from attnrmt.sweep.spec.classes import spike_count
from attnrmt.sweep.spec.config import ResolvedSweep, apply_schema, resolve_sweeps
from attnrmt.sweep.spec.cost import cells_per_block, estimated_cell_seconds, estimated_curve_seconds
from attnrmt.sweep.spec.identity import (
    KEY_DIGEST_BYTES,
    MODEL_VERSION,
    block_key_of_digests,
    canonical_json,
    cell_key,
    curve_key,
    curve_key_text,
    key_middle,
    key_prefix,
    key_suffix,
    line_digests,
    number_json,
    seed_token,
    seed_words,
)


@dataclass(frozen=True, slots=True)
class Cell:
    """One simulation cell, built on access from the plan's arrays (:class:`CellGrid`): normalised
    coordinates, model names, canonical ``*_spec`` dicts (shared; do not mutate) and ``key``."""

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
    table_spec: dict[str, Any] | None = field(default=None, repr=False)
    noise: str = "independent"
    curve_length: int = field(default=1, repr=False, compare=False)
    table: str | None = None
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        key = cell_key(**self._curve_fields(), snr=self.snr, noise=self.noise)
        object.__setattr__(self, "key", key)

    def _curve_fields(self) -> dict[str, Any]:
        """The key fields shared by the cell key and its curve key (all but snr, noise)."""
        names: tuple[str, ...] = ("d", "delta", "gamma", "T", "positional_spec", "weights_spec")
        names += ("centered", "replicate", "top_k", "spectrum", "table_spec")
        return {name: getattr(self, name) for name in names}

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def coords(self) -> dict[str, Any]:
        """Axis coordinates in :data:`~attnrmt.contract.ALL_AXES` order (``table`` where set)."""
        return {
            axis: getattr(self, axis)
            for axis in ALL_AXES
            if axis != TABLE_AXIS or self.table is not None
        }

    @property
    def line(self) -> tuple:
        """Every coordinate except ``snr`` (the block grouping; replicate excluded too)."""
        return tuple(value for axis, value in self.coords.items() if axis != "snr")

    def seed_words(self, root_seed: int) -> list[int]:
        """Seed for :func:`numpy.random.default_rng` from :meth:`seed_key` and the root seed."""
        return seed_words(self.seed_key(), root_seed)

    def seed_key(self) -> str:
        """The key the seed comes from: the cell's, or with shared noise its replicate curve's."""
        if self.noise != "shared":
            return self.key
        return curve_key(**self._curve_fields())

    def simulate_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :func:`attnrmt.model.simulate_cell` (without ``seed``)."""
        kwargs = {axis: getattr(self, axis) for axis in AXES}
        kwargs.update(positional=self.positional_spec, weights=self.weights_spec, top_k=self.top_k)
        kwargs.update(spectrum=self.spectrum, **table_kwargs(self.table_spec))
        return kwargs


def table_kwargs(table_spec: dict[str, Any] | None) -> dict[str, Any]:
    """``{"table": spec}`` for a non-Gaussian law, ``{}`` otherwise. O(1)."""
    if table_spec is None or table_spec.get("kind") == "gaussian":
        return {}
    return {"table": table_spec}


#: Field names of :class:`Cell`'s constructor, in order (the key is computed, not given).
_CELL_FIELDS = tuple(name.name for name in dataclasses.fields(Cell) if name.init)


class CellGrid:
    """The cells of one sweep as arrays: a cell is a C-order position in ``shape`` (axes, then
    replicates); :attr:`keys` (32 bytes per cell) and :attr:`seed_bytes` are all it holds per
    cell (docs/architecture.md, "Cell identity")."""

    def __init__(self, resolved: ResolvedSweep) -> None:
        #: The sweep's axes in order (:func:`attnrmt.contract.sweep_axes`).
        self.axis_names: tuple[str, ...] = sweep_axes(resolved.axes)
        self.axes: dict[str, list] = {axis: list(resolved.axes[axis]) for axis in self.axis_names}
        self.replicates = int(resolved.replicates)
        self.top_k = int(resolved.top_k)
        self.spectrum = str(resolved.spectrum)
        self.noise = str(resolved.noise)
        self.positional_specs = resolved.positional_specs
        self.weights_specs = resolved.weights_specs
        #: Canonical spec of each law of the ``table`` axis (None: not set, gaussian).
        self.table_specs: dict[str, dict[str, Any]] | None = resolved.table_specs
        self.shape: tuple[int, ...] = (
            *(len(self.axes[axis]) for axis in self.axis_names),
            self.replicates,
        )
        self.size = math.prod(self.shape)
        #: Groups of axes that vary together (config key ``zip``): a cell exists only where
        #: the axes of each group have the same index (docs/getting-started.md, "Zipped
        #: axes"); () for the Cartesian product.
        self.zip: tuple[tuple[str, ...], ...] = tuple(resolved.zip)
        #: Replicates of each ``d`` index (config ``replicates: {d: count}``): replicate
        #: ``r`` exists at ``d`` when ``r < per_d[d]``; None: ``replicates`` at every ``d``.
        self.per_d = None if resolved.per_d is None else np.asarray(resolved.per_d)
        #: Flat positions of the cells that exist, ascending; None: every position.
        self.present: np.ndarray | None = None
        if self.zip or self.per_d is not None:
            self.present = self._present_positions()
        #: Number of cells (positions that exist).
        self.n_cells = self.size if self.present is None else int(self.present.size)
        snr_axis = self.axis_names.index("snr")
        #: Distance between consecutive snr values of one line (centered x replicates).
        self.snr_stride = math.prod(self.shape[snr_axis + 1 :])
        #: snr indices sorted by value (stable, as ``sorted`` of ``(snr, replicate)``).
        self.snr_order = np.argsort(np.asarray(self.axes["snr"], dtype=np.float64), kind="stable")
        #: Raw keys, and the bytes the seed words come from: each cell's key, or with shared
        #: noise its curve's key, ``(cells, 16)`` uint8 (:meth:`_hash_lines`).
        self.keys, self.seed_bytes = self._hash_lines()

    # ------------------------------------------------------------------ zipped axes

    def _present_positions(self) -> np.ndarray:
        """Flat positions where each :attr:`zip` group's axes share one index and the
        replicate is below its ``d``'s count (:attr:`per_d`). O(size)."""
        mask = np.ones(self.shape, dtype=bool)
        ndim = len(self.shape)
        if self.per_d is not None:
            at = [-1 if axis == self.axis_names.index("d") else 1 for axis in range(ndim - 1)]
            mask &= np.arange(self.replicates) < self.per_d.reshape([*at, 1])
        for group in self.zip:
            dims = [self.axis_names.index(axis) for axis in group]
            first = np.arange(self.shape[dims[0]]).reshape(
                [-1 if dim == dims[0] else 1 for dim in range(ndim)]
            )
            for dim in dims[1:]:
                other = np.arange(self.shape[dim]).reshape(
                    [-1 if axis == dim else 1 for axis in range(ndim)]
                )
                mask &= first == other
        return np.flatnonzero(mask.reshape(-1)).astype(np.int64)

    def _line_exists(self, base: int) -> bool:
        """Whether the line at ``base`` exists (every zip group aligned). O(axes)."""
        if not self.zip:
            return True
        index = dict(zip(self.axis_names, np.unravel_index(base, self.shape), strict=False))
        return all(len({int(index[axis]) for axis in group}) == 1 for group in self.zip)

    def flat_positions(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Flat positions of cells ``start:stop`` in grid order. O(stop - start)."""
        stop = self.n_cells if stop is None else stop
        if self.present is None:
            return np.arange(start, stop, dtype=np.int64)
        return self.present[start:stop]

    # ------------------------------------------------------------------ lines

    def line_replicates(self, base: int) -> int:
        """Replicates of the line at ``base`` (its ``d``'s, :attr:`per_d`). O(axes)."""
        if self.per_d is None:
            return self.replicates
        return int(self.per_d[np.unravel_index(base, self.shape)[self.axis_names.index("d")]])

    def line_length(self, base: int) -> int:
        """Cells of the line at ``base``: snr values x its replicates. O(axes)."""
        return len(self.axes["snr"]) * self.line_replicates(base)

    def line_bases(self) -> Iterator[int]:
        """Flat position of each existing line's first cell (snr index 0, replicate 0), in grid
        order. O(lines)."""
        outer = math.prod(self.shape[: self.axis_names.index("snr")])
        n_centered = len(self.axes["centered"])
        line_span = len(self.axes["snr"]) * self.snr_stride
        for outer_index in range(outer):
            for centered_index in range(n_centered):
                base = outer_index * line_span + centered_index * self.replicates
                if self._line_exists(base):
                    yield base

    def line_positions(self, base: int, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Flat positions of members ``start:stop`` of the line at ``base``, in block order.
        O(stop - start)."""
        stop = self.line_length(base) if stop is None else stop
        member = np.arange(start, stop, dtype=np.int64)
        if self.noise == "shared":  # whole curves: replicate, then snr ascending
            n_snr = len(self.axes["snr"])
            snr_index = self.snr_order[member % n_snr]
            return base + snr_index * self.snr_stride + member // n_snr
        replicates = self.line_replicates(base)
        snr_index = self.snr_order[member // replicates]
        return base + snr_index * self.snr_stride + member % replicates

    def line_position(self, base: int, member: int) -> int:
        """Flat position of one member of a line (O(1))."""
        if self.noise == "shared":
            replicate, snr_index = divmod(member, len(self.axes["snr"]))
        else:
            snr_index, replicate = divmod(member, self.line_replicates(base))
        return base + int(self.snr_order[snr_index]) * self.snr_stride + replicate

    # ------------------------------------------------------------------ keys

    def _hash_lines(self) -> tuple[np.ndarray, np.ndarray]:
        """Raw keys of every cell (:func:`cell_key`, a line's prefix hashed once) and the seed
        bytes (the keys' first 16, or with shared noise the curve key's); a key does not depend
        on the replicate counts, so every line hashes :attr:`replicates`. O(size)."""
        keys = np.zeros((self.size, KEY_DIGEST_BYTES), dtype=np.uint8)
        shared = self.noise == "shared"
        seeds = np.zeros((self.size, 16), dtype=np.uint8) if shared else keys[:, :16]
        snr_json = [number_json(snr) for snr in self.axes["snr"]]
        replicate_json = [number_json(replicate) for replicate in range(self.replicates)]
        snr_offsets = np.arange(len(snr_json)) * self.snr_stride
        in_grid_order = np.add.outer(snr_offsets, np.arange(self.replicates)).reshape(-1)
        for base in self.line_bases():
            d, delta, gamma, T, positional, weights, table, centered = self._line_point(base)
            suffix = key_suffix(
                self.top_k, self.spectrum, self.weights_specs[(weights, T)], self.table_spec(table)
            )
            prefix = key_prefix(
                d, delta, gamma, T, self.positional_specs[(positional, T)], centered, self.noise
            )
            tails = (
                (key_middle(snr, replicate) + suffix).encode("ascii")
                for snr in snr_json
                for replicate in replicate_json
            )
            keys[base + in_grid_order] = np.frombuffer(
                line_digests(prefix, tails, in_grid_order.size), dtype=np.uint8
            ).reshape(-1, KEY_DIGEST_BYTES)
            for replicate, text in enumerate(replicate_json if shared else ()):
                digest = hashlib.sha256(curve_key_text(prefix, text, suffix).encode("ascii"))
                seeds[base + snr_offsets + replicate] = np.frombuffer(
                    digest.digest()[:16], dtype=np.uint8
                )
        return keys, seeds

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
        """Coordinates of a position along :attr:`axis_names`, then the replicate. O(axes)."""
        *indices, replicate = (int(index) for index in np.unravel_index(position, self.shape))
        axes = zip(self.axis_names, indices, strict=True)
        return (*(self.axes[axis][index] for axis, index in axes), replicate)

    def table_spec(self, table: str | None) -> dict[str, Any] | None:
        """Canonical spec of the law named ``table`` (None: the sweep sets no ``table``)."""
        return None if table is None or self.table_specs is None else self.table_specs[table]

    def _with_table(self, values: tuple) -> tuple:
        """``values`` with None in the ``table`` place where the sweep has no table. O(1)."""
        if TABLE_AXIS in self.axes:
            return values
        at = AXES.index("snr")
        return (*values[:at], None, *values[at:])

    def _line_point(self, base: int) -> tuple:
        """``(d, delta, gamma, T, positional, weights, table, centered)`` of a line."""
        d, delta, gamma, T, positional, weights, table, _, centered, _ = self._with_table(
            self.values(base)
        )
        return d, delta, gamma, T, positional, weights, table, centered

    def cell(self, position: int) -> Cell:
        """The :class:`Cell` at ``position`` (its key read from :attr:`keys`). O(axes)."""
        return self._cell(self.values(int(position)), self.key_hex(int(position)))

    def _cell(self, values: tuple, key: str) -> Cell:
        d, delta, gamma, T, positional, weights, table, snr, centered, replicate = self._with_table(
            values
        )
        cell = object.__new__(Cell)
        fields = [d, delta, gamma, T, positional, weights, snr, centered, replicate, self.top_k]
        fields += [self.positional_specs[(positional, T)], self.weights_specs[(weights, T)]]
        fields += [self.spectrum, self.table_spec(table), self.noise]
        fields += [len(self.axes["snr"]) if self.noise == "shared" else 1, table]
        for name, value in zip(_CELL_FIELDS, fields, strict=True):
            object.__setattr__(cell, name, value)
        object.__setattr__(cell, "key", key)
        return cell

    def columns(self, positions: np.ndarray) -> list[list]:
        """Coordinates of ``positions``, one list per axis, then the replicates. O(positions)."""
        indices = np.unravel_index(np.asarray(positions, dtype=np.int64), self.shape)
        columns = [
            np.asarray(self.axes[axis], dtype=object)[index].tolist()
            for axis, index in zip(self.axis_names, indices, strict=False)
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
        """What a block job receives per cell: ``key``, ``seed`` words, simulate ``kwargs`` (specs),
        ``curve`` (shared noise), seed token ``id`` and estimated ``seconds`` (docs/architecture.md,
        "The walk"). O(positions)."""
        positions = np.asarray(positions, dtype=np.int64)
        columns = self.columns(positions)[:-1]  # the replicate is not a kwarg
        laws = columns.pop(self.axis_names.index(TABLE_AXIS)) if TABLE_AXIS in self.axes else None
        words = np.ascontiguousarray(self.seed_bytes[positions]).view("<u4").tolist()
        table_of = {
            law: table_kwargs(self.table_spec(law)) for law in self.axes.get(TABLE_AXIS, ())
        }
        n_snr, shared, root = len(self.axes["snr"]), self.noise == "shared", int(root_seed)
        curve = {"curve": True} if shared else {}
        seconds: dict[tuple, float] = {}  # one estimate per setting (snr does not enter it)
        params = []
        for index, (key, seed, *row) in enumerate(
            zip(self.keys_hex(positions), words, *columns, strict=True)
        ):
            kwargs = dict(zip(AXES, row, strict=True))
            T = kwargs["T"]
            kwargs["positional"] = self.positional_specs[(kwargs["positional"], T)]
            kwargs["weights"] = self.weights_specs[(kwargs["weights"], T)]
            kwargs.update(top_k=self.top_k, spectrum=self.spectrum)
            kwargs.update(table_of[laws[index]] if laws is not None else {})
            point = (kwargs["d"], kwargs["delta"], kwargs["gamma"], T, id(kwargs["weights"]))
            if point not in seconds:
                seconds[point] = (
                    estimated_curve_seconds(kwargs, n_snr) / n_snr
                    if shared
                    else estimated_cell_seconds(kwargs)
                )
            entry = {"key": key, "seed": [*seed, root], "kwargs": kwargs, **curve}
            entry.update(id=seed_token(entry["seed"]), seconds=seconds[point])
            params.append(entry)
        return params


#: Cells built at a time when iterating over a :class:`CellSequence`.
_ITER_CHUNK = 4096


class CellSequence(Sequence):
    """A read-only sequence of a :class:`CellGrid`'s cells, built on access: the whole grid
    (``line=None``) or members ``start:stop`` of one line. O(1) memory."""

    __slots__ = ("grid", "line", "start", "stop")

    def __init__(
        self, grid: CellGrid, line: int | None = None, start: int = 0, stop: int | None = None
    ) -> None:
        self.grid = grid
        self.line = line
        self.start = start
        self.stop = (
            (grid.n_cells if line is None else grid.line_length(line)) if stop is None else stop
        )

    def __len__(self) -> int:
        return self.stop - self.start

    @property
    def positions(self) -> np.ndarray:
        """Flat grid positions of the cells, in sequence order (int64)."""
        if self.line is None:
            return self.grid.flat_positions(self.start, self.stop)
        return self.grid.line_positions(self.line, self.start, self.stop)

    def _position(self, index: int) -> int:
        if self.line is None:
            return int(self.grid.flat_positions(self.start + index, self.start + index + 1)[0])
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
    """One Snakemake job: ``key`` (:func:`block_key` of the root seed and the cells' keys) and
    its ``cells`` (one line, sorted by ``(snr, replicate)``)."""

    key: str
    cells: CellSequence

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def cell_keys(self) -> list[str]:
        """Keys of the block's cells, in block order. O(cells)."""
        return self.cells.grid.keys_hex(self.cells.positions)


@dataclass(frozen=True)
class SweepPlan:
    """Cells and blocks of one sweep: ``axes`` in order, ``cells`` over ``grid``, ``blocks``,
    ``config_sha256`` (:func:`sweep_config_sha256`), ``models`` (canonical specs used, by
    kind and name), ``table`` (the ``table`` axis' names, None without one)."""

    name: str
    axes: dict[str, list]
    replicates: int
    top_k: int
    cells: Sequence[Cell] = field(repr=False)
    blocks: list[Block] = field(repr=False)
    config_sha256: str
    models: dict[str, dict[str, dict[str, Any]]] = field(repr=False)
    grid: CellGrid = field(repr=False, compare=False)
    spectrum: str = "full"
    #: K-class sweeps: ``{"K", "means", "means_name", "spikes"}`` (``spikes``: entries of
    #: the ``spike`` dimension, :func:`attnrmt.sweep.spec.classes.spike_count`;
    #: docs/model.md, "K classes"); None for two-class sweeps.
    classes: dict[str, Any] | None = None
    table: tuple[str, ...] | None = None
    noise: str = "independent"

    @property
    def n_cells(self) -> int:
        """Number of cells."""
        return len(self.cells)

    def block_index(self) -> dict[str, Block]:
        """``{block key: block}``."""
        return {block.key: block for block in self.blocks}

    def cell_keys(self) -> list[str]:
        """Hex keys of every cell, in :attr:`cells` order, without building a :class:`Cell`."""
        return self.grid.keys_hex(self.grid.flat_positions())


@dataclass(frozen=True)
class RunPlan:
    """Plan of a run: ``run`` name, root ``seed``, ``sweeps`` ``{name: SweepPlan}``."""

    run: str
    seed: int
    sweeps: dict[str, SweepPlan]


def line_block_size(
    first_cell: Cell, line_length: int, block_size: int | str, block_seconds: float, n_snr: int = 0
) -> int:
    """Cells per block of a line: ``block_size``, or for ``"auto"`` the cost model's
    :func:`~attnrmt.sweep.spec.cost.cells_per_block` of the line's first cell. A shared-noise
    line (``n_snr`` values per curve) gets whole curves, at least one, at most all. O(1)."""
    kwargs = first_cell.simulate_kwargs()
    if not n_snr:
        if block_size != "auto":
            return int(block_size)
        return cells_per_block(estimated_cell_seconds(kwargs), block_seconds, line_length)
    replicates = line_length // n_snr
    if block_size != "auto":
        curves = -(-int(block_size) // n_snr)
    else:
        seconds = estimated_curve_seconds(kwargs, n_snr)
        curves = cells_per_block(seconds, block_seconds, replicates)
    return int(min(max(curves, 1), replicates)) * n_snr


def grid_blocks(
    grid: CellGrid, root_seed: int, block_size: int | str, block_seconds: float = 0.0
) -> list[Block]:
    """Blocks of a :class:`CellGrid` by index arithmetic (as ``tests/sweep/oracles.make_blocks``
    without an object per cell). O(lines + blocks) objects, O(cells) hashing."""
    blocks = []
    for base in grid.line_bases():
        length = grid.line_length(base)
        n_snr = len(grid.axes["snr"]) if grid.noise == "shared" else 0
        first = grid.cell(grid.line_position(base, 0))
        size = line_block_size(first, length, block_size, block_seconds, n_snr)
        positions = grid.line_positions(base)
        for start in range(0, length, size):
            stop = min(start + size, length)
            key = block_key_of_digests(root_seed, grid.keys[positions[start:stop]])
            blocks.append(Block(key, CellSequence(grid, base, start, stop)))
    return blocks


def _models_used(resolved: ResolvedSweep) -> dict[str, dict[str, dict[str, Any]]]:
    """Canonical spec of each model the sweep names, at its first ``T``, by kind; the table
    laws in the axis' order where set. O(models)."""
    T = resolved.axes["T"][0]
    kinds = (("positional", resolved.positional_specs), ("weights", resolved.weights_specs))
    models = {kind: {n: specs[(n, T)] for n in resolved.axes[kind]} for kind, specs in kinds}
    if resolved.table_specs is not None:
        models["table"] = dict(resolved.table_specs)
    return models


def sweep_config_sha256(resolved: ResolvedSweep, root_seed: int) -> str:
    """sha256 of a sweep's canonical config: axes, models, replicates, top_k, root seed,
    :data:`MODEL_VERSION`, and the keys off their defaults (not execution settings)."""
    specs = {
        kind: {f"{name}@T={T}": spec for (name, T), spec in table.items()}
        for kind, table in (
            ("positional", resolved.positional_specs),
            ("weights", resolved.weights_specs),
        )
    }
    payload = {
        "axes": {axis: resolved.axes[axis] for axis in AXES},
        "models": specs,
        "replicates": resolved.replicates if resolved.per_d is None else list(resolved.per_d),
        "top_k": resolved.top_k,
        "seed": int(root_seed),
        "model_version": MODEL_VERSION,
    }
    if resolved.spectrum != "full":  # full sweeps keep their hash
        payload["spectrum"] = resolved.spectrum
    if resolved.table_specs is not None:  # sweeps without a table law keep their hash
        payload["table"] = dict(resolved.table_specs)  # one law: the hash it always had
        if len(resolved.table_specs) > 1:  # several: their order is the grid's too
            payload["table_order"] = list(resolved.axes[TABLE_AXIS])
    if resolved.noise != "independent":  # so do independent ones
        payload["noise"] = resolved.noise
    if resolved.zip:  # and Cartesian ones
        payload["zip"] = [list(group) for group in resolved.zip]
    return hashlib.sha256(canonical_json(payload).encode("ascii")).hexdigest()


def plan_sweep(
    resolved: ResolvedSweep, root_seed: int, block_size: int | str, block_seconds: float = 0.0
) -> SweepPlan:
    """Cells, blocks and config hash of one resolved sweep. O(cells) hashing."""
    grid = CellGrid(resolved)
    return SweepPlan(
        name=resolved.name,
        axes={axis: list(values) for axis, values in grid.axes.items()},
        replicates=resolved.replicates,
        top_k=resolved.top_k,
        cells=CellSequence(grid),
        blocks=grid_blocks(grid, root_seed, block_size, block_seconds),
        config_sha256=sweep_config_sha256(resolved, root_seed),
        models=_models_used(resolved),
        spectrum=resolved.spectrum,
        grid=grid,
        classes=None
        if resolved.classes is None
        else {**resolved.classes, "spikes": spike_count(resolved.classes, grid.axes["centered"])},
        table=resolved.table,
        noise=grid.noise,
    )


def plan_run(
    config: Mapping[str, Any], resolved: Mapping[str, ResolvedSweep] | None = None
) -> RunPlan:
    """Plan every sweep of a config; ``resolved``: the sweeps the one validation resolved
    (:attr:`~attnrmt.sweep.spec.config.ValidConfig.sweeps`), else validated here.
    O(cells) hashing."""
    if resolved is None:
        config = apply_schema(config)
        resolved = resolve_sweeps(config)
    root_seed, execution = int(config["seed"]), config["execution"]
    block_size, block_seconds = execution["block_size"], float(execution["block_seconds"])
    return RunPlan(
        run=str(config["run"]),
        seed=root_seed,
        sweeps={
            name: plan_sweep(sweep, root_seed, block_size, block_seconds)
            for name, sweep in resolved.items()
        },
    )
